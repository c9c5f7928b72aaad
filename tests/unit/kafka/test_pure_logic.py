"""The Kafka log's pure parts, without a broker: byte budget, read-ahead, record sizes and decoding,
options."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from hypothesis import given
from hypothesis import strategies as st

from service.adapters.fetch_budget import take
from service.adapters.kafka.budget import ByteBudget
from service.adapters.kafka.errors import for_code, translate
from service.adapters.kafka.options import KafkaOptions, parse_bootstrap
from service.adapters.kafka.producer import record_size, record_sizes
from service.adapters.kafka.readahead import RECORD_OVERHEAD, Chunk, ReadAhead
from service.adapters.kafka.records import decode
from service.core.models import NewRecord, Record, RecordColumns, TopicPartition
from service.core.ports import Log
from service.errors import (
    BackendError,
    BackendUnavailable,
    InvalidTopicConfig,
    PartitionNotFound,
    PayloadTooLarge,
    TopicExists,
    TopicNotFound,
)

TP = TopicPartition("t", 0)


# --- ByteBudget --------------------------------------------------------------------------


async def test_budget_grants_in_order_and_times_out() -> None:
    budget = ByteBudget(100)
    assert await budget.acquire(60, 1) == 60
    waiter = asyncio.create_task(budget.acquire(50, 5))
    await asyncio.sleep(0)
    small = asyncio.create_task(budget.acquire(10, 5))  # fits, but must not overtake the first
    await asyncio.sleep(0.01)
    assert not waiter.done() and not small.done()
    budget.release(60)
    assert await waiter == 50 and await small == 10
    assert budget.in_use == 60
    with pytest.raises(TimeoutError):
        await budget.acquire(50, 0.05)
    assert budget.in_use == 60  # the timed-out request took nothing
    budget.release(60)
    assert budget.available == 100


async def test_budget_request_larger_than_capacity_takes_all_of_it_alone() -> None:
    budget = ByteBudget(100)
    assert await budget.acquire(10, 1) == 10
    big = asyncio.create_task(budget.acquire(1_000, 5))
    await asyncio.sleep(0.01)
    assert not big.done()
    budget.release(10)
    assert await big == 100 and budget.available == 0


async def test_budget_cancelled_waiter_does_not_block_the_next() -> None:
    budget = ByteBudget(10)
    await budget.acquire(10, 1)
    first = asyncio.create_task(budget.acquire(8, 5))
    second = asyncio.create_task(budget.acquire(2, 5))
    await asyncio.sleep(0.01)
    first.cancel()
    budget.release(2)
    assert await second == 2
    with pytest.raises(asyncio.CancelledError):
        await first


# --- ReadAhead -----------------------------------------------------------------------------


def recs(start: int, n: int, size: int = 10) -> list[Record]:
    return [Record(o, 0, None, b"x" * size) for o in range(start, start + n)]


def chunk(start: int, end: int, records: list[Record], high_watermark: int, log_start: int) -> Chunk:
    return Chunk(start, end, RecordColumns.of(records), high_watermark, log_start)


def test_read_ahead_serves_offsets_inside_the_kept_range() -> None:
    ra = ReadAhead(1 << 20)
    ra.put(TP, chunk(5, 12, recs(5, 3) + recs(10, 2), 12, 0))  # 8, 9 compacted away
    assert ra.get(TP, 4) is None and ra.get(TP, 12) is None
    got = ra.get(TP, 6)
    assert got is not None and [r.offset for r in got.records] == [6, 7, 10, 11]
    got = ra.get(TP, 8)
    assert got is not None and [r.offset for r in got.records] == [10, 11] and got.start == 8
    assert ra.get(TopicPartition("t", 1), 6) is None


def test_read_ahead_stays_within_its_bytes_least_recently_used_first() -> None:
    per = 100 + RECORD_OVERHEAD
    ra = ReadAhead(per * 10)
    ra.put(TopicPartition("a", 0), chunk(0, 5, recs(0, 5, 100), 5, 0))
    ra.put(TopicPartition("b", 0), chunk(0, 5, recs(0, 5, 100), 5, 0))
    assert ra.bytes == per * 10
    assert ra.get(TopicPartition("a", 0), 0) is not None  # a is now the most recent
    ra.put(TopicPartition("c", 0), chunk(0, 2, recs(0, 2, 100), 2, 0))
    assert ra.get(TopicPartition("b", 0), 0) is None and ra.get(TopicPartition("a", 0), 0) is not None
    assert ra.bytes <= per * 10
    ra.put(TopicPartition("d", 0), chunk(0, 50, recs(0, 50, 100), 50, 0))  # alone too big: its head is kept
    head = ra.get(TopicPartition("d", 0), 0)
    assert head is not None and len(head.records) == 10 and ra.bytes <= per * 10
    assert ra.get(TopicPartition("d", 0), 10) is None
    ra.drop_topic("d")
    assert ra.bytes == 0 and len(ra) == 0


def test_read_ahead_forgets_old_chunks_and_can_be_off() -> None:
    now = [0.0]
    ra = ReadAhead(1 << 20, max_age=30, clock=lambda: now[0])
    ra.put(TP, chunk(0, 3, recs(0, 3), 3, 0))
    now[0] = 31
    assert ra.get(TP, 0) is None and ra.bytes == 0
    off = ReadAhead(0)
    off.put(TP, chunk(0, 3, recs(0, 3), 3, 0))
    assert off.get(TP, 0) is None


# --- record decoding ---------------------------------------------------------------------


def batch(base: int, items: list[tuple[bytes | None, bytes | None]]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for i, (key, value) in enumerate(items):
        builder.append(i, 1000 + i, key, value, [("h", b"1"), ("n", None)])
    raw = bytearray(builder.build())
    raw[0:8] = base.to_bytes(8, "big")  # the broker sets the base offset; the CRC does not cover it
    return bytes(raw)


def test_decode_skips_records_before_the_offset_and_reports_the_next() -> None:
    data = batch(0, [(None, b"a"), (b"k", b"b"), (None, None)]) + batch(3, [(None, b"d")])
    decoded = decode(data, 1)
    assert [(r.offset, r.key, r.value) for r in decoded.records] == [
        (1, b"k", b"b"),
        (2, None, None),
        (3, None, b"d"),
    ]
    assert decoded.records[0].headers == (("h", b"1"), ("n", None)) and decoded.records[0].timestamp == 1001
    assert decoded.next_offset == 4 and decoded.records.sizes == [r.size for r in decoded.records]
    truncated = decode(data[:-5], 0)  # the broker cut the last batch at its size limit
    assert [r.offset for r in truncated.records] == [0, 1, 2] and truncated.next_offset == 3
    assert decode(b"", 7).next_offset == 7


def test_decoded_records_are_columns_that_read_as_records() -> None:
    """A fetch is kept as columns (no ``Record`` per record), and reads, slices and adds up as the
    list of ``Record``s it stands for; each size measured as ``Record.size`` whatever the record."""
    data = batch(0, [(None, b"a"), (b"k", b"bb"), (None, None)]) + plain_batch(
        3, [b"ccc", b"dddd", None, b""]
    )
    records = decode(data, 0).records
    assert isinstance(records, RecordColumns)
    expected = [
        Record(0, 1000, None, b"a", (("h", b"1"), ("n", None))),
        Record(1, 1001, b"k", b"bb", (("h", b"1"), ("n", None))),
        Record(2, 1002, None, None, (("h", b"1"), ("n", None))),
        Record(3, 7, None, b"ccc"),
        Record(4, 7, None, b"dddd"),
        Record(5, 7, None, None),
        Record(6, 7, None, b""),
    ]
    assert records == expected and list(records) == expected and len(records) == 7
    assert records[1] == expected[1] and records[-1] == expected[-1] and isinstance(records[0], Record)
    assert records[2:5] == expected[2:5] and isinstance(records[2:5], RecordColumns)
    assert records.sizes == [r.size for r in expected]
    keyless = decode(plain_batch(3, [b"ccc", b"dddd", b"e"]), 0).records  # sizes in one pass of len
    assert keyless.sizes == [3, 4, 1] and keyless[:1] + keyless[1:] == keyless
    assert RecordColumns.empty() + keyless == keyless and not RecordColumns.empty()


def plain_batch(base: int, values: list[bytes | None]) -> bytes:
    """A batch of keyless records without headers, the most common of all."""
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, 7, None, value, [])
    raw = bytearray(builder.build())
    raw[0:8] = base.to_bytes(8, "big")
    return bytes(raw)


@pytest.mark.parametrize("magic", [0, 1])
def test_decode_reads_the_old_formats(magic: int) -> None:
    """Batches of the formats before 0.11 (no headers; v0 without timestamps) decode too."""
    builder = LegacyRecordBatchBuilder(magic, 0, 1 << 20)
    for i, (key, value) in enumerate([(None, b"a"), (b"k", b"bb"), (None, None)]):
        builder.append(i, 1000 + i, key, value)
    decoded = decode(bytes(builder.build()), 1)
    stamp = [1001, 1002] if magic else [-1, -1]
    assert list(decoded.records) == [Record(1, stamp[0], b"k", b"bb"), Record(2, stamp[1], None, None)]
    assert decoded.records.sizes == [3, 0] and decoded.next_offset == 3


def test_decode_refuses_a_corrupt_batch() -> None:
    data = bytearray(batch(0, [(None, b"payload")]))
    data[-3] ^= 0xFF
    from aiokafka.errors import CorruptRecordException

    with pytest.raises(CorruptRecordException):
        decode(bytes(data), 0)


def test_take_respects_the_budget_but_always_one_first() -> None:
    rs = [r.size for r in recs(0, 5, 10)]
    assert take(rs, 25, force_first=True) == 2
    assert take(rs, 5, force_first=True) == 1
    assert take(rs, 5, force_first=False) == 0
    assert take(rs, 1000, force_first=False) == 5


# --- options and errors ------------------------------------------------------------------


_payload = st.none() | st.binary(max_size=70_000)


@given(
    st.lists(
        st.builds(
            NewRecord,
            _payload,
            _payload,
            st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=50)), max_size=3),
            st.none() | st.integers(0, 2**63 - 1),
        ),
        max_size=5,
    )
)
def test_record_sizes_never_below_aiokafkas_estimate(records: list[NewRecord]) -> None:
    """Batches are cut and the byte budget charged by these sizes: an underestimate would overflow."""
    for record, size in zip(records, record_sizes(records), strict=True):
        estimate = DefaultRecordBatchBuilder.estimate_size_in_bytes(record.key, record.value, record.headers)
        assert estimate <= size <= estimate + 8
        assert size == record_size(record, 0) or (not record.headers and record.timestamp is None)


def test_bootstrap_urls() -> None:
    assert parse_bootstrap("kafka://a:9092,b:9093") == ["a:9092", "b:9093"]
    assert parse_bootstrap("kafka://[::1]:9092/") == ["[::1]:9092"]
    for bad in ("kafka://", "kafka://host", "kafka://h:0", "kafka://h:99999", "kafka://u@h:1", "kafka://h:x"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


def test_options_validate() -> None:
    assert KafkaOptions().compression == "none"
    assert KafkaOptions(compression="gzip").aiokafka_compression == "gzip"
    with pytest.raises(ValueError):
        KafkaOptions(compression="brotli")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        KafkaOptions(request_timeout_ms=0)


def test_error_translation() -> None:
    from aiokafka import errors as ke

    assert isinstance(translate(ke.UnknownTopicOrPartitionError(), "x", topic="t"), TopicNotFound)
    assert isinstance(
        translate(ke.UnknownTopicOrPartitionError(), "x", topic="t", partition=3), PartitionNotFound
    )
    assert isinstance(translate(ke.MessageSizeTooLargeError(), "x"), PayloadTooLarge)
    assert isinstance(translate(ke.NodeNotReadyError(), "x"), BackendUnavailable)
    assert isinstance(translate(ke.KafkaTimeoutError(), "x"), BackendUnavailable)
    assert isinstance(translate(ke.NotLeaderForPartitionError(), "x"), BackendUnavailable)
    assert isinstance(translate(TimeoutError(), "x"), BackendUnavailable)
    assert translate(ke.NodeNotReadyError(), "x").retry_after
    assert isinstance(translate(ke.InvalidReplicationFactorError(), "x"), InvalidTopicConfig)
    assert isinstance(translate(ke.IllegalStateError("boom"), "x"), BackendError)
    assert isinstance(for_code(36, "creating", topic="t"), TopicExists)
    assert for_code(0, "x") is None
    odd = for_code(999, "x", message="new error")
    assert isinstance(odd, BackendError) and "999" in odd.message


def test_factory_builds_the_kafka_log_from_settings() -> None:
    from service.adapters.kafka import KafkaLog
    from service.server.backends import BackendNotAvailable, build_log
    from service.settings import Settings

    log = build_log(
        Settings(log="kafka://k1:9092,k2:9093", kafka_request_timeout_ms=1234, kafka_compression="gzip")
    )
    assert isinstance(log, KafkaLog) and isinstance(log, Log)
    assert log.servers == "k1:9092,k2:9093"
    assert log.options.request_timeout_ms == 1234 and log.options.compression == "gzip"
    with pytest.raises(BackendNotAvailable, match="host:port"):
        build_log(Settings(log="kafka://nohost"))


def test_settings_refuse_a_codec_without_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from aiokafka import codec
    from pydantic import ValidationError

    from service.settings import Settings

    monkeypatch.setattr(codec, "has_zstd", lambda: False)  # as on a machine without the package
    with pytest.raises(ValidationError, match="zstd"):
        Settings(kafka_compression="zstd")
    assert Settings(kafka_compression="gzip").kafka_compression == "gzip"
