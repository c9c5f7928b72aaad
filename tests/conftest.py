"""Shared fixtures: real gateways on free loopback ports, real backend servers, unique names per test.

The ``gateway`` fixture serves the API on the backends named by the ``coordinator``
fixture (``embedded`` unless a test module parametrizes it: the group/offset
suites run over ``["embedded", "zookeeper"]``). Backend servers start once per
session, on free ports, and each test gets its own namespace in them.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from service.app import create_app
from service.settings import Settings
from tests.zookeeper_server import ZooKeeperServer

# Timeouts for gateways on test servers: quick expiry tests, yet safe on a busy machine
# (the test ZooKeeper's 100 ms tick allows sessions of 0.2 to 2 s).
ZOOKEEPER_TEST_SETTINGS = {
    "zookeeper_session_timeout_ms": 1500,
    "zookeeper_request_timeout_ms": 2000,
    "zookeeper_connect_timeout_ms": 5000,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RunningGateway:
    """A gateway served by uvicorn in this event loop, with a client pointed at it."""

    url: str
    client: httpx.AsyncClient
    settings: Settings
    server: uvicorn.Server
    task: asyncio.Task[None]

    async def stop(self) -> None:
        self.server.should_exit = True
        await self.task


async def start_gateway(data_dir: Path, **overrides: object) -> RunningGateway:
    port = free_port()
    settings = Settings(
        host="127.0.0.1",
        port=port,
        data_dir=data_dir,
        reaper_interval_ms=100,
        metadata_refresh_ms=200,
        **overrides,  # type: ignore[arg-type]
    )
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            break
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    url = f"http://127.0.0.1:{port}"
    client = httpx.AsyncClient(base_url=url, timeout=30)
    return RunningGateway(url, client, settings, server, task)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the session (Debian's package, started on a free port)."""
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def coordinator() -> str:
    """Which coordinator the gateway uses; test modules parametrize it."""
    return "embedded"


def backend_settings(request: pytest.FixtureRequest, coordinator: str) -> dict[str, object]:
    if coordinator == "embedded":
        return {}
    if coordinator == "zookeeper":
        server: ZooKeeperServer = request.getfixturevalue("zookeeper")
        # a chroot of the test's own: its groups, offsets and leader election see nobody else's
        return {"coordinator": f"{server.url}/t-{uuid.uuid4().hex[:12]}", **ZOOKEEPER_TEST_SETTINGS}
    raise ValueError(f"unknown coordinator {coordinator!r}")


@pytest.fixture
async def gateway(
    tmp_path: Path, request: pytest.FixtureRequest, coordinator: str
) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path / "data", **backend_settings(request, coordinator))
    try:
        yield gw
    finally:
        await gw.client.aclose()
        await gw.stop()


@pytest.fixture
def client(gateway: RunningGateway) -> httpx.AsyncClient:
    return gateway.client


@pytest.fixture
def name() -> str:
    """A unique topic/group name for this test."""
    return f"t-{uuid.uuid4().hex[:10]}"
