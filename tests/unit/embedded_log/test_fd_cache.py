"""Descriptors as a budget: sealed segments open their files through one bounded cache.

Counted from ``/proc/self/fd``: what a user running ``ls -l /proc/<pid>/fd`` would see.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import ValidationError

from service.adapters.embedded.log import EmbeddedLog
from service.adapters.embedded.log.fds import fd_limit
from service.core.models import NewRecord, RecordColumns, TopicPartition
from service.errors import InvalidTopicConfig
from service.server.backends import build_log
from service.settings import Settings

from .conftest import Clock, OpenLog, read_all, segments_of, values

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")

TP = TopicPartition("t", 0)
SMALL = {"segment.bytes": "1000"}  # two ~470-byte batches per segment
MiB = 1024 * 1024


def log_fds(data_dir: Path) -> list[str]:
    """The segment log files under ``data_dir`` this process has open (deleted ones included)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed meanwhile (the listing's own descriptor, for one)
            continue
        if target.startswith(str(data_dir)) and ".log" in target:
            found.append(target)
    return found


async def fill(log: EmbeddedLog, tp: TopicPartition, batches: int) -> None:
    for i in range(batches):
        await log.append(tp, values(1, start=i, size=400))


def expected(batches: int) -> list[bytes]:
    return [f"v{i}".encode().ljust(400, b".") for i in range(batches)]


async def test_sealed_segments_hold_at_most_the_bound_of_descriptors(
    open_log: OpenLog, data_dir: Path
) -> None:
    log = await open_log(min_segment_bytes=1, sealed_fds=4)
    await log.create_topic("t", 1, 1, SMALL)
    await fill(log, TP, 60)
    assert len(segments_of(log, TP)) == 30
    assert len(log_fds(data_dir)) == 1  # writing alone opens nothing but the active segment
    assert [r.value for r in await read_all(log, TP)] == expected(60)
    assert len(log_fds(data_dir)) == 1 + 4  # and reading, at most the bound more
    await log.stop()
    assert log_fds(data_dir) == []


async def test_reads_across_many_sealed_segments_return_every_record_in_order(open_log: OpenLog) -> None:
    log = await open_log(min_segment_bytes=1, sealed_fds=2, index_interval_bytes=100)
    await log.create_topic("t", 3, 1, SMALL)
    tps = [TopicPartition("t", n) for n in range(3)]
    for tp in tps:
        await fill(log, tp, 40)
    for start in (0, 7, 20, 39):  # partitions read in turn: each read evicts another's segments
        for tp in tps:
            got = await read_all(log, tp, start)
            assert [r.offset for r in got] == list(range(start, 40))
            assert [r.value for r in got] == expected(40)[start:]
    for tp in tps:  # timestamp seeks read sealed segments too
        stamps = [r.timestamp for r in await read_all(log, tp)]
        for i in (0, 13, 25, 39):
            assert await log.offset_for_timestamp(tp, stamps[i]) == stamps.index(stamps[i])


async def test_a_pinned_segment_is_never_closed_under_its_reader(open_log: OpenLog, data_dir: Path) -> None:
    log = await open_log(min_segment_bytes=1, sealed_fds=1)
    await log.create_topic("t", 1, 1, SMALL)
    await log.create_topic("other", 1, 1, SMALL)
    await fill(log, TP, 10)
    await fill(log, TopicPartition("other", 0), 10)
    view = log._topics["t"].partitions[0].view()
    view.pin()  # what a fetch in flight holds
    first = RecordColumns.empty()
    view.read(0, first, budget=1, force_first=True)  # half way: the first segment is open
    assert [r.offset for r in first] == [0]
    reading = view.segments[0]._log_fd()
    ino = os.fstat(reading).st_ino
    assert [r.offset for r in await read_all(log, TopicPartition("other", 0))] == list(range(10))
    spare = [os.open(os.devnull, os.O_RDONLY) for _ in range(4)]  # would take a freed number
    try:
        assert os.fstat(reading).st_ino == ino  # still the reader's file
        rest = RecordColumns.empty()
        view.read(1, rest, budget=-1, force_first=True)
        assert [r.value for r in first + rest] == expected(10)
        assert len(log._fds) > 1  # over the bound while the reader pins its segments...
    finally:
        view.unpin()
        for fd in spare:
            os.close(fd)
    assert len(log._fds) == 1  # ...and back to it once it is done
    assert len(log_fds(data_dir)) == 2 + 1  # the two active segments and one cached


async def test_a_segment_sealed_under_a_reader_stays_open_until_it_unpins(
    open_log: OpenLog, data_dir: Path
) -> None:
    log = await open_log(min_segment_bytes=1, sealed_fds=0)
    await log.create_topic("t", 1, 1, SMALL)
    await fill(log, TP, 1)
    view = log._topics["t"].partitions[0].view()
    view.pin()
    await fill(log, TP, 3)  # seals the segment the view reads as the active one
    assert len(segments_of(log, TP)) == 2
    view.segments[0].flush()  # as a group commit that began before the roll does
    out = RecordColumns.empty()
    view.read(0, out, budget=-1, force_first=True)
    assert [r.offset for r in out] == [0]
    assert len(log_fds(data_dir)) == 2
    view.unpin()
    assert len(log_fds(data_dir)) == 1  # a bound of 0: nothing sealed stays open between reads
    assert [r.offset for r in await read_all(log, TP)] == [0, 1, 2, 3]
    assert len(log_fds(data_dir)) == 1


async def test_retention_and_topic_deletion_close_the_descriptors_they_free(
    open_log: OpenLog, data_dir: Path, clock: Clock
) -> None:
    log = await open_log(min_segment_bytes=1, sealed_fds=100, retention_ms=1000, clock=clock)
    await log.create_topic("t", 1, 1, SMALL)
    await log.create_topic("keep", 1, 1, {**SMALL, "retention.ms": "-1"})
    await fill(log, TP, 20)
    await fill(log, TopicPartition("keep", 0), 20)
    await read_all(log, TP)
    await read_all(log, TopicPartition("keep", 0))
    assert len(log_fds(data_dir)) == 2 + 2 * 9
    clock.advance_ms(5000)
    assert await log.apply_retention() == 9
    assert not [f for f in log_fds(data_dir) if "(deleted)" in f]
    assert len(log_fds(data_dir)) == 2 + 9
    await log.delete_topic("keep")
    assert len(log_fds(data_dir)) == 1
    assert len(log._fds) == 0


async def test_readers_in_threads_share_the_cache(open_log: OpenLog, data_dir: Path, clock: Clock) -> None:
    log = await open_log(min_segment_bytes=1, sealed_fds=3, retention_ms=1000, clock=clock)
    await log.create_topic("t", 4, 1, SMALL)
    tps = [TopicPartition("t", n) for n in range(4)]
    for tp in tps:
        await fill(log, tp, 30)
    views = [log._topics["t"].partitions[n].view() for n in range(4)]
    for v in views:
        v.pin()

    def read(job: int) -> list[bytes | None]:
        out = RecordColumns.empty()
        views[job % 4].read(job % 30, out, budget=-1, force_first=True)
        return [r.value for r in out]

    try:
        with ThreadPoolExecutor(8) as pool:
            jobs = [asyncio.wrap_future(pool.submit(read, job)) for job in range(200)]
            clock.advance_ms(5000)
            assert await log.apply_retention() == 4 * 14  # while they read: their pins keep the files
            results = await asyncio.gather(*jobs)
    finally:
        for v in views:
            v.unpin()
    for job, got in enumerate(results):
        assert got == expected(30)[job % 30 :], job
    assert len(log._fds) <= 3
    assert len(log_fds(data_dir)) == 4 + len(log._fds)
    assert not [f for f in log_fds(data_dir) if "(deleted)" in f]
    # And fetches, which read in the log's worker threads, all at once.
    fetched = await asyncio.gather(*(read_all(log, tp, 28) for tp in tps * 10))
    assert all([r.offset for r in got] == [28, 29] for got in fetched)
    assert len(log._fds) <= 3


async def test_the_cache_bound_is_kept_free_for_new_partitions(data_dir: Path) -> None:
    async with EmbeddedLog(data_dir, sealed_fds=fd_limit()) as log:
        with pytest.raises(InvalidTopicConfig, match="sealed segments"):
            await log.create_topic("t", 1, 1, {})


async def test_segment_bytes_below_the_minimum_is_refused(open_log: OpenLog, data_dir: Path) -> None:
    log = await open_log()
    with pytest.raises(InvalidTopicConfig, match=r"segment\.bytes: the minimum is 1048576") as refused:
        await log.create_topic("t", 1, 1, {"segment.bytes": str(MiB - 1)})
    assert refused.value.http_status == 422
    assert await log.list_topics() == []
    info = await log.create_topic("t", 1, 1, {"segment.bytes": str(MiB)})
    assert info.configs["segment.bytes"] == str(MiB)
    with pytest.raises(ValueError, match=r"segment\.bytes"):
        EmbeddedLog(data_dir, segment_bytes=MiB - 1)
    EmbeddedLog(data_dir, segment_bytes=1000, min_segment_bytes=1000)  # what tests do


async def test_a_topic_stored_with_smaller_segments_still_opens(open_log: OpenLog, data_dir: Path) -> None:
    log = await open_log(min_segment_bytes=1)
    await log.create_topic("t", 1, 1, {"segment.bytes": "100"})
    await log.append(TP, values(1, size=100))
    await log.stop()
    log = await open_log(data_dir)  # the minimum is 1 MiB again
    assert await log.list_topics() == ["t"]
    assert (await log.describe_topic("t")).configs["segment.bytes"] == str(MiB)
    await log.append(TP, values(1, size=100))
    assert len(segments_of(log, TP)) == 1  # it rolls at the minimum now
    assert [r.offset for r in await read_all(log, TP)] == [0, 1]


def test_the_gateway_settings_reach_the_log(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="segment_bytes"):
        Settings(segment_bytes=MiB - 1)
    log = build_log(Settings(data_dir=tmp_path, sealed_fds=7, segment_bytes=MiB))
    assert isinstance(log, EmbeddedLog) and log._fds.bound == 7


async def test_a_timestamp_seek_opens_only_the_segment_it_needs(open_log: OpenLog, data_dir: Path) -> None:
    log = await open_log(min_segment_bytes=1, sealed_fds=10)
    await log.create_topic("t", 1, 1, SMALL)
    for i in range(20):
        await log.append(TP, [NewRecord(None, bytes(400), timestamp=1000 + i)])
    assert await log.offset_for_timestamp(TP, 1015) == 15
    assert len(log_fds(data_dir)) == 1 + 1
