"""The idle-instance reaper: removes consumer instances whose lease ran out and rebalances their groups.

It runs on every replica: with in-process sessions each replica alone sees its own
instances, and with shared sessions two replicas reaping the same instance is harmless
(the second finds it gone).
"""

from __future__ import annotations

from service.core.consumers import ConsumerService
from service.metrics import Metrics

from .loop import Periodic


def reaper(consumers: ConsumerService, metrics: Metrics, interval_ms: int) -> Periodic:
    async def run() -> None:
        metrics.expired_instances.inc(await consumers.expire())

    return Periodic("reaper", interval_ms / 1000, run)
