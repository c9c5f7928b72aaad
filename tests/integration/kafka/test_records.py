"""KafkaLog.append and fetch against a real broker: what is written is what is read, in order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from deploy.local.kafka_broker import KafkaBroker
from service.adapters.kafka import KafkaLog
from service.core.models import NewRecord, TopicPartition
from service.errors import InvalidPayload, PartitionNotFound, TopicNotFound

from .helpers import options, read_all, values


@pytest.fixture(scope="module")
def frozen_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A broker of this module's own, for the tests that freeze it (SIGSTOP) to prove that what
    comes next is served from memory: the session's broker is never frozen under other tests."""
    with KafkaBroker(tmp_path_factory.mktemp("kafka-records")) as broker:
        yield broker


async def test_round_trip_keeps_keys_values_nulls_headers_and_timestamps(
    kafka_log: KafkaLog, topic: str
) -> None:
    await kafka_log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)
    sent = [
        NewRecord(b"k1", b"v1", (("trace", b"t-1"), ("empty", b""), ("none", None)), 1_700_000_000_000),
        NewRecord(None, b"keyless"),
        NewRecord(b"tombstone", None, (), 1_700_000_000_005),
        NewRecord(None, None),
        NewRecord(b"\x00\xff", bytes(range(256)), (("dup", b"a"), ("dup", b"b"))),
    ]
    before = int(time.time() * 1000)
    offsets = await kafka_log.append(tp, sent)
    after = int(time.time() * 1000)
    assert list(offsets) == [0, 1, 2, 3, 4]

    got = (await kafka_log.fetch({tp: 0}, max_bytes=1 << 20, max_wait_ms=0))[tp]
    assert [r.offset for r in got.records] == [0, 1, 2, 3, 4]
    assert got.high_watermark == 5 and got.log_start_offset == 0
    for wrote, read in zip(sent, got.records, strict=True):
        assert (read.key, read.value, read.headers) == (wrote.key, wrote.value, wrote.headers)
        if wrote.timestamp is not None:
            assert read.timestamp == wrote.timestamp
        else:  # "now" at append time
            assert before <= read.timestamp <= after


async def test_offsets_are_per_record_and_continue_across_calls(kafka_log: KafkaLog, topic: str) -> None:
    await kafka_log.create_topic(topic, 2, 1, {})
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert list(await kafka_log.append(tp0, values(3))) == [0, 1, 2]
    assert list(await kafka_log.append(tp1, values(2))) == [0, 1]
    assert list(await kafka_log.append(tp0, values(2, prefix="w"))) == [3, 4]
    assert list(await kafka_log.append(tp0, [])) == []
    records = await read_all(kafka_log, tp0)
    assert [r.value for r in records] == [b"v0", b"v1", b"v2", b"w0", b"w1"]


async def test_concurrent_appends_each_get_their_own_offsets(kafka_log: KafkaLog, topic: str) -> None:
    await kafka_log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)
    calls = [values(5, prefix=f"c{i}-") for i in range(8)]
    results = await asyncio.gather(*(kafka_log.append(tp, batch) for batch in calls))
    by_offset = {r.offset: r.value for r in await read_all(kafka_log, tp)}
    assert sorted(by_offset) == list(range(40))
    for batch, offsets in zip(calls, results, strict=True):
        assert list(offsets) == sorted(offsets)
        assert [by_offset[o] for o in offsets] == [r.value for r in batch]


async def test_concurrent_calls_sharing_batches_keep_their_records_apart(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    """Calls that meet on a partition share batches; each still gets exactly its records' offsets."""
    async with KafkaLog(kafka_broker.url, options(batch_bytes=4096)) as log:
        await log.create_topic(topic, 1, 1, {})
        tp = TopicPartition(topic, 0)
        calls = [
            [
                NewRecord(
                    f"k{i}".encode(), f"c{i}-{j}".encode().ljust(40 * (i % 5), b"."), (("n", b"%d" % j),)
                )
                for j in range(1 + (i * 7) % 60)
            ]
            for i in range(40)
        ]
        results = await asyncio.gather(*(log.append(tp, call) for call in calls))
        got = {r.offset: r for r in await read_all(log, tp, max_bytes=50_000)}
        assert sorted(got) == list(range(sum(map(len, calls))))
        for call, offsets in zip(calls, results, strict=True):
            assert list(offsets) == sorted(offsets)
            assert [(got[o].key, got[o].value, got[o].headers) for o in offsets] == [
                (r.key, r.value, r.headers) for r in call
            ]


async def test_a_call_bigger_than_one_kafka_batch_is_split_and_keeps_its_order(
    kafka_broker: KafkaBroker, topic: str
) -> None:
    async with KafkaLog(kafka_broker.url, options(batch_bytes=4096)) as log:
        await log.create_topic(topic, 1, 1, {})
        tp = TopicPartition(topic, 0)
        sent = values(100, size=200)  # ~20 KB: at least 5 batches of 4 KB
        offsets = list(await log.append(tp, sent))
        assert len(offsets) == 100 and offsets == sorted(set(offsets))
        assert offsets == list(range(100))  # nobody else writes here, so they are also dense
        got = await read_all(log, tp, max_bytes=1000)
        assert [r.value for r in got] == [r.value for r in sent]


async def test_fetch_long_poll_returns_when_records_arrive(kafka_log: KafkaLog, topic: str) -> None:
    await kafka_log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)

    async def later() -> None:
        await asyncio.sleep(0.3)
        await kafka_log.append(tp, [NewRecord(None, b"wake up")])

    writer = asyncio.create_task(later())
    loop = asyncio.get_running_loop()
    started = loop.time()
    got = (await kafka_log.fetch({tp: 0}, max_bytes=1000, max_wait_ms=20_000))[tp]
    waited = loop.time() - started
    await writer
    assert [r.value for r in got.records] == [b"wake up"]
    assert waited < 10, "the poll ran to its timeout instead of returning with the record"


async def test_fetch_with_nothing_new_waits_for_its_timeout_and_returns_empty(
    kafka_log: KafkaLog, topic: str
) -> None:
    await kafka_log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)
    await kafka_log.append(tp, values(2))
    loop = asyncio.get_running_loop()
    started = loop.time()
    got = (await kafka_log.fetch({tp: 2}, max_bytes=1000, max_wait_ms=700))[tp]
    assert got.records == [] and got.high_watermark == 2
    assert loop.time() - started >= 0.6
    past_end = (await kafka_log.fetch({tp: 50}, max_bytes=1000, max_wait_ms=0))[tp]
    assert past_end.records == [] and past_end.high_watermark == 2


async def test_max_bytes_is_a_shared_budget_but_one_record_always_comes(
    kafka_log: KafkaLog, topic: str
) -> None:
    await kafka_log.create_topic(topic, 2, 1, {})
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    await kafka_log.append(tp0, [NewRecord(None, b"x" * 5000), NewRecord(None, b"small")])
    await kafka_log.append(tp1, values(3))

    alone = await kafka_log.fetch({tp0: 0}, max_bytes=100, max_wait_ms=0)
    assert [len(r.value or b"") for r in alone[tp0].records] == [5000]  # oversized, still delivered

    both = await kafka_log.fetch({tp0: 1, tp1: 0}, max_bytes=9, max_wait_ms=0)
    assert [r.value for r in both[tp0].records] == [b"small"]  # 5 bytes
    assert [r.value for r in both[tp1].records] == [b"v0", b"v1"]  # 2 + 2 more fit, a third would not
    assert both[tp1].high_watermark == 3

    from_middle = await kafka_log.fetch({tp1: 1}, max_bytes=1 << 20, max_wait_ms=0)
    assert [r.offset for r in from_middle[tp1].records] == [1, 2]


async def test_max_records_bounds_a_fetch_in_all_and_the_rest_comes_next(
    kafka_log: KafkaLog, topic: str
) -> None:
    await kafka_log.create_topic(topic, 2, 1, {})
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    await kafka_log.append(tp0, values(4))
    await kafka_log.append(tp1, values(4))
    got = await kafka_log.fetch({tp0: 1, tp1: 0}, max_bytes=1 << 20, max_wait_ms=0, max_records=5)
    assert [r.offset for r in got[tp0].records] == [1, 2, 3] and [r.offset for r in got[tp1].records] == [
        0,
        1,
    ]
    # enough records answer a long-poll at once, whatever min_bytes asks
    rest = await kafka_log.fetch(
        {tp1: 2}, max_bytes=1 << 20, max_wait_ms=20_000, min_bytes=1 << 20, max_records=2
    )
    assert [r.offset for r in rest[tp1].records] == [2, 3]


async def test_read_ahead_serves_a_sequential_reader_from_memory(
    frozen_broker: KafkaBroker, topic: str
) -> None:
    async with KafkaLog(frozen_broker.url, options()) as log:
        await log.create_topic(topic, 1, 1, {})
        tp = TopicPartition(topic, 0)
        await log.append(tp, values(50, size=100))
        first = (await log.fetch({tp: 0}, max_bytes=250, max_wait_ms=0))[tp]
        assert [r.offset for r in first.records] == [0, 1]
        # The broker sent the whole batch; with the broker frozen the rest still comes, in order.
        frozen_broker.pause()
        try:
            pos, seen = 2, [0, 1]
            while pos < 50:
                data = (await log.fetch({tp: pos}, max_bytes=250, max_wait_ms=0))[tp]
                assert data.records, f"no record at {pos} from memory"
                seen += [r.offset for r in data.records]
                pos = data.records[-1].offset + 1
        finally:
            frozen_broker.resume()
        assert seen == list(range(50))


async def test_a_reader_behind_is_read_ahead_while_it_works(frozen_broker: KafkaBroker, topic: str) -> None:
    """A poll that takes all a fetch brought starts the next fetch in the background."""
    async with KafkaLog(frozen_broker.url, options(fetch_bytes=2_000)) as log:
        await log.create_topic(topic, 1, 1, {})
        tp = TopicPartition(topic, 0)
        for part in range(5):  # five batches of ~1 KB: one fetch of 2,000 bytes cannot take them all
            await log.append(tp, values(10, size=100, prefix=f"b{part}-"))
        first = (await log.fetch({tp: 0}, max_bytes=2_000, max_wait_ms=0))[tp]
        pos = first.records[-1].offset + 1
        assert pos < 50
        for _ in range(200):  # the background read is a broker round trip away
            if log._fetcher._prefetched_at(tp) is None:
                break
            await asyncio.sleep(0.01)
        frozen_broker.pause()  # what comes next must already be in memory
        try:
            following = (await log.fetch({tp: pos}, max_bytes=2_000, max_wait_ms=0))[tp]
        finally:
            frozen_broker.resume()
        assert following.records and following.records[0].offset == pos
        seen = [r.offset for r in first.records + following.records]
        rest = await read_all(log, tp, seen[-1] + 1)
        assert seen + [r.offset for r in rest] == list(range(50))
        # Deleting the topic forgets what was read ahead: a new topic of that name starts afresh.
        await log.delete_topic(topic)
        await log.create_topic(topic, 1, 1, {})
        await log.append(tp, values(3, prefix="new"))
        again = (await log.fetch({tp: 0}, max_bytes=1 << 20, max_wait_ms=1000))[tp]
        assert [r.value for r in again.records] == [b"new0", b"new1", b"new2"]


async def test_read_ahead_is_not_used_for_another_position(kafka_log: KafkaLog, topic: str) -> None:
    await kafka_log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)
    await kafka_log.append(tp, values(10))
    await kafka_log.fetch({tp: 0}, max_bytes=3, max_wait_ms=0)  # keeps 1..9
    again = (await kafka_log.fetch({tp: 0}, max_bytes=1 << 20, max_wait_ms=0))[tp]
    assert [r.offset for r in again.records] == list(range(10))
    await kafka_log.append(tp, values(1, prefix="new"))
    later = (await kafka_log.fetch({tp: 5}, max_bytes=1 << 20, max_wait_ms=0))[tp]
    assert [r.offset for r in later.records] == [5, 6, 7, 8, 9, 10]


async def test_unknown_topic_and_partition_are_refused_before_anything_is_sent(
    kafka_log: KafkaLog, topic: str
) -> None:
    with pytest.raises(TopicNotFound):
        await kafka_log.append(TopicPartition(topic, 0), values(1))
    with pytest.raises(TopicNotFound):
        await kafka_log.fetch({TopicPartition(topic, 0): 0}, max_bytes=10, max_wait_ms=0)
    with pytest.raises(TopicNotFound):
        await kafka_log.offsets(TopicPartition(topic, 0))
    await kafka_log.create_topic(topic, 2, 1, {})
    for call in (
        kafka_log.append(TopicPartition(topic, 2), values(1)),
        kafka_log.fetch(
            {TopicPartition(topic, 0): 0, TopicPartition(topic, 7): 0}, max_bytes=10, max_wait_ms=0
        ),
        kafka_log.offsets(TopicPartition(topic, 2)),
        kafka_log.offset_for_timestamp(TopicPartition(topic, -1), 0),
    ):
        with pytest.raises(PartitionNotFound):
            await call
    assert await kafka_log.list_topics() == sorted(await kafka_log.list_topics())


async def test_records_kafka_cannot_carry_are_refused_and_nothing_is_stored(
    kafka_log: KafkaLog, topic: str
) -> None:
    await kafka_log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)
    bad = [
        [NewRecord(None, b"ok"), NewRecord(None, "text")],  # type: ignore[arg-type]
        [NewRecord(None, b"ok", (("\udcff", b"x"),))],
        [NewRecord(None, b"ok", (), -5)],
    ]
    for records in bad:
        with pytest.raises(InvalidPayload):
            await kafka_log.append(tp, records)
    assert (await kafka_log.fetch({tp: 0}, max_bytes=100, max_wait_ms=0))[tp].high_watermark == 0


async def test_a_producer_broken_for_good_is_replaced_and_appends_go_on(
    kafka_log: KafkaLog, topic: str
) -> None:
    from aiokafka import errors as ke

    await kafka_log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)
    assert list(await kafka_log.append(tp, values(1))) == [0]
    appender = kafka_log._appender  # white box: a fatal batch failure cannot be caused on purpose
    old = appender._producer
    appender._after_failure(old, ke.OutOfOrderSequenceNumber(), handed_over=True)
    await asyncio.gather(*appender._tasks)
    assert appender._producer is not old
    assert list(await kafka_log.append(tp, values(2))) == [1, 2]


async def test_a_position_below_the_log_start_answers_at_once_with_the_log_start(
    kafka_log: KafkaLog, kafka_broker: KafkaBroker, topic: str
) -> None:
    """Records deleted before an offset (DeleteRecords, what retention does): a fetch from below
    the new log start answers at once, empty, with the log start to move to."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.records_to_delete import RecordsToDelete
    from aiokafka.structs import TopicPartition as KafkaTP

    await kafka_log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)
    for i in range(5):
        await kafka_log.append(tp, [NewRecord(None, f"r{i}".encode())])
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    await admin.start()
    try:
        await admin.delete_records({KafkaTP(topic, 0): RecordsToDelete(3)})
    finally:
        await admin.close()
    loop = asyncio.get_running_loop()
    started = loop.time()
    got = (await kafka_log.fetch({tp: 0}, max_bytes=1000, max_wait_ms=5000))[tp]
    assert loop.time() - started < 4, "the poll waited out its timeout instead of answering"
    assert got.records == [] and got.log_start_offset == 3 and got.high_watermark == 5
    assert (await kafka_log.offsets(tp))[0] == 3
