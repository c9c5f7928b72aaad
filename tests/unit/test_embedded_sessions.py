"""Embedded sessions: what only they have. The port's contract runs over every adapter in
``tests/integration/test_sessions_port.py``."""

from __future__ import annotations

from service.adapters.embedded.sessions import EmbeddedSessions
from service.core.models import InstanceConfig, InstanceState


def instance(
    group: str = "g", name: str = "c", *, last_seen_ms: int = 1000, timeout_ms: int = 500
) -> InstanceState:
    return InstanceState(
        group=group,
        name=name,
        config=InstanceConfig(instance_timeout_ms=timeout_ms),
        created_ms=last_seen_ms,
        last_seen_ms=last_seen_ms,
    )


async def test_lifecycle_is_idempotent() -> None:
    async with EmbeddedSessions() as s:
        await s.create(instance())
        await s.stop()
        await s.stop()
