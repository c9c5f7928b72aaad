"""Quota token buckets: the pure math, the embedded store on a fake clock, and failing open."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Sequence

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from service.adapters.embedded.quotas import EmbeddedQuotas
from service.core.buckets import (
    Charge,
    Limit,
    admits,
    ms_until_full,
    refill,
    refusal,
    retry_after_s,
)
from service.core.models import NewRecord, Record, RecordColumns, TopicPartition
from service.core.quotas import (
    CLIENT_PRODUCE,
    CLIENT_REQUESTS,
    TOPIC_PRODUCE,
    QuotaLimits,
    Quotas,
    client_id,
)
from service.core.rules import record_bytes
from service.errors import BackendUnavailable, Throttled
from service.settings import Settings

rates = st.floats(min_value=0.01, max_value=1e9, allow_nan=False)
bursts = st.floats(min_value=0.001, max_value=3600, allow_nan=False)
limits = st.builds(Limit, rates, bursts)
levels = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)


class Clock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- the math ------------------------------------------------------------------------


def test_a_limit_needs_a_positive_rate_and_burst() -> None:
    assert Limit(100, 2).capacity == 200
    for rate, burst in ((0, 1), (1, 0), (-1, 1), (float("inf"), 1)):
        with pytest.raises(ValueError):
            Limit(rate, burst)


@given(limits, levels, st.floats(min_value=0, max_value=1e9), st.floats(min_value=0, max_value=1e6))
def test_refill_grows_with_time_up_to_the_capacity(limit: Limit, level: float, at: float, dt: float) -> None:
    level = min(level, limit.capacity)
    now = refill(level, at, limit, at + dt)
    assert level <= now <= limit.capacity
    assert refill(level, at, limit, at + dt + 1) >= now
    assert refill(level, at, limit, at - dt) == level  # a clock going back takes nothing
    assert refill(None, at, limit, at) == limit.capacity  # never seen: full


@given(limits, levels)
@example(Limit(0.01, 1.0), -549755813888.94)  # found by hypothesis: the wait fell a hair short
@example(Limit(1 / 3, 1.0), -733007751850.9999)  # found by hypothesis: the division landed a second long
def test_retry_after_is_enough_and_no_longer_than_needed(limit: Limit, level: float) -> None:
    level = min(level, limit.capacity)
    wait = retry_after_s(level, limit)
    if admits([level]):
        assert wait == 0
        return
    assert wait >= 1
    assert admits([refill(level, 0, limit, wait * 1000)])
    # "No longer" holds where milliseconds are exact floats: waits under 285,000 years.
    if wait > 1 and wait * 1000 < 2**53:
        assert not admits([refill(level, 0, limit, (wait - 1) * 1000)])


def test_retry_after_in_whole_seconds() -> None:
    limit = Limit(1000, 1)
    assert retry_after_s(1, limit) == 0
    assert retry_after_s(0, limit) == 1
    assert retry_after_s(-200, limit) == 1
    assert retry_after_s(-1000, limit) == 2  # at exactly 0 it still refuses
    assert retry_after_s(-1500, limit) == 2


@given(limits, st.floats(min_value=-1e9, max_value=1e9))
@example(Limit(0.03125, 0.01), -536870912.0)  # found by hypothesis: a debt far above the capacity
def test_a_bucket_is_full_again_when_it_says(limit: Limit, level: float) -> None:
    level = min(level, limit.capacity)
    # Full up to the rounding of adding the refill to the level, in the level's magnitude:
    # forgetting the bucket then (a missing bucket is a full one) changes nothing that counts.
    rounding = 4 * math.ulp(abs(level))
    full = refill(level, 0, limit, ms_until_full(level, limit))
    assert full == pytest.approx(limit.capacity, rel=1e-9, abs=rounding)


def test_refusal_names_the_bucket_with_the_longest_wait() -> None:
    a = Charge("a", Limit(100, 1), 10)
    b = Charge("b", Limit(100, 1), 10)
    assert refusal([a, b], [5, 1]) is None
    worst = refusal([a, b], [-50, -250])
    assert worst is not None and worst.charge is b and worst.retry_after_s == 3
    worst = refusal([a, b], [-50, 7])
    assert worst is not None and worst.charge is a and worst.retry_after_s == 1


@given(
    limits,
    st.lists(
        st.tuples(st.floats(min_value=0, max_value=5_000), st.integers(min_value=0, max_value=10_000)),
        max_size=60,
    ),
)
async def test_admitted_bytes_never_outrun_rate_plus_burst_plus_one_request(
    limit: Limit, steps: list[tuple[float, int]]
) -> None:
    """Kafka's promise: over any span, what got through is the burst, the rate, and one request over."""
    clock = Clock()
    store = EmbeddedQuotas(clock)
    start = clock.now
    admitted = 0
    for dt_ms, cost in steps:
        clock.now += dt_ms / 1000
        charge = Charge("b", limit, cost)
        if admits(await store.take([charge])):
            admitted += cost
    elapsed = clock.now - start
    biggest = max((cost for _, cost in steps), default=0)
    assert admitted <= limit.capacity + limit.rate * elapsed + biggest + 1e-6 * (1 + admitted)


def test_record_bytes_counts_keys_values_and_headers() -> None:
    records = [
        NewRecord(b"ab", b"cde", (("h", b"12"),)),
        NewRecord(None, b"x"),
        NewRecord(None, None, (("k", None),)),
    ]
    assert record_bytes(records) == 2 + 3 + 1 + 2 + 1 + 1
    assert record_bytes([Record(0, 0, b"ab", b"cde", (("h", b"12"),))]) == 8


def test_clients_are_named_by_a_hash_of_their_key_else_their_address() -> None:
    secret = "sk-live-0123456789"
    named = client_id(secret, "10.0.0.1")
    assert secret not in named and named.startswith("key:")
    assert named == client_id(secret, "10.0.0.2")  # the key wins over the address
    assert named != client_id(secret + "x", "10.0.0.1")
    assert client_id(None, "10.0.0.1") == client_id("", "10.0.0.1") == "ip:10.0.0.1"
    assert client_id(None, None) == "ip:unknown"


def test_limits_from_rates() -> None:
    off = QuotaLimits.from_rates(burst_s=1)
    assert not off.any and not off.produce and not off.consume
    requests = QuotaLimits.from_rates(burst_s=2, client_requests=5)
    assert requests.produce and requests.consume
    assert requests.client_requests == Limit(5, 2)
    topic = QuotaLimits.from_rates(burst_s=1, topic_consume=100)
    assert topic.consume and not topic.produce


def test_quota_settings_are_off_by_default_and_validated() -> None:
    assert not Settings().quota_limits().any
    on = Settings(quota_topic_consume_bytes_per_s=1000, quota_burst_s=2.5).quota_limits()
    assert on.topic_consume == Limit(1000, 2.5) and not on.produce
    assert Settings(quota_client_header="").quota_client_header == ""  # by address only
    for bad in (
        {"quota_client_produce_bytes_per_s": -1},
        {"quota_client_requests_per_s": "inf"},
        {"quota_burst_s": 0},
        {"quota_burst_s": "nan"},
        {"quota_client_header": "X API Key"},
    ):
        with pytest.raises(ValueError):
            Settings(**bad)  # type: ignore[arg-type]


# --- the embedded store --------------------------------------------------------------


async def test_embedded_take_is_all_or_nothing() -> None:
    clock = Clock()
    store = EmbeddedQuotas(clock)
    client, topic = Charge("c", Limit(100, 1), 80), Charge("t", Limit(1000, 1), 80)
    assert await store.take([client, topic]) == [100, 1000]
    assert await store.take([client, topic]) == [20, 920]  # admitted: both now in debt or lower
    assert await store.take([client, topic]) == [-60, 840]  # refused by the client bucket...
    assert await store.take([Charge("t", Limit(1000, 1), 0)]) == [840]  # ...so the topic kept its tokens
    clock.now += 1
    assert await store.take([client]) == [40]


async def test_embedded_debit_goes_into_debt_and_refills() -> None:
    clock = Clock()
    store = EmbeddedQuotas(clock)
    limit = Limit(100, 1)
    await store.debit([Charge("c", limit, 350)])
    [level] = await store.take([Charge("c", limit, 0)])
    assert level == -250 and retry_after_s(level, limit) == 3
    clock.now += 3
    assert admits(await store.take([Charge("c", limit, 0)]))


async def test_embedded_store_forgets_buckets_once_full() -> None:
    clock = Clock()
    store = EmbeddedQuotas(clock)
    limit = Limit(1000, 1)
    for i in range(3000):
        await store.take([Charge(f"client/{i}/produce", limit, 500)])
    assert len(store) == 3000  # sweeps on the way kept them all: none was full yet
    clock.now += 1
    for i in range(3000, 6000):
        await store.take([Charge(f"client/{i}/produce", limit, 500)])
    assert len(store) == 3000  # a sweep dropped the first 3000, full again by then
    assert await store.take([Charge("client/0/produce", limit, 0)]) == [1000]


# --- the policy ----------------------------------------------------------------------


class OutageStore(EmbeddedQuotas):
    """The embedded store behind a switch: down, it fails as the Redis store does; ``gate`` holds calls."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.up = True
        self.calls = 0
        self.gate: asyncio.Event | None = None

    async def _check(self) -> None:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if not self.up:
            raise BackendUnavailable("Redis at redis://127.0.0.1:1/0 is unavailable (ConnectionError).")

    async def take(self, charges: Sequence[Charge]) -> list[float]:
        await self._check()
        return await super().take(charges)

    async def debit(self, charges: Sequence[Charge]) -> None:
        await self._check()
        await super().debit(charges)


async def test_quotas_throttle_with_the_refusing_bucket_and_retry_after() -> None:
    clock = Clock()
    throttled: list[str] = []
    quotas = Quotas(
        EmbeddedQuotas(clock),
        QuotaLimits.from_rates(burst_s=1, client_produce=100, topic_produce=1000),
        on_throttled=throttled.append,
    )
    records = [NewRecord(None, b"x" * 150)]
    await quotas.admit_produce("ip:a", "t", records)
    with pytest.raises(Throttled) as caught:
        await quotas.admit_produce("ip:a", "t", records)
    assert caught.value.http_status == 429 and caught.value.error_code == 42901
    assert caught.value.retry_after == 1 and "client's produce quota (100 bytes/s)" in caught.value.message
    assert throttled == [CLIENT_PRODUCE]
    await quotas.admit_produce("ip:b", "t", records)  # another client, same topic: the topic has room
    for client in "cdefg":
        await quotas.admit_produce(f"ip:{client}", "t", records)
    with pytest.raises(Throttled) as caught:
        await quotas.admit_produce("ip:h", "t", records)
    assert "produce quota of topic 't'" in caught.value.message
    assert throttled == [CLIENT_PRODUCE, TOPIC_PRODUCE]


async def test_request_quota_counts_reads_and_writes() -> None:
    clock = Clock()
    throttled: list[str] = []
    quotas = Quotas(
        EmbeddedQuotas(clock),
        QuotaLimits.from_rates(burst_s=1, client_requests=2),
        on_throttled=throttled.append,
    )
    await quotas.admit_produce("ip:a", "t", [])
    await quotas.admit_consume("ip:a", ["t"])
    with pytest.raises(Throttled) as caught:
        await quotas.admit_produce("ip:a", "t", [])
    assert "request quota (2 requests/s)" in caught.value.message
    assert throttled == [CLIENT_REQUESTS]


async def test_consume_is_admitted_until_the_bytes_read_put_it_in_debt() -> None:
    clock = Clock()
    quotas = Quotas(EmbeddedQuotas(clock), QuotaLimits.from_rates(burst_s=1, client_consume=100))
    await quotas.admit_consume("ip:a", ["t"])
    await quotas.consumed(
        "ip:a", [(TopicPartition("t", 0), RecordColumns.of([Record(0, 0, None, b"x" * 250)]))]
    )
    with pytest.raises(Throttled) as caught:
        await quotas.admit_consume("ip:a", ["t"])
    assert caught.value.retry_after == 2
    clock.now += 2
    await quotas.admit_consume("ip:a", ["t"])


async def test_an_unavailable_store_fails_open_logs_once_and_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    store = OutageStore(clock)
    unchecked: list[None] = []
    quotas = Quotas(
        store,
        QuotaLimits.from_rates(burst_s=1, client_produce=1, client_consume=1),
        on_unchecked=lambda: unchecked.append(None),
        clock=clock,
    )
    big = [NewRecord(None, b"x" * 100)]
    store.up = False
    with caplog.at_level(logging.INFO, logger="service.core.quotas"):
        for _ in range(5):
            await quotas.admit_produce("ip:a", "t", big)
        await quotas.consumed(
            "ip:a", [(TopicPartition("t", 0), RecordColumns.of([Record(0, 0, None, b"x")]))]
        )
        assert store.calls == 1  # asked once, then left alone for a while
        clock.now += 2
        await quotas.admit_consume("ip:a", ["t"])  # asked again: still down
        assert store.calls == 2 and len(unchecked) == 6

        store.up = True
        await quotas.admit_produce("ip:a", "t", big)  # too soon to ask: unchecked
        clock.now += 2
        await quotas.admit_produce("ip:a", "t", big)  # the store answers: checked, and in debt now
        with pytest.raises(Throttled):
            await quotas.admit_produce("ip:a", "t", big)
    assert len(unchecked) == 7
    messages = [r.getMessage() for r in caplog.records]
    assert sum("not enforced" in m for m in messages) == 1  # once, however often it failed
    assert "Redis" in next(m for m in messages if "not enforced" in m)
    assert sum("enforced again" in m for m in messages) == 1


async def test_one_request_at_a_time_probes_a_store_that_failed() -> None:
    clock = Clock()
    store = OutageStore(clock)
    quotas = Quotas(store, QuotaLimits.from_rates(burst_s=1, client_produce=1_000_000), clock=clock)
    store.up = False
    await quotas.admit_produce("ip:a", "t", [])
    clock.now += 2
    store.gate = asyncio.Event()  # the store hangs...
    probe = asyncio.create_task(quotas.admit_produce("ip:a", "t", []))
    await asyncio.sleep(0)
    assert store.calls == 2
    for _ in range(10):  # ...and meanwhile nobody else waits for it
        await quotas.admit_produce("ip:a", "t", [])
    assert store.calls == 2
    store.gate.set()
    await probe  # it fails: unchecked, and the next probe is a while away
    await quotas.admit_produce("ip:a", "t", [])
    assert store.calls == 2


def test_quotas_without_a_store_must_be_off() -> None:
    assert not Quotas.off().produce and not Quotas.off().consume
    with pytest.raises(ValueError):
        Quotas(None, QuotaLimits.from_rates(burst_s=1, client_produce=1))
