"""Token buckets: the pure math every quota store and the quota policy agree on.

- A bucket holds up to ``capacity = rate * burst_s`` tokens (bytes, or
  requests) and refills at ``rate`` per second; a bucket never seen is full.
- A request is admitted when every bucket it is charged to holds tokens
  (level > 0); it is then debited its cost, which may take a bucket below
  zero. A bucket in debt refuses everything until it has refilled past zero.

No I/O, and the clock is an argument, so that the embedded store, the Redis
script that mirrors it (``service.adapters.redis.scripts``) and the tests
compute the same levels. ``service.core.quotas`` explains why this rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Limit:
    """A bucket's shape: ``rate`` units per second, holding at most ``burst_s`` seconds of it."""

    rate: float
    burst_s: float
    capacity: float = field(init=False, compare=False)  # rate * burst_s: read on every charge

    def __post_init__(self) -> None:
        if not (self.rate > 0 and self.burst_s > 0 and math.isfinite(self.rate * self.burst_s)):
            raise ValueError(f"a quota needs a positive rate and burst, not {self.rate}/s, {self.burst_s}s")
        object.__setattr__(self, "capacity", self.rate * self.burst_s)


@dataclass(frozen=True, slots=True)
class Charge:
    """What one request costs one named bucket (``cost`` may be 0: admission only)."""

    bucket: str
    limit: Limit
    cost: float
    quota: str = ""  # the metric label of this kind of bucket


def refill(level: float | None, updated_ms: float, limit: Limit, now_ms: float) -> float:
    """The level at ``now_ms`` of a bucket left at ``level`` at ``updated_ms`` (None: never seen).

    A clock that went backwards refills nothing rather than draining the bucket.
    """
    if level is None:
        return limit.capacity
    elapsed_ms = max(0.0, now_ms - updated_ms)
    return min(limit.capacity, level + elapsed_ms * limit.rate / 1000)


def admits(levels: Iterable[float]) -> bool:
    """Whether a request charged to buckets at these levels goes through: none empty or in debt."""
    return all(level > 0 for level in levels)


def retry_after_s(level: float, limit: Limit) -> int:
    """Whole seconds until a bucket at ``level`` admits again (0 if it does now, else at least 1)."""
    if level > 0:
        return 0
    seconds = max(1, math.floor(-level / limit.rate) + 1)
    # Float division can land a hair short; the promise is that waiting this long is enough,
    # by the very arithmetic ``refill`` will use.
    while not admits([refill(level, 0, limit, seconds * 1000)]):
        seconds += 1
    # ... or a hair long, a whole second too many: the promise is also that it is no longer.
    while seconds > 1 and admits([refill(level, 0, limit, (seconds - 1) * 1000)]):
        seconds -= 1
    return seconds


def ms_until_full(level: float, limit: Limit) -> int:
    """How long until the bucket is full again: after that, forgetting it changes nothing."""
    return max(0, math.ceil((limit.capacity - level) * 1000 / limit.rate))


@dataclass(frozen=True, slots=True)
class Refusal:
    """The bucket that keeps a request out longest, and for how many whole seconds."""

    charge: Charge
    retry_after_s: int


def refusal(charges: Sequence[Charge], levels: Sequence[float]) -> Refusal | None:
    """None if the request is admitted at these levels; else the bucket with the longest wait."""
    worst: Refusal | None = None
    for charge, level in zip(charges, levels, strict=True):
        wait = retry_after_s(level, charge.limit)
        if wait and (worst is None or wait > worst.retry_after_s):
            worst = Refusal(charge, wait)
    return worst
