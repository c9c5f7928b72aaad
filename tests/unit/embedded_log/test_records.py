"""Appending and fetching: offsets, concurrency, group commit, long-poll, max_bytes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from service.adapters.embedded.log.segment import Segment
from service.core.models import NewRecord, TopicPartition
from service.errors import InvalidPayload, PayloadTooLarge, TopicNotFound

from .conftest import Clock, OpenLog, read_all, segments_of, values

TP = TopicPartition("t", 0)


async def test_append_then_fetch(open_log: OpenLog, clock: Clock) -> None:
    log = await open_log(clock=clock)
    await log.create_topic("t", 1, 1, {})
    assert await log.offsets(TP) == (0, 0)
    assert await log.append(TP, values(3)) == range(0, 3)
    assert await log.append(TP, [NewRecord(b"k", None, (("h", b"1"),), 123)]) == range(3, 4)
    assert await log.append(TP, []) == range(4, 4)  # nothing to store: an empty range at the end
    assert await log.offsets(TP) == (0, 4)
    records = await read_all(log, TP)
    assert [r.offset for r in records] == [0, 1, 2, 3]
    assert [r.value for r in records] == [b"v0", b"v1", b"v2", None]
    assert records[0].timestamp == clock.ms  # "now" from the injected clock
    assert (records[3].key, records[3].headers, records[3].timestamp) == (b"k", (("h", b"1"),), 123)


async def test_fetch_from_inside_a_batch_skips_earlier_records(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 1, 1, {})
    await log.append(TP, values(10))
    data = (await log.fetch({TP: 7}, max_bytes=1000, max_wait_ms=0))[TP]
    assert [r.offset for r in data.records] == [7, 8, 9]
    assert (data.high_watermark, data.log_start_offset) == (10, 0)


async def test_fetch_of_at_most_max_records_shares_them_across_partitions_and_segments(
    open_log: OpenLog,
) -> None:
    log = await open_log(min_segment_bytes=1)
    await log.create_topic("t", 2, 1, {"segment.bytes": "300"})
    other = TopicPartition("t", 1)
    for _ in range(5):  # batches of 10 in several segments
        await log.append(TP, values(10))
    await log.append(other, values(10))
    assert len(segments_of(log, TP)) > 1
    data = await log.fetch({TP: 3, other: 0}, max_bytes=1_000_000, max_wait_ms=0, max_records=42)
    assert [r.offset for r in data[TP].records] == list(range(3, 45)) and data[other].records == []
    data = await log.fetch({TP: 45, other: 0}, max_bytes=1_000_000, max_wait_ms=0, max_records=8)
    assert [r.offset for r in data[TP].records] == list(range(45, 50))
    assert [r.offset for r in data[other].records] == [0, 1, 2]
    # enough records answer a long-poll at once, whatever min_bytes asks
    data = await log.fetch({TP: 0}, max_bytes=1_000_000, max_wait_ms=30_000, min_bytes=1 << 20, max_records=4)
    assert [r.offset for r in data[TP].records] == [0, 1, 2, 3]


async def test_fetch_past_the_end_is_empty(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 1, 1, {})
    await log.append(TP, values(2))
    for pos in (2, 50):
        data = (await log.fetch({TP: pos}, max_bytes=1000, max_wait_ms=0))[TP]
        assert data.records == [] and data.high_watermark == 2


@pytest.mark.parametrize("flush", ["always", "interval", "never"])
async def test_concurrent_appenders_get_dense_ordered_offsets(open_log: OpenLog, flush: str) -> None:
    log = await open_log(flush=flush, segment_bytes=20_000, flush_interval_ms=5, min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {})

    async def writer(w: int) -> list[tuple[int, int]]:
        got = []
        for i in range(10):
            n = 1 + (w + i) % 5
            offsets = await log.append(TP, [NewRecord(None, f"{w}:{i}:{j}".encode()) for j in range(n)])
            assert offsets == range(offsets[0], offsets[0] + n)
            got.append((offsets[0], n))
        return got

    results = await asyncio.gather(*(writer(w) for w in range(20)))
    spans = sorted(span for r in results for span in r)
    offset = 0
    for base, n in spans:  # every batch got its own range, back to back, no holes
        assert base == offset
        offset += n
    assert await log.offsets(TP) == (0, offset)
    records = await read_all(log, TP)
    assert [r.offset for r in records] == list(range(offset))
    # Each writer's batches come in the order it sent them, each batch contiguous.
    by_base = {base: (w, i) for w, r in enumerate(results) for i, (base, _) in enumerate(r)}
    for base, n in spans:
        w, i = by_base[base]
        assert [r.value for r in records[base : base + n]] == [f"{w}:{i}:{j}".encode() for j in range(n)]
    assert len(segments_of(log, TP)) > 1  # rolls happened under load


async def test_group_commit_shares_fsyncs(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    log = await open_log(flush="always")
    await log.create_topic("t", 1, 1, {})
    fsyncs = 0
    real_flush = Segment.flush

    def counting_flush(self: Segment) -> None:
        nonlocal fsyncs
        fsyncs += 1
        real_flush(self)

    monkeypatch.setattr(Segment, "flush", counting_flush)
    await asyncio.gather(*(log.append(TP, values(1)) for _ in range(50)))
    assert (await log.offsets(TP))[1] == 50
    assert 1 <= fsyncs < 50  # writers waiting together were served by one fsync


async def test_always_publishes_only_after_fsync(open_log: OpenLog) -> None:
    log = await open_log(flush="always")
    await log.create_topic("t", 1, 1, {})
    task = asyncio.ensure_future(log.append(TP, values(1)))
    await asyncio.sleep(0)  # the append ran up to its fsync wait: written, not yet durable
    assert not task.done()
    assert await log.offsets(TP) == (0, 0)
    assert (await log.fetch({TP: 0}, max_bytes=100, max_wait_ms=0))[TP].records == []
    assert await task == range(0, 1)
    assert await log.offsets(TP) == (0, 1)


async def test_long_poll_wakes_on_append(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 2, 1, {})
    other = TopicPartition("t", 1)
    poll = asyncio.ensure_future(log.fetch({TP: 0, other: 0}, max_bytes=1000, max_wait_ms=30_000))
    await asyncio.sleep(0.05)
    assert not poll.done()
    await log.append(other, values(2))
    data = await asyncio.wait_for(poll, 10)  # far below the 30 s the poll would otherwise wait
    assert [r.value for r in data[other].records] == [b"v0", b"v1"]
    assert data[TP].records == []


async def test_long_poll_times_out_empty(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 1, 1, {})
    await log.append(TP, values(1))
    data = await log.fetch({TP: 1}, max_bytes=1000, max_wait_ms=50)
    assert data[TP].records == [] and data[TP].high_watermark == 1


async def test_long_poll_waits_for_min_bytes(open_log: OpenLog) -> None:
    log = await open_log(flush="never")
    await log.create_topic("t", 1, 1, {})
    poll = asyncio.ensure_future(log.fetch({TP: 0}, max_bytes=10_000, max_wait_ms=30_000, min_bytes=100))
    await log.append(TP, values(1, size=10))
    await asyncio.sleep(0.05)
    assert not poll.done()  # 10 bytes are not enough
    await log.append(TP, values(1, size=200))
    data = await asyncio.wait_for(poll, 10)
    assert len(data[TP].records) == 2


async def test_stop_releases_a_waiting_poll(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 1, 1, {})
    poll = asyncio.ensure_future(log.fetch({TP: 0}, max_bytes=1000, max_wait_ms=30_000))
    await asyncio.sleep(0.02)
    await log.stop()
    data = await asyncio.wait_for(poll, 10)
    assert data[TP].records == []


async def test_max_bytes_bounds_the_whole_fetch(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 2, 1, {})
    a, b = TP, TopicPartition("t", 1)
    await log.append(a, values(10, size=100))
    await log.append(b, values(10, size=100))
    data = await log.fetch({a: 0, b: 0}, max_bytes=350, max_wait_ms=0)
    assert len(data[a].records) == 3 and data[b].records == []
    data = await log.fetch({a: 8, b: 0}, max_bytes=350, max_wait_ms=0)
    assert [r.offset for r in data[a].records] == [8, 9]
    assert [r.offset for r in data[b].records] == [0]
    assert data[b].high_watermark == 10


async def test_a_record_bigger_than_max_bytes_still_comes_alone(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 2, 1, {})
    big = TopicPartition("t", 1)
    await log.append(big, [NewRecord(None, bytes(5000)), NewRecord(None, b"small")])
    await log.append(TP, values(1))
    data = await log.fetch({TP: 1, big: 0}, max_bytes=100, max_wait_ms=0)  # TP has nothing at 1
    assert [len(r.value or b"") for r in data[big].records] == [5000]
    data = await log.fetch({big: 1, TP: 0}, max_bytes=100, max_wait_ms=0)
    assert [r.value for r in data[big].records] == [b"small"]
    assert [r.value for r in data[TP].records] == [b"v0"]


async def test_many_null_records_are_bounded_by_max_bytes(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 1, 1, {})
    await log.append(TP, [NewRecord(None, None)] * 1000)
    data = await log.fetch({TP: 0}, max_bytes=100, max_wait_ms=0)
    assert len(data[TP].records) == 100


async def test_max_message_bytes_is_per_record(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 1, 1, {"max.message.bytes": "1024"})
    await log.append(TP, values(100, size=900))  # the batch is far bigger than the limit: fine
    with pytest.raises(PayloadTooLarge, match=r"max\.message\.bytes"):
        await log.append(TP, [NewRecord(None, bytes(1001))])
    assert (await log.offsets(TP))[1] == 100


async def test_bad_records_are_rejected_before_anything_is_written(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 1, 1, {})
    with pytest.raises(InvalidPayload):
        await log.append(TP, [NewRecord(None, b"ok"), NewRecord(None, b"x", timestamp=2**64)])
    with pytest.raises(InvalidPayload):
        await log.append(TP, [NewRecord(None, "not bytes")])  # type: ignore[arg-type]
    assert await log.offsets(TP) == (0, 0)


async def test_large_batches_and_many_partitions(open_log: OpenLog) -> None:
    log = await open_log(flush="interval", flush_interval_ms=10)
    await log.create_topic("t", 4, 1, {})
    big = [NewRecord(f"k{i}".encode(), bytes(1024)) for i in range(1000)]  # written from a thread
    for p in range(4):
        assert await log.append(TopicPartition("t", p), big) == range(0, 1000)
        assert await log.append(TopicPartition("t", p), big) == range(1000, 2000)
    await asyncio.sleep(0.05)  # let the interval flusher run
    data = await log.fetch({TopicPartition("t", p): 1500 for p in range(4)}, max_bytes=10**9, max_wait_ms=0)
    assert all(len(d.records) == 500 and d.records[0].key == b"k500" for d in data.values())


async def test_offset_for_timestamp(open_log: OpenLog) -> None:
    log = await open_log(index_interval_bytes=64, segment_bytes=600, min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {})
    # Timestamps rise but not strictly per batch, and one batch goes back in time.
    stamps = [100, 100, 150, 120, 200, 300, 250, 400, 400, 500, 90, 600]
    for ts in stamps:
        await log.append(TP, [NewRecord(None, bytes(40), timestamp=ts)])
    assert len(segments_of(log, TP)) > 2
    for target in (0, 90, 100, 101, 120, 121, 150, 151, 200, 260, 300, 301, 400, 401, 500, 501, 600):
        expected = next((i for i, ts in enumerate(stamps) if ts >= target), None)
        assert await log.offset_for_timestamp(TP, target) == expected, target
    assert await log.offset_for_timestamp(TP, 601) is None


async def test_fetch_of_nothing(open_log: OpenLog) -> None:
    log = await open_log()
    assert await log.fetch({}, max_bytes=100, max_wait_ms=10_000) == {}


async def test_deleting_a_topic_ends_a_long_poll_on_it(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 1, 1, {})
    poll = asyncio.ensure_future(log.fetch({TP: 0}, max_bytes=1000, max_wait_ms=30_000))
    await asyncio.sleep(0.02)
    await log.delete_topic("t")
    with pytest.raises(TopicNotFound):
        await asyncio.wait_for(poll, 10)


async def test_interval_flusher_makes_partitions_clean(open_log: OpenLog) -> None:
    log = await open_log(flush="interval", flush_interval_ms=10)
    await log.create_topic("t", 1, 1, {})
    await log.append(TP, values(3))
    assert (await log.offsets(TP))[1] == 3  # visible at once, durable soon
    partition = log._topics["t"].partitions[0]
    for _ in range(500):
        if not partition.dirty:
            break
        await asyncio.sleep(0.01)
    assert not partition.dirty


@pytest.mark.parametrize("flush", ["always", "interval", "never"])
async def test_stop_makes_every_mode_durable(open_log: OpenLog, data_dir: Path, flush: str) -> None:
    log = await open_log(flush=flush, flush_interval_ms=60_000)
    await log.create_topic("t", 1, 1, {})
    await log.append(TP, values(5))
    await log.stop()
    assert (data_dir / "topics.clean").exists()
    log = await open_log(data_dir)
    assert [r.value for r in await read_all(log, TP)] == [f"v{i}".encode() for i in range(5)]
