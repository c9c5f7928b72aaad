"""Produce and consume quotas: the policy that charges requests to token buckets.

The buckets' math is pure and lives in ``buckets``: a request is admitted
while none of its buckets is in debt, then debited what it cost. This is how
Kafka throttles (``producer_byte_rate``/``consumer_byte_rate``): it lets a
request through and makes the client wait for the bytes it took. It is what
consume needs, since a poll's bytes are only known after the fetch (``debit``
them then); it never starves a request larger than the burst; and a big
request cannot be overtaken forever by small ones, which a "wait until the
bucket holds the whole cost" rule would allow. The price is that one request
may overshoot the burst; over time the rate is exact.

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
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Final

from service.errors import GatewayError, Throttled

from .buckets import Charge, Limit, Refusal, refusal
from .models import RecordColumns, TopicPartition
from .ports import QuotaStore
from .rules import RecordLike, record_bytes

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

    async def consumed(self, client: str, polled: Iterable[tuple[TopicPartition, RecordColumns]]) -> None:
        """Debit the bytes a read returned (buckets may go into debt: the next reads wait)."""
        lim = self.limits
        if not (lim.client_consume or lim.topic_consume):
            return
        by_topic: dict[str, int] = {}
        for tp, records in polled:
            by_topic[tp.topic] = by_topic.get(tp.topic, 0) + records.weight
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
