"""Fixtures for the ZooKeeper coordinator: a real ZooKeeper server, a fresh chroot per test.

One server serves the whole session; each test gets its own chroot
(``zookeeper://127.0.0.1:PORT/t-<hex>``), so tests cannot see each other's
groups, replicas or leader. Tests that stop, restart or freeze ZooKeeper take
``own_zookeeper``, a server of their own.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from deploy.local.zookeeper_server import ZooKeeperServer
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.errors import BackendUnavailable

# Short enough that expiry tests are quick, long enough for a busy test machine
# (the server's tickTime of 100 ms allows 200 ms to 2 s).
SESSION_TIMEOUT_MS = 1500
REQUEST_TIMEOUT_MS = 2000
CONNECT_TIMEOUT_MS = 5000

CoordinatorFactory = Callable[..., ZooKeeperCoordinator]


@pytest.fixture
def own_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path / "zookeeper") as server:
        yield server


def chroot_url(server: ZooKeeperServer) -> str:
    return f"{server.url}/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_url(zookeeper: ZooKeeperServer) -> str:
    """A coordinator URL with a chroot of this test's own."""
    return chroot_url(zookeeper)


@pytest.fixture
async def make_coordinator() -> AsyncIterator[CoordinatorFactory]:
    """Builds coordinators with the tests' timeouts; stops whatever is left running at the end."""
    made: list[ZooKeeperCoordinator] = []

    def make(url: str, **kw: object) -> ZooKeeperCoordinator:
        options: dict[str, object] = {
            "session_timeout_ms": SESSION_TIMEOUT_MS,
            "connect_timeout_ms": CONNECT_TIMEOUT_MS,
            "request_timeout_ms": REQUEST_TIMEOUT_MS,
            **kw,
        }
        coordinator = ZooKeeperCoordinator(url, **options)  # type: ignore[arg-type]
        made.append(coordinator)
        return coordinator

    yield make
    for coordinator in made:
        await coordinator.stop()


@pytest.fixture
async def coord(zk_url: str, make_coordinator: CoordinatorFactory) -> ZooKeeperCoordinator:
    coordinator = make_coordinator(zk_url, node_id="replica-a")
    await coordinator.start()
    return coordinator


def raw_client(url: str) -> KazooClient:
    """A plain kazoo client on the same server and chroot, as a ZooKeeper tool would connect."""
    client = KazooClient(hosts=url.removeprefix("zookeeper://"), timeout=5.0)
    client.start(timeout=10)
    return client


@pytest.fixture
def raw(zk_url: str, coord: ZooKeeperCoordinator) -> Iterator[KazooClient]:
    """A plain client on this test's chroot (which ``coord`` created)."""
    client = raw_client(zk_url)
    yield client
    client.stop()
    client.close()


async def eventually(check: Callable[[], Awaitable[bool]], *, within_s: float = 30.0) -> None:
    """Wait until ``check()`` holds; fail after ``within_s``. ZooKeeper being away counts as not yet."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            if await check():
                return
        except BackendUnavailable:
            pass
        assert time.monotonic() < deadline, f"not reached within {within_s} s"
        await asyncio.sleep(0.02)
