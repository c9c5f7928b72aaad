"""Shared fixtures: real gateways on free loopback ports, real backend servers, unique names per test.

The ``gateway`` fixture serves the API on the backends named by the ``coordinator``
fixture (``embedded`` unless a test module parametrizes it: the group/offset
suites run over ``["embedded", "zookeeper"]``). Backend servers start once per
session, on free ports, and each test gets its own namespace in them.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import certifi
import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from hypothesis import settings as hypothesis_settings

from deploy.local.kafka_broker import KafkaBroker
from deploy.local.process import free_port
from deploy.local.redis_server import RedisServer
from deploy.local.zookeeper_server import ZooKeeperServer
from service.api.gateway import begin_drain
from service.core.ports import Coordinator, Log, Sessions
from service.server.app import create_app, server_config
from service.settings import Settings
from tests.push_receiver import Receiver

# Property tests judge answers, never speed: a busy machine must not fail one for taking long.
hypothesis_settings.register_profile("brokergate", deadline=None, print_blob=True)
hypothesis_settings.load_profile("brokergate")

# The API suite: every test of these modules that uses a gateway runs on both logs.
API_SUITE = {
    "test_produce",
    "test_consumers",
    "test_out_of_range",
    "test_shares_out_of_range",
    "test_groups",
    "test_metadata",
    "test_errors",
    "test_confluent_examples",
    "test_idempotency",
    "test_schema_registry",
    "test_schema_formats",
    "test_schema_interop",
}
# Kafka's defaults (idempotent producer, acks=all); a short timeout keeps a failing test quick.
KAFKA_TEST_SETTINGS = {"kafka_request_timeout_ms": 5000}

# Timeouts for gateways on test servers: quick expiry tests, yet safe on a busy machine
# (the test ZooKeeper's 100 ms tick allows sessions of 0.2 to 2 s).
ZOOKEEPER_TEST_SETTINGS = {
    "zookeeper_session_timeout_ms": 1500,
    "zookeeper_request_timeout_ms": 2000,
    "zookeeper_connect_timeout_ms": 5000,
}


@dataclass
class RunningGateway:
    """A gateway served by uvicorn in this event loop, with a client pointed at it."""

    url: str
    client: httpx.AsyncClient
    settings: Settings
    server: uvicorn.Server
    task: asyncio.Task[None]
    app: FastAPI

    async def stop(self) -> None:
        """Stop as a SIGTERM does (``DrainingServer``): the app told first, so open long-polls and
        stateless reads answer with what they have, then uvicorn's shutdown."""
        begin_drain(self.app)
        self.server.should_exit = True
        await self.task


async def start_gateway(
    data_dir: Path,
    *,
    verify: ssl.SSLContext | bool = True,
    ws: str | None = None,
    ports: tuple[Log, Coordinator, Sessions] | None = None,
    **overrides: object,
) -> RunningGateway:
    """A gateway of ``Settings(**overrides)``; over HTTPS when ``tls_cert`` is among them, its
    client then verifying with ``verify`` (a context with the test CA, maybe a client certificate);
    ``ws`` names another WebSocket protocol of uvicorn's than the gateway's; ``ports``, the
    adapters it runs on instead of those the settings pick (``create_app``'s)."""
    port = free_port()
    fast_workers: dict[str, object] = {"reaper_interval_ms": 100, "metadata_refresh_ms": 200}
    settings = Settings(
        host="127.0.0.1",
        port=port,
        data_dir=data_dir,
        **{**fast_workers, **overrides},  # type: ignore[arg-type]
    )
    app = create_app(settings, ports)
    config = server_config(app, settings, log_level="warning", lifespan="on")
    if ws is not None:
        config.ws = ws
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            break
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    url = f"{'https' if settings.tls_cert is not None else 'http'}://127.0.0.1:{port}"
    client = httpx.AsyncClient(base_url=url, timeout=30, verify=default_trust() if verify is True else verify)
    return RunningGateway(url, client, settings, server, task, app)


@functools.cache
def default_trust() -> ssl.SSLContext:
    """What httpx trusts by default (certifi's CAs), loaded once: loading it takes 50-150 ms, and
    the suite starts over a thousand gateways, each with a client."""
    return ssl.create_default_context(cafile=certifi.where())


@asynccontextmanager
async def running_gateway(data_dir: Path, **overrides: object) -> AsyncIterator[RunningGateway]:
    """``start_gateway`` for the length of a block: stopped, its client closed, on the way out."""
    gw = await start_gateway(data_dir, **overrides)
    try:
        yield gw
    finally:
        await gw.client.aclose()
        await gw.stop()


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper for the session (Debian's package, started on a free port)."""
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One Apache Kafka broker (KRaft, combined mode) for the session; tests keep apart by their
    own topic, group and registry-topic names (``kafka_settings``)."""
    with KafkaBroker(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


def kafka_settings(broker: KafkaBroker) -> dict[str, object]:
    """A gateway's settings on the session's broker, with a registry topic of its own: one
    test's schemas are not another's."""
    return {
        "log": broker.url,
        "schema_registry_topic": f"_schemas-{uuid.uuid4().hex[:12]}",
        **KAFKA_TEST_SETTINGS,
    }


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real Redis for the session (Debian's redis-server, on a free port)."""
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def sessions() -> str:
    """Where consumer-instance state lives; the group and consumer suites parametrize it."""
    return "embedded"


@pytest.fixture
def coordinator() -> str:
    """Which coordinator the gateway uses; test modules parametrize it."""
    return "embedded"


@pytest.fixture
def log_backend() -> str:
    """Which log the gateway uses; the API suite runs over both (see ``pytest_generate_tests``)."""
    return "embedded"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    if module in API_SUITE and "gateway" in metafunc.fixturenames:
        metafunc.parametrize("log_backend", ["embedded", "kafka"])


def backend_settings(
    request: pytest.FixtureRequest, log_backend: str, coordinator: str, sessions: str
) -> dict[str, object]:
    settings: dict[str, object] = {}
    if sessions == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        # a key prefix of the test's own on the shared server
        settings.update(sessions=server.url, redis_key_prefix=f"t-{uuid.uuid4().hex[:12]}:")
    elif sessions != "embedded":
        raise ValueError(f"unknown sessions {sessions!r}")
    if log_backend == "kafka":
        settings.update(kafka_settings(request.getfixturevalue("kafka_broker")))
    elif log_backend != "embedded":
        raise ValueError(f"unknown log {log_backend!r}")
    if coordinator == "zookeeper":
        zookeeper: ZooKeeperServer = request.getfixturevalue("zookeeper")
        # a chroot of the test's own: its groups, offsets and leader election see nobody else's
        settings.update(coordinator=f"{zookeeper.url}/t-{uuid.uuid4().hex[:12]}", **ZOOKEEPER_TEST_SETTINGS)
    elif coordinator != "embedded":
        raise ValueError(f"unknown coordinator {coordinator!r}")
    return settings


@pytest.fixture
async def gateway(
    tmp_path: Path, request: pytest.FixtureRequest, log_backend: str, coordinator: str, sessions: str
) -> AsyncIterator[RunningGateway]:
    settings = backend_settings(request, log_backend, coordinator, sessions)
    gw = await start_gateway(tmp_path / "data", **settings)
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


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A real HTTP endpoint on loopback that push subscriptions deliver to (``tests.push_receiver``)."""
    r = await Receiver().start()
    try:
        yield r
    finally:
        await r.stop()
