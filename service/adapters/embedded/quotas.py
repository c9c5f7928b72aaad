"""The embedded ``QuotaStore``: token buckets in a dict of this process.

Each replica counts on its own, so with several replicas a client gets each
quota once per replica it reaches; the Redis store shares the buckets.
Buckets are forgotten once they are full again (a full bucket and a missing
one are the same), in sweeps that cost O(1) per request on average, so the
dict holds only the clients and topics seen within about a burst.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Final

from service.core.buckets import Charge, admits, ms_until_full, refill

from ..lifecycle import Lifecycle

__all__ = ["EmbeddedQuotas"]

# Sweep when the dict has doubled since the last sweep (and is worth sweeping).
_SWEEP_MIN: Final = 1024


class _Bucket:
    __slots__ = ("full_at_ms", "level", "updated_ms")

    def __init__(self, level: float, updated_ms: float, full_at_ms: float) -> None:
        self.level = level
        self.updated_ms = updated_ms
        self.full_at_ms = full_at_ms


class EmbeddedQuotas(Lifecycle):
    """Named token buckets for one gateway process; ``clock`` gives seconds (monotonic by default)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()  # the start/stop state
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._sweep_at = _SWEEP_MIN

    async def _close(self) -> None:
        """Forget every bucket (calls still work, counting from full)."""
        self._buckets.clear()

    def _levels(self, charges: Sequence[Charge], now_ms: float) -> list[float]:
        levels = []
        for c in charges:
            b = self._buckets.get(c.bucket)
            levels.append(refill(b.level, b.updated_ms, c.limit, now_ms) if b else c.limit.capacity)
        return levels

    def _debit(self, charges: Sequence[Charge], levels: Sequence[float], now_ms: float) -> None:
        buckets = self._buckets
        for c, level in zip(charges, levels, strict=True):
            if c.cost:
                left = level - c.cost
                full_at_ms = now_ms + ms_until_full(left, c.limit)
                b = buckets.get(c.bucket)
                if b is None:
                    buckets[c.bucket] = _Bucket(left, now_ms, full_at_ms)
                else:  # this runs on every produce: update in place rather than allocate
                    b.level, b.updated_ms, b.full_at_ms = left, now_ms, full_at_ms
        if len(self._buckets) >= self._sweep_at:
            self._sweep(now_ms)

    def _sweep(self, now_ms: float) -> None:
        self._buckets = {k: b for k, b in self._buckets.items() if b.full_at_ms > now_ms}
        self._sweep_at = max(_SWEEP_MIN, 2 * len(self._buckets))

    async def take(self, charges: Sequence[Charge]) -> list[float]:
        now_ms = self._clock() * 1000
        levels = self._levels(charges, now_ms)
        if admits(levels):
            self._debit(charges, levels, now_ms)
        return levels

    async def debit(self, charges: Sequence[Charge]) -> None:
        now_ms = self._clock() * 1000
        self._debit(charges, self._levels(charges, now_ms), now_ms)

    def __len__(self) -> int:
        """How many buckets are held (not full): for tests of the forgetting."""
        return len(self._buckets)
