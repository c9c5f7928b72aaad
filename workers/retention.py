"""Retention: deletes old log segments by time and size, for logs that manage their own files."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from service.metrics import Metrics

from .loop import Periodic


@runtime_checkable
class SupportsRetention(Protocol):
    async def apply_retention(self) -> int: ...


def retention(log: object, metrics: Metrics, interval_ms: int) -> Periodic | None:
    """A retention worker for ``log``, or None when the backend applies retention itself (Kafka)."""
    if not isinstance(log, SupportsRetention):
        return None
    target = log

    async def run() -> None:
        metrics.retention_segments.inc(await target.apply_retention())

    return Periodic("retention", interval_ms / 1000, run)
