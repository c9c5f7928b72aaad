"""The ZooKeeper coordinator behaves as the embedded one: membership, CAS generations, fenced commits.

Ported from ``tests/unit/test_embedded_coordinator.py``; the one deliberate
difference is the compare-and-set token of a group without a generation,
``ABSENT_VERSION`` (-1), because tokens are the state znode's ``stat.version``.
"""

from __future__ import annotations

import asyncio

import pytest

from service.adapters.zookeeper import ZooKeeperCoordinator
from service.adapters.zookeeper.groups import ABSENT_VERSION
from service.core.models import GroupState, Member, Subscription, TopicPartition
from service.core.ports import Coordinator
from service.errors import BackendUnavailable, IllegalState, InvalidPayload

from .conftest import CoordinatorFactory

TP = TopicPartition


async def own(
    c: ZooKeeperCoordinator, group: str, member: str, tps: list[TopicPartition], gen: int = 1
) -> None:
    state = await c.state(group)
    new = GroupState(gen, {member: tps}, dict.fromkeys(tps, gen), {}, state.version)
    assert await c.publish(group, new, expected_version=state.version)


def test_implements_the_port() -> None:
    assert isinstance(ZooKeeperCoordinator("zookeeper://127.0.0.1:2181"), Coordinator)


# --- membership and generations ----------------------------------------------------------


async def test_members_join_replace_and_leave(coord: ZooKeeperCoordinator) -> None:
    a = Member("a", Subscription(topics=("t",)), "range", 5)
    await coord.join("g", a)
    await coord.join("g", Member("b", Subscription(pattern="t.*")))
    await coord.join("g", Member("a", Subscription(topics=("u",))))
    members = await coord.members("g")
    assert sorted(members) == ["a", "b"]
    assert members["a"].subscription.topics == ("u",)
    assert members["b"] == Member("b", Subscription(pattern="t.*"), "balanced", 0)
    assert await coord.leave("g", "a") is True
    assert await coord.leave("g", "a") is False
    assert await coord.leave("other", "a") is False
    assert list(await coord.members("g")) == ["b"]
    assert await coord.members("nobody") == {}


async def test_returned_members_and_state_are_copies(coord: ZooKeeperCoordinator) -> None:
    member = Member("a", Subscription(topics=("t",)))
    await coord.join("g", member)
    member.strategy = "range"
    (await coord.members("g"))["a"].strategy = "roundrobin"
    assert (await coord.members("g"))["a"].strategy == "balanced"

    await own(coord, "g", "a", [TP("t", 0)])
    state = await coord.state("g")
    state.assignment["a"].append(TP("t", 1))
    state.owned_since.clear()
    again = await coord.state("g")
    assert again.assignment == {"a": [TP("t", 0)]} and again.owned_since == {TP("t", 0): 1}


async def test_state_round_trips_every_field(coord: ZooKeeperCoordinator) -> None:
    state = GroupState(
        generation=7,
        assignment={"a": [TP("t", 0), TP("u", 2)], "b": [TP("t", 1)], "idle": []},
        owned_since={TP("t", 0): 3, TP("u", 2): 7, TP("t", 1): 5},
        topics={"t": 2, "u": 3},
    )
    assert await coord.publish("g", state, expected_version=ABSENT_VERSION)
    stored = await coord.state("g")
    assert stored == GroupState(7, state.assignment, state.owned_since, state.topics, version=0)


async def test_publish_is_compare_and_set(coord: ZooKeeperCoordinator) -> None:
    assert await coord.state("g") == GroupState(version=ABSENT_VERSION)
    first = GroupState(generation=1, assignment={"a": [TP("t", 0)]})
    assert await coord.publish("g", first, expected_version=ABSENT_VERSION)
    assert first.version == 0  # the caller learns the new token: the new znode's version
    stale = GroupState(generation=2)
    assert not await coord.publish("g", stale, expected_version=ABSENT_VERSION)
    assert not await coord.publish("g", stale, expected_version=5)
    assert (await coord.state("g")).generation == 1
    second = GroupState(generation=2)
    assert await coord.publish("g", second, expected_version=0)
    assert second.version == 1
    stored = await coord.state("g")
    assert (stored.generation, stored.version) == (2, 1)
    assert not await coord.publish("g", GroupState(generation=3), expected_version=0)
    assert not await coord.publish("never", GroupState(generation=1), expected_version=0)


async def test_concurrent_publishers_only_one_wins(coord: ZooKeeperCoordinator) -> None:
    results = await asyncio.gather(
        *(coord.publish("g", GroupState(generation=i), expected_version=ABSENT_VERSION) for i in range(10))
    )
    assert sum(results) == 1
    state = await coord.state("g")
    results = await asyncio.gather(
        *(coord.publish("g", GroupState(generation=i), expected_version=state.version) for i in range(10))
    )
    assert sum(results) == 1


async def test_groups_lists_groups_with_members_or_offsets(coord: ZooKeeperCoordinator) -> None:
    await coord.join("members-only", Member("a", Subscription(topics=("t",))))
    await coord.commit("offsets-only", {TP("t", 0): 3})
    await coord.join("left", Member("a", Subscription()))
    await coord.leave("left", "a")
    await coord.publish("state-only", GroupState(generation=1), expected_version=ABSENT_VERSION)
    assert await coord.groups() == ["members-only", "offsets-only"]


async def test_a_single_replica_leads(coord: ZooKeeperCoordinator) -> None:
    assert coord.is_leader() is True
    assert coord.leader_id == "replica-a"


# --- commits and fencing -----------------------------------------------------------------


async def test_commit_and_read_back(coord: ZooKeeperCoordinator) -> None:
    await coord.commit("g", {TP("t", 0): 10, TP("t", 1): 0})
    await coord.commit("g", {TP("t", 0): 12, TP("u", 3): 7})
    await coord.commit("h", {TP("t", 0): 99})
    await coord.commit("g", {})
    assert await coord.committed("g") == {TP("t", 0): 12, TP("t", 1): 0, TP("u", 3): 7}
    assert await coord.committed("g", [TP("t", 1), TP("t", 2)]) == {TP("t", 1): 0}
    assert await coord.committed("nobody") == {}
    assert await coord.committed("nobody", [TP("t", 0)]) == {}


async def test_commit_with_member_requires_ownership(coord: ZooKeeperCoordinator) -> None:
    await own(coord, "g", "a", [TP("t", 0), TP("t", 1)], gen=3)
    await coord.commit("g", {TP("t", 0): 5, TP("t", 1): 6}, member_id="a", generation=3)
    await coord.commit("g", {TP("t", 0): 7}, member_id="a")  # no generation: ownership only
    with pytest.raises(IllegalState, match="does not own partition t-2"):
        await coord.commit("g", {TP("t", 0): 8, TP("t", 2): 1}, member_id="a", generation=3)
    with pytest.raises(IllegalState, match="does not own"):
        await coord.commit("g", {TP("t", 0): 8}, member_id="b", generation=3)
    with pytest.raises(IllegalState):
        await coord.commit("empty-group", {TP("t", 0): 8}, member_id="a")
    # A refused commit stores nothing, not even its valid part.
    assert await coord.committed("g") == {TP("t", 0): 7, TP("t", 1): 6}
    assert await coord.committed("empty-group") == {}
    # Without a member (manual assignment), no fencing.
    await coord.commit("g", {TP("t", 2): 1})
    assert (await coord.committed("g"))[TP("t", 2)] == 1


async def test_commit_fenced_by_generation_of_ownership(coord: ZooKeeperCoordinator) -> None:
    state = GroupState(
        generation=5,
        assignment={"a": [TP("t", 0), TP("t", 1)]},
        owned_since={TP("t", 0): 2, TP("t", 1): 5},
    )
    assert await coord.publish("g", state, expected_version=ABSENT_VERSION)
    # Held t-0 continuously since generation 2: a view from generation 3 is still good for it.
    await coord.commit("g", {TP("t", 0): 1}, member_id="a", generation=3)
    # t-1 was (re)gained in generation 5: positions read in generation 3 are stale.
    with pytest.raises(IllegalState, match="only since generation 5"):
        await coord.commit("g", {TP("t", 1): 1}, member_id="a", generation=3)
    await coord.commit("g", {TP("t", 1): 1}, member_id="a", generation=5)


async def test_a_rebalance_between_fence_and_write_is_caught(
    coord: ZooKeeperCoordinator, zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    """The fence is checked inside the transaction, not only before it.

    The commit of ``a`` reads a generation in which it owns t-0; before its
    transaction goes out, another replica publishes a generation that moves
    t-0 to ``b``. The transaction's version check fails, the commit is
    validated again and refused.
    """
    other = make_coordinator(zk_url, node_id="replica-b")
    await other.start()
    await own(coord, "g", "a", [TP("t", 0)], gen=1)
    read_state = coord._groups.state

    async def state_then_rebalance(group: str) -> GroupState:
        state = await read_state(group)
        if state.generation == 1:
            moved = GroupState(2, {"b": [TP("t", 0)]}, {TP("t", 0): 2}, {}, state.version)
            assert await other.publish(group, moved, expected_version=state.version)
        return state

    coord._groups.state = state_then_rebalance  # type: ignore[method-assign]
    with pytest.raises(IllegalState, match="does not own partition t-0 in generation 2"):
        await coord.commit("g", {TP("t", 0): 5}, member_id="a", generation=1)
    assert await other.committed("g") == {}

    # A rebalance that leaves the partition with its owner only costs a retry.
    async def state_then_harmless_rebalance(group: str) -> GroupState:
        state = await read_state(group)
        if state.generation == 2:
            same = GroupState(3, {"b": [TP("t", 0)]}, {TP("t", 0): 2}, {}, state.version)
            assert await other.publish(group, same, expected_version=state.version)
        return state

    coord._groups.state = state_then_harmless_rebalance  # type: ignore[method-assign]
    await coord.commit("g", {TP("t", 0): 6}, member_id="b", generation=2)
    assert await other.committed("g") == {TP("t", 0): 6}


@pytest.mark.parametrize("bad", [-1, 1 << 63])
async def test_commit_rejects_impossible_offsets(coord: ZooKeeperCoordinator, bad: int) -> None:
    with pytest.raises(InvalidPayload):
        await coord.commit("g", {TP("t", 0): 1, TP("t", 1): bad})
    assert await coord.committed("g") == {}


async def test_largest_offset_round_trips(coord: ZooKeeperCoordinator) -> None:
    await coord.commit("g", {TP("t", (1 << 31) - 1): (1 << 63) - 1})
    assert await coord.committed("g") == {TP("t", (1 << 31) - 1): (1 << 63) - 1}


@pytest.mark.parametrize("group", ["", "x" * 256])
async def test_group_names_are_1_to_255_chars(coord: ZooKeeperCoordinator, group: str) -> None:
    with pytest.raises(InvalidPayload):
        await coord.commit(group, {TP("t", 0): 1})
    with pytest.raises(InvalidPayload):
        await coord.join(group, Member("a", Subscription()))
    assert await coord.members(group) == {}
    assert await coord.committed(group) == {}


async def test_empty_topic_names_are_refused(coord: ZooKeeperCoordinator) -> None:
    with pytest.raises(InvalidPayload):
        await coord.commit("g", {TP("", 0): 1})


async def test_concurrent_commits_are_each_atomic(coord: ZooKeeperCoordinator, zk_url: str) -> None:
    # Every commit writes the same value to two partitions: any torn commit would show.
    await asyncio.gather(*(coord.commit("g", {TP("t", 0): i, TP("t", 1 + i % 3): i}) for i in range(100)))
    seen = await coord.committed("g")
    assert set(seen) == {TP("t", p) for p in range(4)}
    assert all(0 <= off < 100 for off in seen.values())
    for i in range(100, 110):  # sequential commits: the last one wins
        await coord.commit("g", {TP("t", 0): i, TP("t", 1): i})
    assert (await coord.committed("g"))[TP("t", 0)] == 109


async def test_not_running_is_unavailable(zk_url: str, make_coordinator: CoordinatorFactory) -> None:
    c = make_coordinator(zk_url)
    with pytest.raises(BackendUnavailable):
        await c.commit("g", {TP("t", 0): 1})
    assert c.is_leader() is False
    await c.start()
    await c.commit("g", {TP("t", 0): 1})
    await c.stop()
    await c.stop()  # idempotent
    assert c.is_leader() is False
    with pytest.raises(BackendUnavailable):
        await c.committed("g")
    with pytest.raises(BackendUnavailable):
        await c.state("g")
    # Started again, it finds what it committed: offsets live in ZooKeeper, not in the process.
    await c.start()
    assert await c.committed("g") == {TP("t", 0): 1}
