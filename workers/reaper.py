"""The idle-instance reaper: removes consumer instances whose lease ran out and rebalances their
groups (a share consumer's records are released), and writes the share groups' dead-letter
copies whose writer died (``ShareGroups.sweep``, once per lock duration: only a crash or a failed
write leaves one).

It runs on every replica: with in-process sessions each replica alone sees its own
instances, and with shared sessions two replicas reaping the same instance is harmless
(the second finds it gone); a dead-letter copy is claimed before it is written.
"""

from __future__ import annotations

import time

from service.core.consumers import ConsumerService
from service.core.shares.service import ShareGroups
from service.metrics import Metrics

from .loop import Periodic


def reaper(consumers: ConsumerService, shares: ShareGroups, metrics: Metrics, interval_ms: int) -> Periodic:
    swept = time.monotonic()

    async def run() -> None:
        nonlocal swept
        metrics.expired_instances.inc(await consumers.expire())
        if shares.dead_letters is not None and time.monotonic() - swept >= shares.limits.lock_ms / 1000:
            swept = time.monotonic()
            await shares.sweep()

    return Periodic("reaper", interval_ms / 1000, run)
