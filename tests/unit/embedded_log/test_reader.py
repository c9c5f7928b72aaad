"""The synchronous cross-process reader."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.adapters.embedded.log import reader
from service.core.models import NewRecord, TopicPartition
from service.errors import InvalidTopic

from .conftest import Clock, OpenLog, read_all, segments_of, values

TP = TopicPartition("t", 0)


async def test_reads_what_was_appended_while_the_log_runs(open_log: OpenLog, data_dir: Path) -> None:
    log = await open_log(segment_bytes=1000, index_interval_bytes=100, flush="never", min_segment_bytes=1)
    await log.create_topic("t", 2, 1, {})
    for i in range(30):
        await log.append(TP, [NewRecord(f"k{i}".encode(), f"v{i}".encode(), (("n", str(i).encode()),), i)])
    assert len(segments_of(log, TP)) > 1
    pdir = reader.partition_dir(data_dir, "t", 0)
    got = list(reader.read_partition_range(pdir))
    assert got == await read_all(log, TP)
    assert [r.offset for r in reader.read_partition_range(pdir, 7, 19)] == list(range(7, 19))
    assert list(reader.read_partition_range(pdir, 30)) == []
    assert reader.partition_bounds(pdir) == (0, 30)
    assert reader.partition_bounds(reader.partition_dir(data_dir, "t", 1)) == (0, 0)
    assert reader.list_topics(data_dir) == ["t"]
    assert reader.partition_count(data_dir, "t") == 2


async def test_ignores_a_torn_tail(open_log: OpenLog, data_dir: Path) -> None:
    log = await open_log()
    await log.create_topic("t", 1, 1, {})
    await log.append(TP, values(5))
    await log.append(TP, values(5, start=5))
    await log.stop()
    path = data_dir / "topics/t/0" / f"{0:020d}.log"
    raw = path.read_bytes()
    pdir = reader.partition_dir(data_dir, "t", 0)
    for torn in (raw[:-7], raw + os.urandom(100), raw + raw[:30]):  # as a writer mid-append leaves it
        path.write_bytes(torn)
        got = [r.value for r in reader.read_partition_range(pdir)]
        assert got == [f"v{i}".encode() for i in range(5 if len(torn) < len(raw) else 10)]
        assert reader.partition_bounds(pdir)[1] == len(got)


async def test_falls_back_when_the_index_is_wrong(open_log: OpenLog, data_dir: Path) -> None:
    log = await open_log(index_interval_bytes=50)
    await log.create_topic("t", 1, 1, {})
    for i in range(20):
        await log.append(TP, values(1, start=i))
    await log.stop()
    index = data_dir / "topics/t/0" / f"{0:020d}.index"
    raw = bytearray(index.read_bytes())
    raw[-1] ^= 0x01  # the last entry now points into the middle of a batch
    index.write_bytes(bytes(raw) + b"\x00\x00")  # and a half-written entry
    pdir = reader.partition_dir(data_dir, "t", 0)
    assert [r.offset for r in reader.read_partition_range(pdir, 18)] == [18, 19]
    assert reader.partition_bounds(pdir) == (0, 20)


async def test_after_retention(open_log: OpenLog, data_dir: Path, clock: Clock) -> None:
    log = await open_log(clock=clock, retention_ms=1000, min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {"segment.bytes": "100"})
    for i in range(4):
        await log.append(TP, values(1, start=i, size=100))
    clock.advance_ms(2000)
    assert await log.apply_retention() == 3
    pdir = reader.partition_dir(data_dir, "t", 0)
    assert [r.offset for r in reader.read_partition_range(pdir)] == [3]
    assert reader.partition_bounds(pdir) == (3, 4)


def test_names_are_checked(data_dir: Path) -> None:
    with pytest.raises(InvalidTopic):
        reader.partition_dir(data_dir, "../etc", 0)
    with pytest.raises(FileNotFoundError):
        reader.partition_count(data_dir, "absent")
    assert reader.list_topics(data_dir) == []
    assert list(reader.read_partition_range(data_dir / "nowhere")) == []
