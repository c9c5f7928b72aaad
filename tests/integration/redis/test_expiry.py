"""Abandoned instances clean themselves up, and the indexes do not grow forever.

An instance's hash expires on its own (instance timeout plus the margin)
even if no replica ever reaps it; its lease stays as the reaper's cue until a
reaper deletes it; dangling group entries are pruned when found.
"""

from __future__ import annotations

import asyncio
import time

from deploy.local.redis_server import RedisServer
from service.adapters.redis.keys import KeyLayout
from tests.helpers import instance

from .conftest import SessionsFactory


async def _wait_gone(server: RedisServer, *keys: str, within_s: float = 5.0) -> None:
    client = server.client()
    deadline = time.monotonic() + within_s
    try:
        while client.exists(*keys):
            assert time.monotonic() < deadline, f"still there: {[k for k in keys if client.exists(k)]}"
            await asyncio.sleep(0.02)
    finally:
        client.close()


async def test_an_abandoned_instance_expires_on_its_own(
    make_sessions: SessionsFactory, redis_server: RedisServer, prefix: str
) -> None:
    sessions = await make_sessions(ttl_margin_ms=100)
    now = int(time.time() * 1000)
    await sessions.create(instance("g", "gone", last_seen_ms=now, timeout_ms=200))
    layout = KeyLayout(prefix)
    client = redis_server.client()
    try:
        assert 0 < client.pttl(layout.instance("g", "gone")) <= 300  # timeout + margin
        assert 0 < client.pttl(layout.group("g")) <= 300
        assert client.pttl(layout.leases) == -1  # the reaper's work list outlives the hashes
    finally:
        client.close()

    await _wait_gone(redis_server, layout.instance("g", "gone"), layout.group("g"))

    assert await sessions.instances() == []
    assert await sessions.instances("g") == []
    # No replica reaped it in time, but the first one that looks still learns it must go
    # (its reaper then removes the member from its group in the coordinator too).
    assert await sessions.expired(int(time.time() * 1000)) == [("g", "gone")]
    assert await sessions.delete("g", "gone") is False
    assert await sessions.expired(int(time.time() * 1000)) == []
    client = redis_server.client()
    try:
        # nothing of the deployment is left but the marker of its stored format, kept for good
        assert client.keys(f"{prefix}*") == [layout.format.encode()]
    finally:
        client.close()


async def test_save_and_touch_renew_the_ttl(
    make_sessions: SessionsFactory, redis_server: RedisServer, prefix: str
) -> None:
    # A TTL of 1.5 s renewed every 0.3 s: room for a busy machine, and 2.4 s in all.
    sessions = await make_sessions(ttl_margin_ms=500)
    await sessions.create(instance(timeout_ms=1000))
    key = KeyLayout(prefix).instance("g", "c")
    for _ in range(4):
        await asyncio.sleep(0.3)
        state = await sessions.load("g", "c")
        assert await sessions.save(state)
        await asyncio.sleep(0.3)
        await sessions.touch("g", "c", state.last_seen_ms)
    client = redis_server.client()
    try:
        assert client.pttl(key) > 1000  # renewed by the last touch, not left from the first write
    finally:
        client.close()
    assert (await sessions.load("g", "c")).version == 4


async def test_dangling_group_entries_are_pruned(
    make_sessions: SessionsFactory, redis_server: RedisServer, prefix: str
) -> None:
    sessions = await make_sessions()
    for name in ("a", "b", "c"):
        await sessions.create(instance("g", name))
    layout = KeyLayout(prefix)
    client = redis_server.client()
    try:
        client.delete(layout.instance("g", "b"))  # as a TTL expiry would
        assert [s.name for s in await sessions.instances("g")] == ["a", "c"]
        assert client.smembers(layout.group("g")) == {b"a", b"c"}
        assert [s.name for s in await sessions.instances()] == ["a", "c"]
        assert client.zcard(layout.leases) == 3  # the lease waits for the reaper
    finally:
        client.close()
    # Re-created meanwhile, an instance is listed again.
    await sessions.create(instance("g", "b"))
    assert [s.name for s in await sessions.instances("g")] == ["a", "b", "c"]


async def test_an_owners_expired_instances_leave_its_count(
    make_sessions: SessionsFactory, redis_server: RedisServer, prefix: str
) -> None:
    sessions = await make_sessions()
    for name in ("a", "b"):
        state = instance("g", name)
        state.owner = "User:alice"
        await sessions.create(state)
    layout = KeyLayout(prefix)
    client = redis_server.client()
    try:
        client.delete(layout.instance("g", "b"))  # as a TTL expiry would
        assert await sessions.count(owner="User:alice") == 1
        assert client.smembers(layout.owner("User:alice")) == {b"g/a"}  # pruned as it was counted
    finally:
        client.close()
