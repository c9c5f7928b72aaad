"""Several gateway replicas on one ZooKeeper: shared groups, one leader, leadership that moves."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from service.adapters.zookeeper import ZooKeeperCoordinator
from service.core.models import GroupState, Member, Subscription, TopicPartition
from service.errors import BackendError

from .conftest import SESSION_TIMEOUT_MS, CoordinatorFactory

TP = TopicPartition
REPO = Path(__file__).resolve().parents[3]


async def eventually(check: Callable[[], bool], *, within_s: float = 15.0) -> None:
    """Wait until ``check()`` holds; fail after ``within_s`` (a hang guard, not a speed target)."""
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def leaders(*coordinators: ZooKeeperCoordinator) -> list[str]:
    return [c.node_id for c in coordinators if c.is_leader()]


async def test_two_replicas_see_the_same_groups_and_one_leads(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    a = make_coordinator(zk_url, node_id="a")
    b = make_coordinator(zk_url, node_id="b")
    await a.start()
    await b.start()
    assert leaders(a, b) == ["a"]
    assert a.leader_id == b.leader_id == "a"
    assert await a.nodes() == await b.nodes() == ["a", "b"]

    await a.join("g", Member("m1", Subscription(topics=("t",))))
    await b.join("g", Member("m2", Subscription(topics=("t",))))
    assert sorted(await a.members("g")) == sorted(await b.members("g")) == ["m1", "m2"]

    seen_by_b = await b.state("g")
    assert await b.publish("g", GroupState(1, {"m1": [TP("t", 0)], "m2": [TP("t", 1)]}), expected_version=-1)
    # a's view is as fresh as ZooKeeper: it sees b's generation and cannot overwrite it blindly.
    state = await a.state("g")
    assert state.generation == 1
    assert not await a.publish("g", GroupState(2), expected_version=seen_by_b.version)
    assert await a.publish(
        "g", GroupState(2, {"m1": [TP("t", 0), TP("t", 1)]}), expected_version=state.version
    )
    assert (await b.state("g")).generation == 2

    # A member's commit through one replica is fenced by the generation the other published.
    await b.commit("g", {TP("t", 1): 5}, member_id="m1", generation=2)
    assert await a.committed("g") == {TP("t", 1): 5}
    assert await a.groups() == await b.groups() == ["g"]


async def test_stopping_the_leader_moves_leadership_at_once(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    replicas = [make_coordinator(zk_url, node_id=f"r{i}") for i in range(4)]
    for r in replicas:
        await r.start()
    assert leaders(*replicas) == ["r0"]
    for i in range(3):
        await replicas[i].stop()
        remaining = replicas[i + 1 :]
        # Closing the session deletes the candidate; the next in line is told by its watch.
        await eventually(lambda rest=remaining: len(leaders(*rest)) == 1)  # type: ignore[misc]
        assert leaders(*remaining) == [f"r{i + 1}"]
        assert await remaining[0].nodes() == [r.node_id for r in remaining]


_REPLICA = textwrap.dedent(
    """
    import asyncio, sys
    from service.adapters.zookeeper import ZooKeeperCoordinator

    async def main() -> None:
        c = ZooKeeperCoordinator(sys.argv[1], node_id=sys.argv[2], session_timeout_ms=int(sys.argv[3]))
        await c.start()
        print("leader" if c.is_leader() else "follower", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


async def start_replica(zk_url: str, node_id: str) -> asyncio.subprocess.Process:
    """A coordinator in a process of its own, which prints its role: a replica to kill -9."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _REPLICA,
        zk_url,
        node_id,
        str(SESSION_TIMEOUT_MS),
        stdout=asyncio.subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


async def test_a_killed_leader_is_replaced_after_its_session_expires(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    proc = await start_replica(zk_url, "doomed")
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(60):
            assert (await proc.stdout.readline()).strip() == b"leader"
        survivor = make_coordinator(zk_url, node_id="survivor")
        await survivor.start()
        assert not survivor.is_leader() and survivor.leader_id == "doomed"
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    # No goodbye from a kill -9: ZooKeeper expires the session after its timeout.
    await eventually(survivor.is_leader)
    assert survivor.leader_id == "survivor"
    assert await survivor.nodes() == ["survivor"]


async def test_a_restart_reuses_its_node_id_once_the_old_session_is_gone(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    proc = await start_replica(zk_url, "steady")
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(60):
            assert (await proc.stdout.readline()).strip() == b"leader"
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    # Restarted at once under the same id: start waits for the dead session's znode to expire.
    again = make_coordinator(zk_url, node_id="steady")
    await again.start()
    assert await again.nodes() == ["steady"]
    await eventually(again.is_leader)


async def test_two_live_replicas_cannot_share_a_node_id(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    first = make_coordinator(zk_url, node_id="twin")
    await first.start()
    second = make_coordinator(zk_url, node_id="twin")
    with pytest.raises(BackendError, match="'twin' is registered in ZooKeeper by another live replica"):
        await second.start()
    assert first.is_leader() and not second.is_leader()
    assert await first.nodes() == ["twin"]
