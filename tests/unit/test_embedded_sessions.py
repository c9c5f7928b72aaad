"""Embedded sessions: what only they have. The port's contract runs over every adapter in
``tests/integration/test_sessions_port.py``."""

from __future__ import annotations

from service.adapters.embedded.sessions import EmbeddedSessions
from tests.helpers import instance


async def test_lifecycle_is_idempotent() -> None:
    async with EmbeddedSessions() as s:
        await s.create(instance())
        await s.stop()
        await s.stop()
