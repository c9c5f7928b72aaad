"""The Coordinator port's contract, run against every adapter: embedded, ZooKeeper on a real server,
and the split coordinator of a Kafka log (embedded for groups, committed offsets in the session
broker's group coordinator, under group and topic names of each test's own).

Groups behave the same whichever coordinator keeps them, so each adapter gives
the same answers to the same calls. A compare-and-set token is opaque: a caller
only ever passes back the ``version`` it read from ``state`` (or learned from
its own ``publish``), never a number of its own. What only one adapter has
(the journal and its crash recovery, sessions, leader election, transactions
raced by another replica) is tested beside it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from deploy.local.kafka_broker import KafkaBroker
from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.adapters.kafka import KafkaLog
from service.adapters.kafka.group_offsets import KafkaGroupOffsets
from service.adapters.kafka.options import KafkaOptions
from service.adapters.share_states import MAX_WRITE_BYTES, ShareStoreLimits
from service.adapters.split_offsets import SplitOffsetsCoordinator
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.core.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from service.core.models import GroupState, Member, Subscription, TopicPartition
from service.core.ports import Coordinator, GroupOffsets
from service.core.rules import MAX_PARTITION
from service.core.shares.delivery import AckType
from service.core.shares.state import SharePartition
from service.errors import (
    BackendUnavailable,
    IllegalState,
    InvalidPayload,
    LockTimeout,
    ShareStateTooLarge,
)
from tests.helpers import own
from tests.integration.zookeeper.conftest import (
    CONNECT_TIMEOUT_MS,
    REQUEST_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    chroot_url,
)

TP = TopicPartition
ADAPTERS = ["embedded", "zookeeper", "split"]
# The topics the contract commits to, and how many partitions each has on the Kafka broker.
COMMITTED_TOPICS = {"t": 4, "u": 4}


class OwnNames:
    """Kafka's group offsets under names of one test's own: group ``g`` is ``{groups}g`` in Kafka
    and topic ``t`` is ``{topics}t``, so the contract's plain names meet no other test's on the
    shared broker, and the groups listed are this test's only."""

    def __init__(self, offsets: GroupOffsets, *, groups: str, topics: str) -> None:
        self._offsets = offsets
        self._groups = groups
        self._topics = topics

    async def start(self) -> None:
        await self._offsets.start()

    async def stop(self) -> None:
        await self._offsets.stop()

    def _there(self, tp: TopicPartition) -> TopicPartition:
        return TP(self._topics + tp.topic, tp.partition)

    async def commit(self, group: str, entries: Sequence[tuple[TopicPartition, int]]) -> None:
        await self._offsets.commit(self._groups + group, [(self._there(tp), o) for tp, o in entries])

    async def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        wanted = None if partitions is None else [self._there(tp) for tp in partitions]
        found = await self._offsets.committed(self._groups + group, wanted)
        return {TP(tp.topic.removeprefix(self._topics), tp.partition): o for tp, o in found.items()}

    async def groups(self) -> Collection[str]:
        listed = await self._offsets.groups()
        return {g.removeprefix(self._groups) for g in listed if g.startswith(self._groups)}


@pytest.fixture(scope="module")
def committed_topics(kafka_broker: KafkaBroker) -> str:
    """The prefix of this module's topics on the Kafka broker (``COMMITTED_TOPICS``), made once."""
    prefix = f"cp-{uuid.uuid4().hex[:8]}-"

    async def create() -> None:
        async with KafkaLog(kafka_broker.url, KafkaOptions(request_timeout_ms=10_000)) as log:
            for topic, partitions in COMMITTED_TOPICS.items():
                await log.create_topic(prefix + topic, partitions, 1, {})

    # in a thread of its own: the fixture may be asked for inside a test's running event loop
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, create()).result()
    return prefix


def build(request: pytest.FixtureRequest, tmp_path: Path, **kw: Any) -> Coordinator:
    if request.param == "embedded":
        return EmbeddedCoordinator(tmp_path, **kw)
    if request.param == "split":
        broker: KafkaBroker = request.getfixturevalue("kafka_broker")
        offsets = KafkaGroupOffsets(broker.url, KafkaOptions(request_timeout_ms=5_000))
        own_names = OwnNames(
            offsets,
            groups=f"cp-{uuid.uuid4().hex[:12]}-",
            topics=request.getfixturevalue("committed_topics"),
        )
        return SplitOffsetsCoordinator(EmbeddedCoordinator(tmp_path, **kw), own_names)
    return ZooKeeperCoordinator(  # a chroot of its own: its own deployment on the shared server
        chroot_url(request.getfixturevalue("zookeeper")),
        node_id="replica-a",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        connect_timeout_ms=CONNECT_TIMEOUT_MS,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        **kw,
    )


@pytest.fixture(params=ADAPTERS)
async def coord(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Coordinator]:
    c = build(request, tmp_path)
    await c.start()
    try:
        yield c
    finally:
        await c.stop()


SMALL = ShareStoreLimits(max_groups=2, max_partitions=3, max_state_bytes=2000)


@pytest.fixture(params=ADAPTERS)
async def small(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Coordinator]:
    """A coordinator that keeps the states of 2 share groups of 3 partitions, of 2,000 bytes each."""
    c = build(request, tmp_path, share_limits=SMALL)
    await c.start()
    try:
        yield c
    finally:
        await c.stop()


async def test_implements_the_port(coord: Coordinator) -> None:
    assert isinstance(coord, Coordinator)


async def test_a_single_replica_leads(coord: Coordinator) -> None:
    assert coord.is_leader() is True


# --- membership and generations ----------------------------------------------------------


async def test_members_join_replace_and_leave(coord: Coordinator) -> None:
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


async def test_returned_members_and_state_are_copies(coord: Coordinator) -> None:
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


async def test_state_round_trips_every_field(coord: Coordinator) -> None:
    absent = (await coord.state("g")).version
    state = GroupState(
        generation=7,
        assignment={"a": [TP("t", 0), TP("u", 2)], "b": [TP("t", 1)], "idle": []},
        owned_since={TP("t", 0): 3, TP("u", 2): 7, TP("t", 1): 5},
        topics={"t": 2, "u": 3},
    )
    assert await coord.publish("g", state, expected_version=absent)
    stored = await coord.state("g")
    assert stored == GroupState(7, state.assignment, state.owned_since, state.topics, version=state.version)


async def test_publish_is_compare_and_set(coord: Coordinator) -> None:
    absent = await coord.state("g")
    assert absent == GroupState(version=absent.version)  # generation 0, empty
    first = GroupState(generation=1, assignment={"a": [TP("t", 0)]})
    assert await coord.publish("g", first, expected_version=absent.version)
    assert first.version != absent.version  # the caller learns the new token
    assert (await coord.state("g")).version == first.version
    stale = GroupState(generation=2)
    assert not await coord.publish("g", stale, expected_version=absent.version)
    assert (await coord.state("g")).generation == 1
    second = GroupState(generation=2)
    assert await coord.publish("g", second, expected_version=first.version)
    assert second.version not in (absent.version, first.version)
    stored = await coord.state("g")
    assert (stored.generation, stored.version) == (2, second.version)
    assert not await coord.publish("g", GroupState(generation=3), expected_version=first.version)
    # Another group's token means nothing here.
    assert not await coord.publish("never", GroupState(generation=1), expected_version=second.version)
    assert (await coord.state("never")).generation == 0


async def test_concurrent_publishers_only_one_wins(coord: Coordinator) -> None:
    for _ in range(2):  # creating the group's state, then replacing it
        token = (await coord.state("g")).version
        results = await asyncio.gather(
            *(coord.publish("g", GroupState(generation=i), expected_version=token) for i in range(10))
        )
        assert sum(results) == 1


async def test_groups_lists_groups_with_members_or_offsets(coord: Coordinator) -> None:
    await coord.join("members-only", Member("a", Subscription(topics=("t",))))
    await coord.commit("offsets-only", {TP("t", 0): 3})
    await coord.join("left", Member("a", Subscription()))
    await coord.leave("left", "a")
    absent = (await coord.state("state-only")).version
    await coord.publish("state-only", GroupState(generation=1), expected_version=absent)
    assert await coord.groups() == ["members-only", "offsets-only"]


async def test_coordinated_groups_have_members_never_only_offsets(coord: Coordinator) -> None:
    await coord.join("members-only", Member("a", Subscription(topics=("t",))))
    await coord.commit("offsets-only", {TP("t", 0): 3})
    coordinated = await coord.coordinated_groups()
    assert coordinated == sorted(coordinated)
    assert "members-only" in coordinated and "offsets-only" not in coordinated
    assert "offsets-only" in await coord.groups()


# --- commits and fencing -----------------------------------------------------------------


async def test_commit_and_read_back(coord: Coordinator) -> None:
    await coord.commit("g", {TP("t", 0): 10, TP("t", 1): 0})
    await coord.commit("g", {TP("t", 0): 12, TP("u", 3): 7})
    await coord.commit("h", {TP("t", 0): 99})
    await coord.commit("g", {})
    assert await coord.committed("g") == {TP("t", 0): 12, TP("t", 1): 0, TP("u", 3): 7}
    assert await coord.committed("g", [TP("t", 1), TP("t", 2)]) == {TP("t", 1): 0}
    assert await coord.committed("nobody") == {}
    assert await coord.committed("nobody", [TP("t", 0)]) == {}


async def test_commit_with_member_requires_ownership(coord: Coordinator) -> None:
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


async def test_commit_fenced_by_generation_of_ownership(coord: Coordinator) -> None:
    state = GroupState(
        generation=5,
        assignment={"a": [TP("t", 0), TP("t", 1)]},
        owned_since={TP("t", 0): 2, TP("t", 1): 5},
    )
    assert await coord.publish("g", state, expected_version=(await coord.state("g")).version)
    # Held t-0 continuously since generation 2: a view from generation 3 is still good for it.
    await coord.commit("g", {TP("t", 0): 1}, member_id="a", generation=3)
    # t-1 was (re)gained in generation 5: positions read in generation 3 are stale.
    with pytest.raises(IllegalState, match="only since generation 5"):
        await coord.commit("g", {TP("t", 1): 1}, member_id="a", generation=3)
    await coord.commit("g", {TP("t", 1): 1}, member_id="a", generation=5)


@pytest.mark.parametrize("bad", [-1, 1 << 63])
async def test_commit_rejects_impossible_offsets(coord: Coordinator, bad: int) -> None:
    with pytest.raises(InvalidPayload):
        await coord.commit("g", {TP("t", 0): 1, TP("t", 1): bad})
    assert await coord.committed("g") == {}


async def test_largest_offset_round_trips(coord: Coordinator) -> None:
    # Kafka takes commits for the partitions it has only: the split coordinator's last one.
    last = COMMITTED_TOPICS["t"] - 1 if isinstance(coord, SplitOffsetsCoordinator) else MAX_PARTITION
    await coord.commit("g", {TP("t", last): (1 << 63) - 1})
    assert await coord.committed("g") == {TP("t", last): (1 << 63) - 1}


@pytest.mark.parametrize("group", ["", "x" * 256])
async def test_group_names_are_1_to_255_chars(coord: Coordinator, group: str) -> None:
    with pytest.raises(InvalidPayload):
        await coord.commit(group, {TP("t", 0): 1})
    with pytest.raises(InvalidPayload):
        await coord.join(group, Member("a", Subscription()))
    assert await coord.members(group) == {}
    assert await coord.committed(group) == {}


async def test_empty_topic_names_are_refused(coord: Coordinator) -> None:
    with pytest.raises(InvalidPayload):
        await coord.commit("g", {TP("", 0): 1})


async def test_concurrent_commits_are_each_atomic(coord: Coordinator) -> None:
    # Every commit writes the same value to t-0 and to one other partition. Whatever order
    # they were applied in, the last one wrote both: a torn commit would show as a mismatch.
    await asyncio.gather(*(coord.commit("g", {TP("t", 0): i, TP("t", 1 + i % 3): i}) for i in range(100)))
    seen = await coord.committed("g")
    assert set(seen) == {TP("t", p) for p in range(4)}
    last = seen[TP("t", 0)]
    assert seen[TP("t", 1 + last % 3)] == last
    for i in range(100, 110):  # sequential commits: the last one wins
        await coord.commit("g", {TP("t", 0): i, TP("t", 1): i})
    assert (await coord.committed("g"))[TP("t", 0)] == 109


# --- ACL bindings ------------------------------------------------------------------------

ALICE_READS = AclBinding(
    "User:alice", ResourceType.TOPIC, "orders", PatternType.LITERAL, Operation.READ, Permission.ALLOW
)
TEAM_A = AclBinding(
    "User:alice", ResourceType.TOPIC, "team-a.", PatternType.PREFIXED, Operation.ALL, Permission.ALLOW
)
BOB_DENIED = AclBinding(
    "User:bob", ResourceType.GROUP, "g", PatternType.LITERAL, Operation.READ, Permission.DENY, host="10.0.0.1"
)
CLUSTER = AclBinding(
    "User:carol",
    ResourceType.CLUSTER,
    "kafka-cluster",
    PatternType.LITERAL,
    Operation.CREATE,
    Permission.ALLOW,
)
ODD_NAME = AclBinding(
    "User:a b/c", ResourceType.GROUP, "../x?y", PatternType.PREFIXED, Operation.DESCRIBE, Permission.ALLOW
)


async def test_acls_are_added_once_listed_and_removed_by_filter(coord: Coordinator) -> None:
    assert list(await coord.acls()) == []
    await coord.add_acls([ALICE_READS, TEAM_A, BOB_DENIED, CLUSTER, ODD_NAME])
    await coord.add_acls([ALICE_READS])  # already there: stays once
    assert sorted(await coord.acls(), key=repr) == sorted(
        [ALICE_READS, TEAM_A, BOB_DENIED, CLUSTER, ODD_NAME], key=repr
    )
    removed = await coord.remove_acls(AclFilter(principal="User:alice"))
    assert sorted(removed, key=repr) == sorted([ALICE_READS, TEAM_A], key=repr)
    assert await coord.remove_acls(AclFilter(principal="User:alice")) == []
    assert sorted(await coord.acls(), key=repr) == sorted([BOB_DENIED, CLUSTER, ODD_NAME], key=repr)
    assert await coord.remove_acls(
        AclFilter(resource_type=ResourceType.GROUP, resource_name="../x?yz", match=True)
    ) == [ODD_NAME]


async def test_acls_outlive_the_coordinator(coord: Coordinator) -> None:
    await coord.add_acls([ALICE_READS, CLUSTER])
    await coord.stop()
    await coord.start()
    assert sorted(await coord.acls(), key=repr) == sorted([ALICE_READS, CLUSTER], key=repr)


# --- locks ---------------------------------------------------------------------------------


async def test_a_lock_has_one_holder_at_a_time(coord: Coordinator) -> None:
    inside: list[int] = []
    overlaps = 0

    async def hold(n: int) -> None:
        nonlocal overlaps
        async with coord.lock("registry", timeout_s=30):
            overlaps += bool(inside)
            inside.append(n)
            await asyncio.sleep(0.01)
            inside.remove(n)

    await asyncio.gather(*(hold(n) for n in range(8)))
    assert overlaps == 0
    async with coord.lock("other/name .."):  # any name; another name is another lock
        async with coord.lock("registry", timeout_s=5):
            pass


async def test_a_lock_not_acquired_in_time_times_out_and_leaves_it_free(coord: Coordinator) -> None:
    async with coord.lock("busy"):
        with pytest.raises(LockTimeout):
            async with coord.lock("busy", timeout_s=0.2):
                pytest.fail("entered a held lock")
        waiter = asyncio.ensure_future(_enter(coord, "busy"))
        await asyncio.sleep(0.1)
        waiter.cancel()  # a waiter that gives up takes nothing with it
        with pytest.raises(asyncio.CancelledError):
            await waiter
    async with coord.lock("busy", timeout_s=5):
        pass


async def test_a_lock_says_whether_someone_holds_or_waits_for_it(coord: Coordinator) -> None:
    assert not await coord.contended("never-taken")
    async with coord.lock("taken"):
        assert await coord.contended("taken")
        assert not await coord.contended("never-taken")
    assert not await coord.contended("taken")


async def _enter(coord: Coordinator, name: str) -> None:
    async with coord.lock(name, timeout_s=30):
        pass


# --- share-partition states --------------------------------------------------------------


def delivered(start: int, n: int, member: str = "m-1") -> SharePartition:
    """A share-partition that gave ``n`` records from ``start`` on to ``member``, the first accepted."""
    sp = SharePartition(start)
    sp.acquire(member, 1_000, max_records=n, log_offsets=range(start, start + n))
    sp.acknowledge(member, [start], AckType.ACCEPT, 1_001)
    return sp


async def versions(coord: Coordinator, group: str) -> dict[TopicPartition, int]:
    return {tp: version for tp, (_, version) in (await coord.share_states(group)).items()}


async def test_share_states_round_trip_with_their_versions(coord: Coordinator) -> None:
    t0, t1 = delivered(0, 5), delivered(40, 2, member="m-2")
    assert await coord.store_share_states(
        "sg", {TP("t", 0): (t0.to_json(), -1), TP("t", 1): (t1.to_json(), -1)}
    )
    stored = await coord.share_states("sg")
    assert SharePartition.from_json(stored[TP("t", 0)][0]) == t0
    assert SharePartition.from_json(stored[TP("t", 1)][0]) == t1
    assert -1 not in await versions(coord, "sg")  # a stored state has a version of its own
    # Only the partitions asked for, of those that have a state.
    assert list(await coord.share_states("sg", [TP("t", 1), TP("t", 7), TP("u", 0)])) == [TP("t", 1)]
    assert await coord.share_states("sg", []) == {}
    assert await coord.share_states("nobody") == {}
    assert await coord.store_share_states("sg", {}) is True  # nothing to store: nothing in the way


async def test_share_store_is_compare_and_set(coord: Coordinator) -> None:
    sp = delivered(0, 3)
    assert await coord.store_share_states("sg", {TP("t", 0): (sp.to_json(), -1)}) is True
    [first] = (await versions(coord, "sg")).values()
    # A second creation, and a version that is not the stored one, store nothing.
    other = delivered(9, 1).to_json()
    assert await coord.store_share_states("sg", {TP("t", 0): (other, -1)}) is False
    assert await coord.store_share_states("sg", {TP("t", 0): (other, first + 1)}) is False
    assert SharePartition.from_json((await coord.share_states("sg"))[TP("t", 0)][0]) == sp
    sp.acknowledge("m-1", [1, 2], AckType.ACCEPT, 1_002)
    assert await coord.store_share_states("sg", {TP("t", 0): (sp.to_json(), first)}) is True
    state, second = (await coord.share_states("sg"))[TP("t", 0)]
    assert second != first and SharePartition.from_json(state) == sp
    assert await coord.store_share_states("sg", {TP("t", 0): (state, first)}) is False  # used up
    # Another group's version means nothing here, nor does one never given out.
    assert await coord.store_share_states("other", {TP("t", 0): (state, second)}) is False
    for never in (1 << 31, 1 << 62, 1 << 70):
        assert await coord.store_share_states("sg", {TP("t", 0): (state, never)}) is False
        assert await coord.store_share_states("sg", {TP("t", 5): (state, never)}) is False
    assert await versions(coord, "sg") == {TP("t", 0): second}


async def test_a_share_store_of_several_partitions_is_all_or_nothing(coord: Coordinator) -> None:
    assert await coord.store_share_states("sg", {TP("t", 0): ({"n": 0}, -1), TP("t", 1): ({"n": 0}, -1)})
    before = await versions(coord, "sg")
    stale = {
        TP("t", 0): ({"n": 1}, before[TP("t", 0)]),  # still the stored version
        TP("t", 1): ({"n": 1}, -1),  # but this one exists
        TP("t", 2): ({"n": 1}, -1),  # and this one would be new
    }
    assert await coord.store_share_states("sg", stale) is False
    stored = await coord.share_states("sg")
    assert {tp: state for tp, (state, _) in stored.items()} == {TP("t", 0): {"n": 0}, TP("t", 1): {"n": 0}}
    assert await versions(coord, "sg") == before
    fresh = {tp: ({"n": 2}, v) for tp, v in before.items()} | {TP("t", 2): ({"n": 2}, -1)}
    assert await coord.store_share_states("sg", fresh) is True
    assert {tp: state for tp, (state, _) in (await coord.share_states("sg")).items()} == {
        TP("t", p): {"n": 2} for p in range(3)
    }


async def test_concurrent_share_writers_only_one_wins_whole(coord: Coordinator) -> None:
    tps = [TP("t", 0), TP("t", 1), TP("u", 0)]
    read = dict.fromkeys(tps, -1)
    for _ in range(2):  # creating the states, then replacing them
        results = await asyncio.gather(
            *(
                coord.store_share_states("sg", {tp: ({"writer": w}, read[tp]) for tp in tps})
                for w in range(10)
            )
        )
        assert sum(results) == 1
        stored = await coord.share_states("sg")
        # All of the winner's states, none of anyone else's.
        assert {state["writer"] for state, _ in stored.values()} == {results.index(True)}
        read = await versions(coord, "sg")


async def test_returned_share_states_are_copies(coord: Coordinator) -> None:
    state: dict[str, Any] = {"start": 0, "end": 1, "records": [[0, "ACQUIRED", 1, "m", 5, None]]}
    assert await coord.store_share_states("sg", {TP("t", 0): (state, -1)})
    state["records"].clear()
    read, _ = (await coord.share_states("sg"))[TP("t", 0)]
    read["records"][0][1] = "AVAILABLE"
    again, _ = (await coord.share_states("sg"))[TP("t", 0)]
    assert again == {"start": 0, "end": 1, "records": [[0, "ACQUIRED", 1, "m", 5, None]]}


async def test_odd_names_and_texts_round_trip(coord: Coordinator) -> None:
    odd = {"start": 0, "end": 1, "records": [[0, "AVAILABLE", 2, None, 0, "bad \ud800 ünï 🚀 \x00"]]}
    tps = [TP("a/b", 0), TP("..", 1), TP("%41", (1 << 31) - 1)]
    for group in ("../x", "ünïcødé 🚀", "x" * 255):
        assert await coord.store_share_states(group, {tp: (odd, -1) for tp in tps})
        assert {tp: state for tp, (state, _) in (await coord.share_states(group)).items()} == dict.fromkeys(
            tps, odd
        )
    assert await coord.share_groups() == sorted(["../x", "ünïcødé 🚀", "x" * 255])


async def test_share_states_are_deleted_and_share_groups_listed(coord: Coordinator) -> None:
    assert await coord.share_groups() == []
    assert await coord.store_share_states(
        "a", {TP("t", 0): ({}, -1), TP("t", 1): ({}, -1), TP("u", 0): ({}, -1)}
    )
    a = await versions(coord, "a")
    assert await coord.store_share_states("b", {TP("t", 0): ({}, -1)})
    await coord.commit("consumers-only", {TP("t", 0): 1})
    assert await coord.share_groups() == ["a", "b"]
    assert "a" not in await coord.groups()  # share groups are not consumer groups

    await coord.delete_share_states("a", [TP("t", 1), TP("t", 9)])
    assert sorted(await coord.share_states("a")) == [TP("t", 0), TP("u", 0)]
    # A deleted state has no version any more: the old one is stale, -1 creates it again.
    assert await coord.store_share_states("a", {TP("t", 1): ({"again": 1}, a[TP("t", 1)])}) is False
    assert await coord.store_share_states("a", {TP("t", 1): ({"again": 1}, -1)})
    await coord.delete_share_states("a")
    assert await coord.share_states("a") == {}
    assert await coord.share_groups() == ["b"]
    await coord.delete_share_states("a")  # nothing left: nothing to do
    await coord.delete_share_states("nobody", [TP("t", 0)])
    await coord.delete_share_states("")
    assert await coord.store_share_states("a", {TP("t", 0): ({"new": 1}, -1)})  # a reset group starts over
    assert await coord.share_groups() == ["a", "b"]
    assert list(await coord.share_states("b")) == [TP("t", 0)]


async def test_share_states_outlive_the_coordinator(coord: Coordinator) -> None:
    sp = delivered(10, 4)
    assert await coord.store_share_states("sg", {TP("t", 0): (sp.to_json(), -1), TP("t", 1): ({}, -1)})
    await coord.delete_share_states("sg", [TP("t", 1)])
    before = await versions(coord, "sg")
    await coord.stop()
    await coord.start()
    stored = await coord.share_states("sg")
    assert list(stored) == [TP("t", 0)]
    assert SharePartition.from_json(stored[TP("t", 0)][0]) == sp
    assert await versions(coord, "sg") == before
    assert await coord.store_share_states("sg", {TP("t", 0): ({}, before[TP("t", 0)])}) is True


async def test_share_states_need_a_running_coordinator(coord: Coordinator) -> None:
    await coord.stop()
    with pytest.raises(BackendUnavailable):
        await coord.store_share_states("sg", {TP("t", 0): ({}, -1)})
    with pytest.raises(BackendUnavailable):
        await coord.share_states("sg")


@pytest.mark.parametrize(
    ("group", "tp", "update"),
    [
        ("", TP("t", 0), ({}, -1)),
        ("x" * 256, TP("t", 0), ({}, -1)),
        ("sg", TP("", 0), ({}, -1)),
        ("sg", TP("t", -1), ({}, -1)),
        ("sg", TP("t", 0), ({}, -2)),
        ("sg", TP("t", 0), ({}, True)),
        ("sg", TP("t", 0), ([1, 2], -1)),
        ("sg", TP("t", 0), ({"not json": {1, 2}}, -1)),
    ],
)
async def test_share_states_no_coordinator_keeps_are_refused(
    coord: Coordinator, group: str, tp: TopicPartition, update: tuple[Any, Any]
) -> None:
    with pytest.raises(InvalidPayload):
        await coord.store_share_states(group, {TP("ok", 0): ({}, -1), tp: update})
    assert await coord.share_groups() == []


async def test_a_share_state_over_the_bound_is_refused(small: Coordinator) -> None:
    fits = {"records": ["x" * 1800]}
    with pytest.raises(ShareStateTooLarge, match="more than the 2000"):  # even beside one that fits
        await small.store_share_states(
            "sg", {TP("t", 0): (fits, -1), TP("t", 1): ({"records": ["x" * 2000]}, -1)}
        )
    assert await small.share_states("sg") == {}
    assert await small.store_share_states("sg", {TP("t", 0): (fits, -1)})


async def test_share_states_over_what_one_write_stores_are_refused(coord: Coordinator) -> None:
    third = {"records": ["x" * (MAX_WRITE_BYTES // 3)]}  # each fits; three together do not
    with pytest.raises(ShareStateTooLarge, match="store them in several"):
        await coord.store_share_states("sg", {TP("t", p): (third, -1) for p in range(3)})
    assert await coord.share_states("sg") == {}
    assert await coord.store_share_states("sg", {TP("t", p): (third, -1) for p in range(2)})
    assert await coord.store_share_states("sg", {TP("t", 2): (third, -1)})
    assert len(await coord.share_states("sg")) == 3


async def test_share_groups_and_their_partitions_are_limited(small: Coordinator) -> None:
    three = {TP("t", p): ({}, -1) for p in range(3)}
    assert await small.store_share_states("a", three)
    with pytest.raises(IllegalState, match="4 partitions"):
        await small.store_share_states("a", {TP("t", 3): ({}, -1)})
    assert await small.store_share_states("b", {TP("t", 0): ({}, -1)})
    with pytest.raises(IllegalState, match="2 share groups"):
        await small.store_share_states("c", {TP("t", 0): ({}, -1)})
    with pytest.raises(IllegalState, match="4 partitions"):  # two new at once, past the bound: neither
        await small.store_share_states(
            "b", {TP("t", 1): ({}, -1), TP("t", 2): ({}, -1), TP("t", 3): ({}, -1)}
        )
    assert list(await small.share_states("b")) == [TP("t", 0)]
    # Replacing what is stored is never refused, and a deleted group makes room.
    read = await versions(small, "a")
    assert await small.store_share_states("a", {tp: ({"again": 1}, v) for tp, v in read.items()})
    await small.delete_share_states("a")
    assert await small.store_share_states("c", {TP("t", 0): ({}, -1)})
    assert await small.share_groups() == ["b", "c"]
