"""Embedded sessions: what only they have. The port's contract runs over every adapter in
``tests/integration/test_sessions_port.py``."""

from __future__ import annotations

from service.adapters.embedded.sessions import EmbeddedSessions
from service.core.models import IdempotentResult
from tests.helpers import instance


async def test_lifecycle_is_idempotent() -> None:
    async with EmbeddedSessions() as s:
        await s.create(instance())
        await s.stop()
        await s.stop()


async def test_idempotency_records_are_bounded_by_count_and_bytes_oldest_answered_first() -> None:
    s = EmbeddedSessions(max_idempotency_keys=3, max_idempotency_bytes=1 << 20)
    assert await s.claim("pending", "f", 60_000) is None  # still running: never dropped
    for i in range(5):
        assert await s.claim(f"k{i}", "f", 60_000) is None
        await s.fulfil(f"k{i}", "f", b"answer", 60_000)
    assert s.idempotency_usage()[0] == 3
    assert await s.claim("pending", "f", 60_000) == IdempotentResult("f", None)
    assert (await s.claim("k4", "f", 60_000)) == IdempotentResult("f", b"answer")
    assert (await s.claim("k3", "f", 60_000)) == IdempotentResult("f", b"answer")
    assert await s.claim("k0", "f", 60_000) is None  # the oldest went: a retry runs again

    small = EmbeddedSessions(max_idempotency_keys=1000, max_idempotency_bytes=10_000)
    for i in range(20):
        await small.claim(f"k{i}", "f", 60_000)
        await small.fulfil(f"k{i}", "f", b"x" * 1000, 60_000)
    keys, size = small.idempotency_usage()
    assert size <= 10_000 and 0 < keys < 20
