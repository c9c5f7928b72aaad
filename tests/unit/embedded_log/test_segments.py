"""Segment rolling (by size and by time) and retention (by time and by size)."""

from __future__ import annotations

from pathlib import Path

from service.core.models import NewRecord, RecordColumns, TopicPartition

from .conftest import Clock, OpenLog, read_all, segments_of, values

TP = TopicPartition("t", 0)


def log_files(data_dir: Path, topic: str = "t", partition: int = 0) -> list[str]:
    return sorted(p.name for p in (data_dir / "topics" / topic / str(partition)).glob("*.log"))


async def test_roll_by_size(open_log: OpenLog, data_dir: Path) -> None:
    log = await open_log(min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {"segment.bytes": "1000"})
    for i in range(10):
        await log.append(TP, values(1, start=i, size=300))  # ~370 bytes per batch: two per segment
    assert [s.base_offset for s in segments_of(log, TP)] == [0, 2, 4, 6, 8]
    assert log_files(data_dir) == [f"{b:020d}.log" for b in (0, 2, 4, 6, 8)]
    assert all(s.size <= 1000 for s in segments_of(log, TP))
    assert [r.offset for r in await read_all(log, TP)] == list(range(10))


async def test_a_batch_bigger_than_a_segment_gets_its_own(open_log: OpenLog) -> None:
    log = await open_log(min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {"segment.bytes": "1000"})
    await log.append(TP, values(1))
    await log.append(TP, values(1, size=5000))
    await log.append(TP, values(1))
    assert [s.base_offset for s in segments_of(log, TP)] == [0, 1, 2]
    assert len(await read_all(log, TP)) == 3


async def test_roll_by_time(open_log: OpenLog, clock: Clock) -> None:
    log = await open_log(clock=clock, segment_ms=60_000)
    await log.create_topic("t", 1, 1, {})
    await log.append(TP, values(1))
    clock.advance_ms(59_999)
    await log.append(TP, values(1))
    assert len(segments_of(log, TP)) == 1
    clock.advance_ms(1)
    await log.append(TP, values(1))  # the active segment is now 60 s old: rolled first
    assert [s.base_offset for s in segments_of(log, TP)] == [0, 2]
    clock.advance_ms(10 * 60_000)  # an empty or young segment never rolls by time alone
    await log.create_topic("u", 1, 1, {"segment.ms": "1000"})
    u = TopicPartition("u", 0)
    await log.append(u, values(1))
    await log.append(u, values(1))
    assert len(segments_of(log, u)) == 1


async def test_roll_by_time_survives_restart(open_log: OpenLog, clock: Clock, data_dir: Path) -> None:
    log = await open_log(clock=clock, segment_ms=60_000)
    await log.create_topic("t", 1, 1, {})
    await log.append(TP, values(1))
    await log.stop()
    clock.advance_ms(60_000)
    log = await open_log(data_dir, clock=clock, segment_ms=60_000)
    await log.append(TP, values(1))
    assert [s.base_offset for s in segments_of(log, TP)] == [0, 1]


async def test_retention_by_time(open_log: OpenLog, clock: Clock, data_dir: Path) -> None:
    log = await open_log(clock=clock, retention_ms=10_000, min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {"segment.bytes": "500"})
    for _ in range(3):  # segments at t=0s, 5s, 10s; each one batch of 2 records of ~200 bytes
        await log.append(TP, values(2, size=200))
        clock.advance_ms(5_000)
    await log.append(TP, values(1))  # the active segment, at t=15 s
    assert [s.base_offset for s in segments_of(log, TP)] == [0, 2, 4, 6]
    assert await log.apply_retention() == 1  # only the one whose newest record is over 10 s old
    assert await log.offsets(TP) == (2, 7)
    clock.advance_ms(3_600_000)
    assert await log.apply_retention() == 2  # everything closed goes, never the active segment
    assert await log.offsets(TP) == (6, 7)
    assert log_files(data_dir) == [f"{6:020d}.log"]
    assert sorted(p.suffix for p in (data_dir / "topics/t/0").iterdir()) <= [".index", ".log", ".timeindex"]
    data = (await log.fetch({TP: 0}, max_bytes=1000, max_wait_ms=5_000))[TP]  # below the start
    assert data.records == [] and data.log_start_offset == 6  # returned at once, for a reset
    assert [r.offset for r in await read_all(log, TP)] == [6]
    assert await log.apply_retention() == 0


async def test_retention_by_time_uses_the_newest_record(open_log: OpenLog, clock: Clock) -> None:
    log = await open_log(clock=clock, retention_ms=10_000, min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {"segment.bytes": "100"})
    await log.append(TP, [NewRecord(None, b"old", timestamp=0), NewRecord(None, b"new", timestamp=clock.ms)])
    await log.append(TP, values(1))
    clock.advance_ms(9_000)
    assert await log.apply_retention() == 0


async def test_retention_unlimited(open_log: OpenLog, clock: Clock) -> None:
    log = await open_log(clock=clock, retention_ms=-1, min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {"segment.bytes": "100"})
    for _ in range(3):
        await log.append(TP, values(1, size=100))
    clock.advance_ms(10**12)
    assert await log.apply_retention() == 0


async def test_retention_by_size(open_log: OpenLog) -> None:
    log = await open_log(min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {"segment.bytes": "1000", "retention.bytes": "2500"})
    for i in range(12):
        await log.append(TP, values(1, start=i, size=400))  # ~470 bytes: 2 batches per segment
    assert [s.size for s in segments_of(log, TP)] == [940] * 6
    # Kafka's rule: drop the oldest segments while what remains is still >= retention.bytes.
    assert await log.apply_retention() == 3
    assert sum(s.size for s in segments_of(log, TP)) == 2820
    assert await log.offsets(TP) == (6, 12)
    assert (await read_all(log, TP))[0].value == b"v6".ljust(400, b".")
    assert await log.apply_retention() == 0


async def test_retention_is_per_topic(open_log: OpenLog, clock: Clock) -> None:
    log = await open_log(clock=clock, retention_ms=-1, min_segment_bytes=1)
    await log.create_topic("keep", 1, 1, {"segment.bytes": "100"})
    await log.create_topic("drop", 1, 1, {"segment.bytes": "100", "retention.ms": "1000"})
    for topic in ("keep", "drop"):
        for _ in range(3):
            await log.append(TopicPartition(topic, 0), values(1, size=100))
    clock.advance_ms(2000)
    assert await log.apply_retention() == 2
    assert await log.offsets(TopicPartition("keep", 0)) == (0, 3)
    assert await log.offsets(TopicPartition("drop", 0)) == (2, 3)


async def test_retention_survives_restart(open_log: OpenLog, clock: Clock, data_dir: Path) -> None:
    log = await open_log(clock=clock, retention_ms=1000, min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {"segment.bytes": "100"})
    for _ in range(3):
        await log.append(TP, values(1, size=100))
    clock.advance_ms(5000)
    assert await log.apply_retention() == 2
    await log.stop()
    log = await open_log(data_dir, clock=clock, min_segment_bytes=1)
    assert await log.offsets(TP) == (2, 3)
    assert await log.append(TP, values(1)) == range(3, 4)


async def test_a_reader_keeps_a_segment_that_retention_removes(open_log: OpenLog, clock: Clock) -> None:
    log = await open_log(clock=clock, retention_ms=1000, min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {"segment.bytes": "100"})
    for i in range(3):
        await log.append(TP, values(1, start=i, size=100))
    partition = log._topics["t"].partitions[0]
    view = partition.view()
    view.pin()  # what a fetch in flight holds
    clock.advance_ms(5000)
    assert await log.apply_retention() == 2
    out = RecordColumns.empty()
    view.read(0, out, budget=-1, force_first=True)  # the descriptors are still open
    view.unpin()
    assert [r.value for r in out][:2] == [b"v0".ljust(100, b"."), b"v1".ljust(100, b".")]
