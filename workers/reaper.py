"""The idle-instance reaper: removes consumer instances whose lease ran out and rebalances their groups."""

from __future__ import annotations

from service.core.consumers import ConsumerService
from service.core.ports import Coordinator
from service.metrics import Metrics

from .loop import Periodic


def reaper(
    consumers: ConsumerService, coordinator: Coordinator, metrics: Metrics, interval_ms: int
) -> Periodic:
    async def run() -> None:
        # One replica at a time does group-wide duties.
        if coordinator.is_leader():
            metrics.expired_instances.inc(await consumers.expire())

    return Periodic("reaper", interval_ms / 1000, run)
