"""Produce and consume quotas: token buckets, and the policy that charges requests to them.

The math is pure (no I/O, the clock is an argument) so that the embedded
store, the Redis script that mirrors it, and the tests agree on one rule:

- A bucket holds up to ``capacity = rate * burst_s`` tokens (bytes, or
  requests) and refills at ``rate`` per second; a bucket never seen is full.
- A request is admitted when every bucket it is charged to holds tokens
  (level > 0); it is then debited its cost, which may take a bucket below
  zero. A bucket in debt refuses everything until it has refilled past zero.

This is how Kafka throttles (``producer_byte_rate``/``consumer_byte_rate``):
it lets a request through and makes the client wait for the bytes it took.
It is what consume needs, since a poll's bytes are only known after the
fetch (``debit`` them then); it never starves a request larger than the
burst; and a big request cannot be overtaken forever by small ones, which
a "wait until the bucket holds the whole cost" rule would allow. The price is
that one request may overshoot the burst; over time the rate is exact.

``Quotas`` decides which buckets a request is charged to (per client: API
key or address; per topic; per direction, plus an optional request rate),
asks a ``QuotaStore`` (embedded, or Redis for every replica) and raises
``Throttled`` (429, Retry-After). When the store is unavailable it fails
open: quotas protect the cluster, they must not take it down with Redis.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Protocol

from service.errors import GatewayError, Throttled

from .models import Header, TopicPartition

if TYPE_CHECKING:
    from .ports import QuotaStore

log = logging.getLogger(__name__)

# After the store failed, requests pass unchecked for this long before one asks it again.
STORE_RETRY_S: Final = 1.0
# At most one log line per this many seconds about an unavailable store.
STORE_LOG_EVERY_S: Final = 60.0

# Which bucket refused, as the throttled-requests metric labels it.
CLIENT_PRODUCE: Final = "client_produce"
CLIENT_CONSUME: Final = "client_consume"
CLIENT_REQUESTS: Final = "client_requests"
TOPIC_PRODUCE: Final = "topic_produce"
TOPIC_CONSUME: Final = "topic_consume"


# --- the math ------------------------------------------------------------------------


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


class RecordLike(Protocol):
    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def headers(self) -> tuple[Header, ...]: ...


def record_bytes(records: Iterable[RecordLike]) -> int:
    """What records cost a byte quota: keys, values and headers, as stored (not as encoded in JSON)."""
    total = 0
    for r in records:
        total += len(r.key or b"") + len(r.value or b"")
        if r.headers:  # rare, and an empty loop costs more than the test
            for k, v in r.headers:
                total += len(k) + len(v or b"")
    return total


def client_id(api_key: str | None, address: str | None) -> str:
    """A client's bucket name part: its API key, hashed (keys never reach a store), else its address."""
    if api_key:
        return "key:" + hashlib.sha256(api_key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return "ip:" + (address or "unknown")


# --- the policy ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """Which quotas are configured (None: that one is off)."""

    client_produce: Limit | None = None
    client_consume: Limit | None = None
    topic_produce: Limit | None = None
    topic_consume: Limit | None = None
    client_requests: Limit | None = None

    @classmethod
    def from_rates(
        cls,
        *,
        burst_s: float,
        client_produce: float = 0,
        client_consume: float = 0,
        topic_produce: float = 0,
        topic_consume: float = 0,
        client_requests: float = 0,
    ) -> QuotaLimits:
        """Limits from rates per second, 0 meaning off, all sharing one burst."""

        def limit(rate: float) -> Limit | None:
            return Limit(rate, burst_s) if rate > 0 else None

        return cls(
            limit(client_produce),
            limit(client_consume),
            limit(topic_produce),
            limit(topic_consume),
            limit(client_requests),
        )

    @property
    def produce(self) -> bool:
        return any((self.client_produce, self.topic_produce, self.client_requests))

    @property
    def consume(self) -> bool:
        return any((self.client_consume, self.topic_consume, self.client_requests))

    @property
    def any(self) -> bool:
        return self.produce or self.consume


class Quotas:
    """Charges produce and consume requests to their buckets; raises ``Throttled`` when one is dry.

    Collaborators: a ``QuotaStore`` holds the buckets; the API layer checks
    ``produce``/``consume`` (plain attributes, fixed at start, so a gateway
    without quotas pays one attribute read per request) before calling in.
    ``on_throttled(quota)`` and ``on_unchecked()`` feed the metrics.
    """

    def __init__(
        self,
        store: QuotaStore | None,
        limits: QuotaLimits,
        *,
        header: str = "X-API-Key",
        on_throttled: Callable[[str], None] = lambda quota: None,
        on_unchecked: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limits.any and store is None:
            raise ValueError("quotas are configured but there is no store for their buckets")
        self._store = store
        self.limits = limits
        self.header = header
        self.produce: bool = limits.produce
        self.consume: bool = limits.consume
        # Polls must learn their topics before they are admitted: only worth it with topic quotas.
        self.consume_by_topic: bool = limits.topic_consume is not None
        self._on_throttled = on_throttled
        self._on_unchecked = on_unchecked
        self._clock = clock
        self._healthy = True
        self._probing = False
        self._skip_until = -math.inf
        self._logged_at = -math.inf

    @classmethod
    def off(cls) -> Quotas:
        return cls(None, QuotaLimits())

    async def admit_produce(self, client: str, topic: str, records: Iterable[RecordLike]) -> None:
        """Charge a produce of ``records`` to ``topic`` by ``client``, or raise ``Throttled``."""
        lim = self.limits
        size = record_bytes(records) if lim.client_produce or lim.topic_produce else 0
        charges = []
        if lim.client_produce:
            charges.append(Charge(f"client/{client}/produce", lim.client_produce, size, CLIENT_PRODUCE))
        if lim.topic_produce:
            charges.append(Charge(f"topic/{topic}/produce", lim.topic_produce, size, TOPIC_PRODUCE))
        await self._take(charges, client)

    async def admit_consume(self, client: str, topics: Collection[str]) -> None:
        """Let a read of ``topics`` by ``client`` start unless one of its buckets is in debt.

        The bytes are charged afterwards (``consumed``), once they are known.
        """
        lim = self.limits
        charges = []
        if lim.client_consume:
            charges.append(Charge(f"client/{client}/consume", lim.client_consume, 0, CLIENT_CONSUME))
        if lim.topic_consume:
            charges.extend(
                Charge(f"topic/{t}/consume", lim.topic_consume, 0, TOPIC_CONSUME) for t in sorted(topics)
            )
        await self._take(charges, client)

    async def consumed(
        self, client: str, polled: Iterable[tuple[TopicPartition, Sequence[RecordLike]]]
    ) -> None:
        """Debit the bytes a read returned (buckets may go into debt: the next reads wait)."""
        lim = self.limits
        if not (lim.client_consume or lim.topic_consume):
            return
        by_topic: dict[str, int] = {}
        for tp, records in polled:
            by_topic[tp.topic] = by_topic.get(tp.topic, 0) + record_bytes(records)
        charges = []
        if lim.client_consume and by_topic:
            charges.append(Charge(f"client/{client}/consume", lim.client_consume, sum(by_topic.values())))
        if lim.topic_consume:
            charges.extend(
                Charge(f"topic/{t}/consume", lim.topic_consume, n) for t, n in sorted(by_topic.items()) if n
            )
        if charges:
            await self._ask(charges, take=False)

    async def _take(self, charges: list[Charge], client: str) -> None:
        per_request = self.limits.client_requests
        if per_request:
            charges.append(Charge(f"client/{client}/requests", per_request, 1, CLIENT_REQUESTS))
        if not charges:
            return
        levels = await self._ask(charges, take=True)
        if levels is None:
            self._on_unchecked()
            return
        refused = refusal(charges, levels)
        if refused is not None:
            self._on_throttled(refused.charge.quota)
            raise Throttled(_message(refused), retry_after=refused.retry_after_s)

    # --- failing open --------------------------------------------------------------
    # Healthy: every request asks the store. After a failure: none does for STORE_RETRY_S, then
    # one request at a time probes it (the others pass unchecked) until one gets an answer. So a
    # hung store delays one request per interval, not every request for as long as it hangs.

    async def _ask(self, charges: list[Charge], *, take: bool) -> list[float] | None:
        """The store's answer (levels for a take, [] for a debit), or None if it is unavailable."""
        probe = not self._healthy
        if probe and (self._probing or self._clock() < self._skip_until):
            return None
        assert self._store is not None  # a configured quota always has a store (see __init__)
        if probe:
            self._probing = True
        try:
            if take:
                levels = await self._store.take(charges)
            else:
                await self._store.debit(charges)
                levels = []
        except GatewayError as exc:
            self._failed(exc)
            return None
        finally:
            if probe:
                self._probing = False
        if probe:
            self._healthy = True
            log.info("quotas are enforced again: their store answers")
        return levels

    def _failed(self, exc: GatewayError) -> None:
        now = self._clock()
        self._healthy = False
        self._skip_until = now + STORE_RETRY_S
        if now - self._logged_at >= STORE_LOG_EVERY_S:
            self._logged_at = now
            log.warning("quotas are not enforced while their store is unavailable: %s", exc.message)


_WHAT: Final = {
    CLIENT_PRODUCE: "This client's produce quota",
    CLIENT_CONSUME: "This client's consume quota",
    CLIENT_REQUESTS: "This client's request quota",
    TOPIC_PRODUCE: "The produce quota of topic {}",
    TOPIC_CONSUME: "The consume quota of topic {}",
}


def _message(refused: Refusal) -> str:
    charge = refused.charge
    what = _WHAT.get(charge.quota, "A quota")
    if "{}" in what:  # a topic bucket: "topic/{name}/{direction}"
        what = what.format(repr(charge.bucket.removeprefix("topic/").rpartition("/")[0]))
    unit = "requests" if charge.quota == CLIENT_REQUESTS else "bytes"
    return f"{what} ({charge.limit.rate:g} {unit}/s) is used up; retry after {refused.retry_after_s} s."
