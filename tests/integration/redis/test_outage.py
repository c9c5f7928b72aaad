"""Redis down, hung or forgetful: every call answers 503 within a bounded time, and recovers alone.

Each test runs its own server (``own_redis``) so it can stop, restart or
freeze it. "Within a bounded time" is the adapter's promise
(``request_bound_s``: connect timeout + socket timeout); the assertions
allow generous slack for a loaded machine, since what they guard against is a
hang, not a slow answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from deploy.local.redis_server import RedisServer, free_port
from service.adapters.redis import RedisSessions
from service.errors import BackendUnavailable, GatewayError
from tests.helpers import instance

from .conftest import CONNECT_TIMEOUT_MS, SessionsFactory

SLACK_S = 1.0

Call = Callable[[RedisSessions], Awaitable[object]]

EVERY_CALL: list[tuple[str, Call]] = [
    ("create", lambda s: s.create(instance("g", "new"))),
    ("load", lambda s: s.load("g", "c")),
    ("save", lambda s: s.save(instance())),
    ("touch", lambda s: s.touch("g", "c", 5000)),
    ("delete", lambda s: s.delete("g", "c")),
    ("instances", lambda s: s.instances()),
    ("instances of a group", lambda s: s.instances("g")),
    ("expired", lambda s: s.expired(5000)),
]


async def _assert_unavailable(sessions: RedisSessions, server: RedisServer) -> None:
    """Every call of the port, all at once (as concurrent requests would be), fails in time."""

    async def attempt(label: str, call: Call) -> None:
        started = time.monotonic()
        with pytest.raises(BackendUnavailable) as caught:
            await asyncio.wait_for(call(sessions), sessions.request_bound_s + SLACK_S)
        elapsed = time.monotonic() - started
        assert elapsed < sessions.request_bound_s + SLACK_S, f"{label} took {elapsed:.2f}s"
        assert caught.value.http_status == 503 and caught.value.retry_after, label
        assert server.url in str(caught.value), label
        assert "\n" not in str(caught.value), label

    await asyncio.gather(*(attempt(label, call) for label, call in EVERY_CALL))


async def test_redis_down_then_back(make_sessions: SessionsFactory, own_redis: RedisServer) -> None:
    sessions = await make_sessions(own_redis.url)
    await sessions.create(instance())
    own_redis.stop()
    await _assert_unavailable(sessions, own_redis)

    own_redis.start()  # same port, empty: persistence is off
    # No restart of the adapter: the pool reconnects, and the scripts are loaded again.
    await sessions.create(instance())
    state = await sessions.load("g", "c")
    assert await sessions.save(state)
    await sessions.touch("g", "c", 2000)
    assert [(s.name, s.version) for s in await sessions.instances("g")] == [("c", 1)]


async def test_redis_hung_then_resumed(make_sessions: SessionsFactory, own_redis: RedisServer) -> None:
    sessions = await make_sessions(own_redis.url)
    await sessions.create(instance())
    own_redis.pause()
    try:
        await _assert_unavailable(sessions, own_redis)
    finally:
        own_redis.resume()
    state = await sessions.load("g", "c")  # its data is still there
    assert await sessions.save(state)
    assert (await sessions.load("g", "c")).version == 1


async def test_scripts_forgotten_by_the_server_are_loaded_again(
    make_sessions: SessionsFactory, own_redis: RedisServer
) -> None:
    sessions = await make_sessions(own_redis.url)
    client = own_redis.client()
    try:
        client.script_flush()
        await sessions.create(instance())
        client.script_flush()
        state = await sessions.load("g", "c")
        assert await sessions.save(state)
        client.script_flush()
        await sessions.touch("g", "c", 3000)
        client.script_flush()
        assert await sessions.delete("g", "c")
    finally:
        client.close()


async def test_start_gives_up_in_bounded_time_with_one_line() -> None:
    url = f"redis://user:s3cret@127.0.0.1:{free_port()}/2"  # nothing listens there
    sessions = RedisSessions(url, connect_timeout_ms=CONNECT_TIMEOUT_MS)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable) as caught:
        await sessions.start()
    assert time.monotonic() - started < CONNECT_TIMEOUT_MS / 1000 + SLACK_S
    message = str(caught.value)
    assert message.startswith(f"Cannot reach Redis at {sessions.url} within {CONNECT_TIMEOUT_MS} ms")
    assert "\n" not in message and "s3cret" not in message and "user" not in message
    await sessions.stop()  # nothing was opened; still fine


async def test_start_waits_for_a_redis_that_is_starting(own_redis: RedisServer) -> None:
    own_redis.stop()
    sessions = RedisSessions(own_redis.url, connect_timeout_ms=10_000)
    starting = asyncio.create_task(sessions.start())
    await asyncio.sleep(0.3)
    assert not starting.done()
    await asyncio.to_thread(own_redis.start)
    await asyncio.wait_for(starting, 10)
    try:
        assert await sessions.instances() == []
    finally:
        await sessions.stop()


async def test_calls_on_a_stopped_adapter_are_refused(make_sessions: SessionsFactory) -> None:
    sessions = await make_sessions()
    await sessions.stop()
    for _, call in EVERY_CALL:
        with pytest.raises(BackendUnavailable):
            await call(sessions)


async def test_no_redis_exception_escapes(make_sessions: SessionsFactory, redis_server: RedisServer) -> None:
    """A key of the wrong type (someone else's data under our prefix) is a backend error, not a crash."""
    sessions = await make_sessions(key_prefix="clash:")
    client = redis_server.client()
    try:
        client.set("clash:group:g", "not a set")
        client.set("clash:instance:g/c", "not a hash")
    finally:
        client.close()
    for label, call in EVERY_CALL:
        try:
            await call(sessions)
        except GatewayError as exc:  # translated; a redis-py exception would fail the test
            assert exc.http_status in (404, 409, 500), label


async def test_wrong_credentials_are_refused_at_once(own_redis: RedisServer) -> None:
    client = own_redis.client()
    try:
        client.config_set("requirepass", "right")
    finally:
        client.close()
    for url in (own_redis.url, f"redis://:wrong@127.0.0.1:{own_redis.port}/0"):
        sessions = RedisSessions(url, connect_timeout_ms=10_000)
        started = time.monotonic()
        with pytest.raises(BackendUnavailable, match="refused the credentials") as caught:
            await sessions.start()
        assert time.monotonic() - started < 5  # no waiting out the connect timeout
        assert "wrong" not in str(caught.value)
    async with RedisSessions(f"redis://:right@127.0.0.1:{own_redis.port}/0") as sessions:
        assert await sessions.instances() == []
