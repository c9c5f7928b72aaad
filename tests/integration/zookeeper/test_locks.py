"""The coordinator's locks across replicas: one holder among them all, released with its session."""

from __future__ import annotations

import asyncio
import contextlib

from kazoo.client import KazooClient

from deploy.local.zookeeper_server import ZooKeeperServer
from service.adapters.zookeeper import ZooKeeperCoordinator

from .conftest import CoordinatorFactory, eventually
from .test_outages import expire_session


async def test_two_replicas_never_hold_a_lock_at_once(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    a = make_coordinator(zk_url, node_id="a")
    b = make_coordinator(zk_url, node_id="b")
    await a.start()
    await b.start()
    holders: list[str] = []
    overlaps = 0

    async def hold(replica: ZooKeeperCoordinator) -> None:
        nonlocal overlaps
        async with replica.lock("registry", timeout_s=30):
            overlaps += bool(holders)
            holders.append(replica.node_id)
            await asyncio.sleep(0.01)
            holders.remove(replica.node_id)

    await asyncio.gather(*(hold(r) for _ in range(6) for r in (a, b)))
    assert overlaps == 0


async def test_the_holder_is_a_znode_that_goes_with_its_session(
    zk_url: str, make_coordinator: CoordinatorFactory, coord: ZooKeeperCoordinator, raw: KazooClient
) -> None:
    other = make_coordinator(zk_url, node_id="replica-b")
    await other.start()
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(coord.lock("registry"))
        [contender] = raw.get_children("/brokergate/locks/registry")
        assert "__lock__" in contender
        assert raw.get(f"/brokergate/locks/registry/{contender}")[1].ephemeralOwner != 0
        held_by_other = other.lock("registry", timeout_s=30)  # kept: its generator holds the lock
        waiting = asyncio.ensure_future(held_by_other.__aenter__())
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await coord.stop()  # the holder goes away without releasing: its session takes the lock along
        async with asyncio.timeout(10):
            await waiting
    assert len(raw.get_children("/brokergate/locks/registry")) == 1  # the other replica's
    await held_by_other.__aexit__(None, None, None)
    assert raw.get_children("/brokergate/locks/registry") == []


async def test_a_lock_held_by_one_replica_is_contended_for_the_other(
    zk_url: str, make_coordinator: CoordinatorFactory, coord: ZooKeeperCoordinator
) -> None:
    other = make_coordinator(zk_url, node_id="replica-b")
    await other.start()
    assert not await other.contended("push.orders")
    async with coord.lock("push.orders"):
        assert await other.contended("push.orders")  # a read: the other replica waits for nothing
    assert not await other.contended("push.orders")
    await coord.stop()
    assert await other.contended("push.orders") is False


async def test_a_holder_whose_session_expires_loses_the_lock(
    zookeeper: ZooKeeperServer, zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    a = make_coordinator(zk_url, node_id="a")
    b = make_coordinator(zk_url, node_id="b")
    await a.start()
    await b.start()
    async with a.lock("registry"):
        await expire_session(zookeeper, a)
        async with asyncio.timeout(10):
            async with b.lock("registry", timeout_s=10):
                pass
    # a, back in a new session, released what it no longer held and may take the lock again

    async def a_acquires() -> bool:
        async with a.lock("registry", timeout_s=10):
            return True

    await eventually(a_acquires, within_s=10)  # (503 while a reconnects)
