"""What only the ZooKeeper coordinator has: znode versions as tokens, leader ids, raced transactions.

The port's contract, which it shares with the embedded coordinator, is tested
over both in ``tests/integration/test_coordinator_port.py``.
"""

from __future__ import annotations

import pytest

from service.adapters.zookeeper import ZooKeeperCoordinator
from service.adapters.zookeeper.groups import ABSENT_VERSION
from service.core.models import GroupState, TopicPartition
from service.errors import BackendUnavailable, IllegalState
from tests.helpers import own

from .conftest import CoordinatorFactory

TP = TopicPartition


async def test_tokens_are_the_state_znodes_version(coord: ZooKeeperCoordinator) -> None:
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


async def test_a_single_replica_leads(coord: ZooKeeperCoordinator) -> None:
    assert coord.is_leader() is True
    assert coord.leader_id == "replica-a"


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
