"""Fixtures of the Redis sessions tests: one real Redis for the session, a key prefix per test.

Most tests share one server and isolate themselves by key prefix (as two
deployments sharing one database would), which keeps the suite fast; the
outage tests stop, restart and freeze a server of their own
(``own_redis``). Timeouts are short so that an outage is reported in well
under a second.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from deploy.local.redis_server import RedisServer
from service.adapters.redis import RedisSessions

# Short enough that outage tests are quick, long enough for a loaded CI machine.
CONNECT_TIMEOUT_MS = 500
SOCKET_TIMEOUT_MS = 500

SessionsFactory = Callable[..., Awaitable[RedisSessions]]


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of this test's own, to stop, restart or freeze."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def prefix() -> str:
    """This test's key prefix: its own deployment on the shared server."""
    return f"bgtest-{uuid.uuid4().hex[:10]}:"


@pytest.fixture
async def make_sessions(redis_server: RedisServer, prefix: str) -> AsyncIterator[SessionsFactory]:
    """Start adapters on the shared server (same prefix unless told: replicas of one deployment)."""
    started: list[RedisSessions] = []

    async def make(url: str | None = None, **overrides: object) -> RedisSessions:
        options: dict[str, object] = {
            "key_prefix": prefix,
            "connect_timeout_ms": CONNECT_TIMEOUT_MS,
            "socket_timeout_ms": SOCKET_TIMEOUT_MS,
            **overrides,
        }
        sessions = RedisSessions(url or redis_server.url, **options)  # type: ignore[arg-type]
        await sessions.start()
        started.append(sessions)
        return sessions

    try:
        yield make
    finally:
        for sessions in started:
            await sessions.stop()


@pytest.fixture
async def sessions(make_sessions: SessionsFactory) -> RedisSessions:
    return await make_sessions()
