"""ZooKeeper down, frozen, restarted, or expiring sessions: 503s while it lasts, recovery by itself after."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest
from kazoo.client import KazooClient

from deploy.local.zookeeper_server import ZooKeeperServer, free_port
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.core.models import Member, Subscription, TopicPartition
from service.errors import BackendUnavailable

from .conftest import (
    REQUEST_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    CoordinatorFactory,
    chroot_url,
    eventually,
    raw_client,
)

TP = TopicPartition
# Any call must fail within the request timeout; the margin absorbs a slow test machine.
HANG_GUARD_S = REQUEST_TIMEOUT_MS / 1000 + 5


async def unavailable(call: Awaitable[Any]) -> BackendUnavailable:
    """Assert ``call`` fails with a 503 promptly, never hanging."""
    async with asyncio.timeout(HANG_GUARD_S):
        with pytest.raises(BackendUnavailable) as failed:
            await call
    assert failed.value.http_status == 503 and failed.value.retry_after
    return failed.value


async def every_call_is_unavailable(coord: ZooKeeperCoordinator) -> None:
    await unavailable(coord.commit("g", {TP("t", 0): 99}))
    await unavailable(coord.committed("g"))
    await unavailable(coord.state("g"))
    await unavailable(coord.members("g"))
    await unavailable(coord.join("g", Member("late", Subscription(topics=("t",)))))
    await unavailable(coord.groups())


def node_owner(url: str, node_id: str) -> int | None:
    client = raw_client(url)
    try:
        stat = client.exists(f"/brokergate/nodes/{node_id}")
        return stat.ephemeralOwner if stat is not None else None
    finally:
        client.stop()
        client.close()


async def expire_session(zookeeper: ZooKeeperServer, coord: ZooKeeperCoordinator) -> None:
    """Expire ``coord``'s session now, ZooKeeper's classic way: open it from a second client
    (same id and password), then close it there."""
    client = coord._zk._client
    assert client is not None
    thief = KazooClient(hosts=zookeeper.hosts, client_id=client.client_id, timeout=SESSION_TIMEOUT_MS / 1000)
    await asyncio.to_thread(thief.start, 10)
    await asyncio.to_thread(thief.stop)
    thief.close()


async def test_start_fails_fast_and_in_one_line_when_zookeeper_is_unreachable(
    make_coordinator: CoordinatorFactory,
) -> None:
    port = free_port()
    coord = make_coordinator(f"zookeeper://127.0.0.1:{port}/x", connect_timeout_ms=500)
    async with asyncio.timeout(HANG_GUARD_S):
        with pytest.raises(BackendUnavailable) as failed:
            await coord.start()
    assert f"127.0.0.1:{port}" in failed.value.message and "\n" not in failed.value.message
    assert not coord.is_leader()
    await coord.stop()
    await unavailable(coord.committed("g"))


async def test_zookeeper_restart_loses_no_commit(
    own_zookeeper: ZooKeeperServer, make_coordinator: CoordinatorFactory
) -> None:
    url = chroot_url(own_zookeeper)
    coord = make_coordinator(url, node_id="r")
    await coord.start()
    await coord.commit("g", {TP("t", 0): 10, TP("t", 1): 20})
    await coord.join("g", Member("m", Subscription(topics=("t",))))

    await asyncio.to_thread(own_zookeeper.stop)
    await every_call_is_unavailable(coord)
    assert not coord.is_leader()

    await asyncio.to_thread(own_zookeeper.start)

    async def works() -> bool:
        return await coord.committed("g") == {TP("t", 0): 10, TP("t", 1): 20}

    await eventually(works)
    assert list(await coord.members("g")) == ["m"]
    await coord.commit("g", {TP("t", 0): 11})
    assert await coord.committed("g") == {TP("t", 0): 11, TP("t", 1): 20}

    async def leads() -> bool:
        return coord.is_leader()

    await eventually(leads)
    assert node_owner(url, "r") == coord._zk.session_id


async def test_a_frozen_zookeeper_gives_503s_then_the_replica_rejoins(
    own_zookeeper: ZooKeeperServer, make_coordinator: CoordinatorFactory
) -> None:
    url = chroot_url(own_zookeeper)
    coord = make_coordinator(url, node_id="r")
    await coord.start()
    await coord.commit("g", {TP("t", 0): 10})
    assert coord.is_leader()

    own_zookeeper.pause()
    try:
        # Requests sent before the client notices hit the request timeout; later ones fail at once.
        await every_call_is_unavailable(coord)

        async def not_leader() -> bool:
            return not coord.is_leader()

        await eventually(not_leader)
        await asyncio.sleep(3 * SESSION_TIMEOUT_MS / 1000)  # long enough for the session to expire
    finally:
        own_zookeeper.resume()

    async def registered() -> bool:
        session = coord._zk.session_id
        return session is not None and await asyncio.to_thread(node_owner, url, "r") == session

    await eventually(registered)

    async def leads() -> bool:
        return coord.is_leader()

    await eventually(leads)
    # The commit of 99 went out before the client noticed the freeze: its 503 means "unknown",
    # and ZooKeeper may apply it once it runs again (as a retry of it would). Nothing else is lost.
    assert await coord.committed("g") in ({TP("t", 0): 10}, {TP("t", 0): 99})
    await coord.commit("g", {TP("t", 0): 11})
    assert await coord.committed("g") == {TP("t", 0): 11}


async def test_after_session_expiry_the_replica_registers_again_and_rejoins_the_election(
    zookeeper: ZooKeeperServer, make_coordinator: CoordinatorFactory
) -> None:
    url = chroot_url(zookeeper)
    a = make_coordinator(url, node_id="a")
    b = make_coordinator(url, node_id="b")
    await a.start()
    await b.start()
    assert a.is_leader() and not b.is_leader()
    await a.commit("g", {TP("t", 0): 5})
    old_session = a._zk.session_id
    assert old_session is not None and node_owner(url, "a") == old_session

    await expire_session(zookeeper, a)

    async def b_leads() -> bool:
        return b.is_leader()

    await eventually(b_leads)

    async def a_registered_again() -> bool:
        session = a._zk.session_id
        return session not in (None, old_session) and await asyncio.to_thread(node_owner, url, "a") == session

    await eventually(a_registered_again)
    assert await a.nodes() == ["a", "b"]

    # Back as a candidate, behind b: exactly one leader, and a takes over when b goes.
    async def a_knows_the_leader() -> bool:
        return a.leader_id == "b"

    await eventually(a_knows_the_leader)
    assert not a.is_leader() and b.is_leader()
    await b.stop()

    async def a_leads() -> bool:
        return a.is_leader()

    await eventually(a_leads)
    assert await a.committed("g") == {TP("t", 0): 5}


async def test_ephemeral_members_vanish_with_their_replica_and_come_back_after_an_expiry(
    zookeeper: ZooKeeperServer, make_coordinator: CoordinatorFactory
) -> None:
    """With in-process sessions the factory makes members ephemeral: they leave with the replica's
    ZooKeeper session, and a replica whose session expired (but which lives) joins them again."""
    url = chroot_url(zookeeper)
    a = make_coordinator(url, node_id="a", ephemeral_members=True)
    b = make_coordinator(url, node_id="b", ephemeral_members=True)
    await a.start()
    await b.start()
    sub = Subscription(("t",))
    await a.join("g", Member("ma", sub))
    await b.join("g", Member("mb", sub))
    assert sorted(await b.members("g")) == ["ma", "mb"]

    old_session = a._zk.session_id
    await expire_session(zookeeper, a)

    async def rejoined() -> bool:
        return a._zk.session_id not in (None, old_session) and sorted(await b.members("g")) == ["ma", "mb"]

    await eventually(rejoined)
    await a.stop()  # the replica goes: its member goes with it

    async def only_b() -> bool:
        return sorted(await b.members("g")) == ["mb"]

    await eventually(only_b)
