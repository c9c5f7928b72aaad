"""A broker that stops answering: bounded 503s, then recovery by itself, nothing acknowledged lost.

These tests freeze (SIGSTOP) a broker of this module's own, started once for the module, so the
session's broker of the other tests is never touched. The log's request timeout is short, so
that every wait on the frozen broker ends quickly.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import logging
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from aiokafka.record.memory_records import MemoryRecords

from deploy.local.kafka_broker import KafkaBroker, free_port
from service.adapters.kafka import KafkaLog
from service.core.models import NewRecord, TopicPartition
from service.errors import BackendUnavailable
from tests.conftest import kafka_settings, running_gateway
from tests.helpers import STRING, create_topic
from tests.stream_client import events

from .helpers import options, read_all, values

TIMEOUT_MS = 1500
T = TypeVar("T")


@pytest.fixture(scope="module")
def frozen_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    with KafkaBroker(tmp_path_factory.mktemp("kafka-outage")) as broker:
        yield broker


async def bounded(awaitable: Awaitable[T], limit: float) -> T:
    """Await ``awaitable``, failing the test (TimeoutError) if it takes over ``limit`` seconds."""
    async with asyncio.timeout(limit):
        return await awaitable


async def test_outage_gives_503_within_the_timeout_then_recovers(
    frozen_broker: KafkaBroker, topic: str
) -> None:
    log = KafkaLog(frozen_broker.url, options(request_timeout_ms=TIMEOUT_MS, metadata_max_age_ms=60_000))
    await log.start()
    try:
        await log.create_topic(topic, 1, 1, {})
        tp = TopicPartition(topic, 0)
        acked = list(await log.append(tp, values(5)))
        await log.fetch({tp: 0}, max_bytes=1 << 20, max_wait_ms=0)  # nothing kept for later

        frozen_broker.pause()
        try:
            limit = 2 * TIMEOUT_MS / 1000 + 1
            with pytest.raises(BackendUnavailable) as appended:
                await bounded(log.append(tp, values(1, prefix="lost?")), limit)
            assert appended.value.retry_after
            with pytest.raises(BackendUnavailable):
                await bounded(log.fetch({tp: 5}, max_bytes=1000, max_wait_ms=0), limit)
            with pytest.raises(BackendUnavailable):
                await bounded(log.fetch({tp: 5}, max_bytes=1000, max_wait_ms=500), limit + 0.5)
            with pytest.raises(BackendUnavailable):
                await bounded(log.list_topics(), limit)
            with pytest.raises(BackendUnavailable):
                await bounded(log.offsets(tp), limit)
        finally:
            frozen_broker.resume()

        async with asyncio.timeout(30):  # recovers without a restart of the log
            while True:
                try:
                    more = list(await log.append(tp, [NewRecord(None, b"after")]))
                    break
                except BackendUnavailable:
                    await asyncio.sleep(0.2)
        records = await read_all(log, tp)
        offsets = [r.offset for r in records]
        assert set(acked) <= set(offsets) and more[0] in offsets
        assert [r.value for r in records if r.offset in acked] == [f"v{i}".encode() for i in range(5)]
        assert records[-1].value == b"after"
    finally:
        await log.stop()


async def test_a_full_producer_buffer_is_503_not_unbounded_memory(
    frozen_broker: KafkaBroker, topic: str
) -> None:
    log = KafkaLog(
        frozen_broker.url,
        options(request_timeout_ms=TIMEOUT_MS, buffer_bytes=64 * 1024, batch_bytes=16 * 1024),
    )
    await log.start()
    try:
        await log.create_topic(topic, 1, 1, {})
        tp = TopicPartition(topic, 0)
        frozen_broker.pause()
        try:
            calls = [log.append(tp, values(40, size=1000, prefix=f"c{i}-")) for i in range(6)]
            results = await bounded(asyncio.gather(*calls, return_exceptions=True), 3 * TIMEOUT_MS / 1000 + 1)
            assert all(isinstance(r, BackendUnavailable) for r in results)
            assert any("buffer" in str(r) for r in results)  # refused without taking more memory
        finally:
            frozen_broker.resume()
        budget = log._appender.budget  # white box: the bytes come back once Kafka settles them
        for _ in range(200):
            if not budget.in_use:
                break
            await asyncio.sleep(0.1)
        assert budget.in_use == 0
    finally:
        await log.stop()


async def test_start_fails_fast_and_in_one_line_when_nothing_listens(tmp_path: Path) -> None:
    port = free_port()  # nobody listens there
    log = KafkaLog(f"kafka://127.0.0.1:{port}", options(request_timeout_ms=TIMEOUT_MS))
    with pytest.raises(BackendUnavailable) as failed:
        await bounded(log.start(), TIMEOUT_MS / 1000 + 1)
    message = str(failed.value)
    assert f"127.0.0.1:{port}" in message and "\n" not in message
    with pytest.raises(BackendUnavailable):
        await log.list_topics()  # not started: refused, not hung
    await log.stop()


async def test_start_against_a_frozen_broker_is_bounded(frozen_broker: KafkaBroker) -> None:
    log = KafkaLog(frozen_broker.url, options(request_timeout_ms=TIMEOUT_MS))
    frozen_broker.pause()
    try:
        with pytest.raises(BackendUnavailable) as failed:
            await bounded(log.start(), TIMEOUT_MS / 1000 + 1)
        assert frozen_broker.bootstrap in str(failed.value)
    finally:
        frozen_broker.resume()
    await log.start()  # start() may be retried once the cluster is back
    await log.stop()


async def test_stop_is_idempotent_and_refuses_later_calls(frozen_broker: KafkaBroker, topic: str) -> None:
    log = KafkaLog(frozen_broker.url, options())
    await log.start()
    await log.create_topic(topic, 1, 1, {})
    await log.append(TopicPartition(topic, 0), values(3))
    await asyncio.gather(log.stop(), log.stop())
    await log.stop()
    with pytest.raises(BackendUnavailable):
        await log.append(TopicPartition(topic, 0), values(1))
    with pytest.raises(BackendUnavailable):
        await log.fetch({TopicPartition(topic, 0): 0}, max_bytes=10, max_wait_ms=0)


async def test_stop_during_an_outage_is_bounded(frozen_broker: KafkaBroker, topic: str) -> None:
    log = KafkaLog(frozen_broker.url, options(request_timeout_ms=TIMEOUT_MS))
    await log.start()
    await log.create_topic(topic, 1, 1, {})
    frozen_broker.pause()
    try:
        with pytest.raises(BackendUnavailable):
            await log.append(TopicPartition(topic, 0), values(3))  # its batch is still queued
        await bounded(log.stop(), 3 * TIMEOUT_MS / 1000 + 1)
    finally:
        frozen_broker.resume()


async def test_a_stop_with_batches_in_flight_answers_503_and_logs_nothing_alarming(
    frozen_broker: KafkaBroker, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The idempotent producer retries what it holds for as long as the broker is away: the stop
    answers every caller 503 within its bounds, and neither the gateway nor aiokafka logs an
    error or a future nobody looked at."""
    caplog.set_level(logging.WARNING)
    log = KafkaLog(frozen_broker.url, options(request_timeout_ms=TIMEOUT_MS))
    await log.start()
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    await log.create_topic(topic, 2, 1, {})
    for tp in tps:
        await log.append(tp, values(1))  # the producer knows the partitions' leader: it sends at once
    frozen_broker.pause()
    try:
        appends = [asyncio.create_task(log.append(tps[i % 2], values(3, prefix=f"c{i}-"))) for i in range(6)]
        await asyncio.sleep(0.3)  # one batch per partition sent to the frozen broker, the next queued
        await bounded(log.stop(), 2 * TIMEOUT_MS / 1000 + 1)
        results = await bounded(asyncio.gather(*appends, return_exceptions=True), 1)
    finally:
        frozen_broker.resume()
    for result in results:
        assert isinstance(result, BackendUnavailable) and result.retry_after, repr(result)
    await asyncio.sleep(1)  # the broker answers what it was sent
    gc.collect()  # a future whose exception nobody retrieved is logged when it is collected
    alarming = [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if (r.levelno >= logging.ERROR and r.name.split(".")[0] in ("service", "asyncio"))
        or "never retrieved" in r.getMessage()
        or "sender routine" in r.getMessage()
    ]
    assert not alarming, alarming


async def test_the_producer_is_idempotent_by_default(frozen_broker: KafkaBroker, topic: str) -> None:
    """With Kafka's defaults the log's producer gets a producer id from the cluster (InitProducerId)
    and every batch is stored with it and its sequence numbers, by which the broker drops a batch
    a retry sends twice: what the segment file on the broker's disk holds says so."""
    log = KafkaLog(frozen_broker.url, options())
    assert log.options.idempotence
    async with log:
        await log.create_topic(topic, 1, 1, {})
        tp = TopicPartition(topic, 0)
        for n in (3, 2):
            await log.append(tp, values(n))
    segment = frozen_broker.data_dir / f"{topic}-0" / f"{0:020d}.log"
    batches = MemoryRecords(segment.read_bytes())
    stored = []
    while (batch := batches.next_batch()) is not None:
        stored.append((batch.base_offset, batch.producer_id, batch.base_sequence))
    [(_, producer, _), _] = stored
    assert producer >= 0  # -1 is a producer without idempotence
    assert stored == [(0, producer, 0), (3, producer, 3)]


@pytest.mark.parametrize("retry_ms", [30_000, 0])
async def test_a_stream_rides_out_a_frozen_broker_for_its_bound(
    frozen_broker: KafkaBroker, topic: str, tmp_path: Path, retry_ms: int
) -> None:
    """A partition stream's reads fail (503) while its broker is frozen: it reads again, with
    keep-alives meanwhile, and goes on once the broker is back; with no bound it ends (50301)."""
    settings = {
        **kafka_settings(frozen_broker),
        "kafka_request_timeout_ms": TIMEOUT_MS,
        "stream_backend_retry_ms": retry_ms,
        "stream_heartbeat_ms": 500,
    }
    async with running_gateway(tmp_path / "data", **settings) as gw:
        await create_topic(gw.client, topic, 1)
        async with events(gw.client, f"/topics/{topic}/partitions/0/records") as stream:
            reading = asyncio.create_task(stream.next(timeout=60))
            await asyncio.sleep(0.5)  # the stream's first read waits at the broker
            frozen_broker.pause()
            try:
                await asyncio.sleep(3 * TIMEOUT_MS / 1000)  # reads time out, one after another
            finally:
                frozen_broker.resume()
            if retry_ms == 0:
                event = await reading
                assert (event.event, event.json()["error_code"]) == ("end", 50301), event
                return
            assert not reading.done(), reading.result()
            for _ in range(150):  # the producer may take a moment to see the broker again
                r = await gw.client.post(
                    f"/topics/{topic}",
                    json={"records": [{"value": "after"}]},
                    headers={"Content-Type": STRING},
                )
                if r.status_code == 200:
                    break
                await asyncio.sleep(0.2)
            event = await reading
            assert event.event == "records", event
            assert [base64.b64decode(r["value"]) for r in event.json()] == [b"after"]
            assert "keep-alive" in stream.comments
