"""Synchronous, read-only access to an embedded data dir, for other processes.

A Spark job (or any tool) can read topics while the gateway appends to them:
no event loop, no lock taken, nothing written. Only complete batches whose
CRC matches are returned, so a batch being written (or torn by a crash) at
the end of a partition is simply not there yet. A segment removed by retention
while it is being read stays readable through the open descriptor; one removed
before it was opened is skipped (offsets then jump, as after retention).

With ``flush="always"`` the reader may see a complete batch a few
milliseconds before its fsync finishes, i.e. before the producer was
acknowledged; only a machine crash in that window could take it back.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from service.core.models import Record, RecordColumns
from service.core.rules import check_topic

from ..fileio import open_file
from .batch import decode_records, first_at_or_after
from .index import OFFSET_ENTRY, TIME_ENTRY
from .metadata import read_topic_meta
from .scan import BatchScan, read_header_at
from .segment import Segment, parse_segment_name

log = logging.getLogger(__name__)


def list_topics(data_dir: Path) -> list[str]:
    """Names of the topics in ``data_dir`` (those with a readable ``topic.json``)."""
    topics_dir = Path(data_dir) / "topics"
    if not topics_dir.is_dir():
        return []
    names = []
    for entry in sorted(topics_dir.iterdir()):
        try:
            if read_topic_meta(entry).name == entry.name:
                names.append(entry.name)
        except Exception:  # half-written or foreign directory: not a topic
            continue
    return names


def partition_count(data_dir: Path, topic: str) -> int:
    """Partitions of ``topic``; raises ``FileNotFoundError`` if there is no such topic."""
    return read_topic_meta(_topic_dir(data_dir, topic)).partitions


def partition_dir(data_dir: Path, topic: str, partition: int) -> Path:
    return _topic_dir(data_dir, topic) / str(int(partition))


def _topic_dir(data_dir: Path, topic: str) -> Path:
    return Path(data_dir) / "topics" / check_topic(topic)


def _segment_bases(directory: Path) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(b for b in map(parse_segment_name, names) if b is not None)


def partition_bounds(directory: Path) -> tuple[int, int]:
    """(first offset, offset after the last complete batch) of the partition in ``directory``."""
    bases = _segment_bases(directory)
    if not bases:
        return 0, 0
    for base in reversed(bases):  # the newest segment that still exists tells the end
        end = _segment_end(directory, base)
        if end is not None:
            break
    else:
        return 0, 0
    start = next((b for b in bases if Segment.paths(directory, b)[0].exists()), end)
    return start, end


def _segment_end(directory: Path, base: int) -> int | None:
    try:
        fd = open_file(Segment.paths(directory, base)[0], write=False)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        rel, pos = _start_position(fd, directory, base, 2**32, size)
        scan = BatchScan(fd, pos, size, next_offset=base + rel)
        for _ in scan:
            pass
        return scan.next_offset if scan.next_offset is not None else base
    finally:
        os.close(fd)


def _start_position(fd: int, directory: Path, base: int, rel: int, size: int) -> tuple[int, int]:
    """(relative offset, position) of a verified index entry at or before ``rel``, else (0, 0).

    The index may be mid-append or stale: only whole entries inside the log
    are considered, and the chosen one must point at a batch with the offset
    it claims.
    """
    try:
        raw = Segment.paths(directory, base)[1].read_bytes()
    except FileNotFoundError:
        return 0, 0
    whole = len(raw) - len(raw) % OFFSET_ENTRY.size
    entries = [(r, p) for r, p in OFFSET_ENTRY.iter_unpack(raw[:whole]) if p < size]
    rels = [r for r, _ in entries]
    if rels != sorted(rels):
        return 0, 0
    i = bisect_right(rels, rel) - 1
    if i < 0:
        return 0, 0
    found_rel, pos = entries[i]
    header = read_header_at(fd, pos)
    if header is None or header.base_offset != base + found_rel:
        return 0, 0
    return found_rel, pos


def read_partition_range(directory: Path, start: int = 0, end: int | None = None) -> Iterator[Record]:
    """Records with ``start <= offset < end`` (``end=None``: all there are), in offset order."""
    bases = _segment_bases(Path(directory))
    if not bases:
        return
    first = max(bisect_right(bases, start) - 1, 0)
    for i, base in enumerate(bases[first:], start=first):
        if end is not None and base >= end:
            return
        with _scan_from(directory, base, max(start - base, 0)) as scan:
            if scan is None:
                continue  # removed by retention meanwhile
            for view in scan:
                if view.header.next_offset <= start:
                    continue
                records = RecordColumns.empty()
                decode_records(view.buf, view.off, view.header, records, min_offset=start)
                for r in records:
                    if end is not None and r.offset >= end:
                        return
                    yield r
            if scan.error and i < len(bases) - 1:
                log.warning("%s/%020d.log: %s; continuing with the next segment", directory, base, scan.error)


@contextmanager
def _scan_from(directory: Path, base: int, rel: int) -> Iterator[BatchScan | None]:
    """A scan of segment ``base``'s batches from the indexed one at or before relative offset
    ``rel`` (its log file open for the block); None if retention removed the segment meanwhile."""
    try:
        fd = open_file(Segment.paths(directory, base)[0], write=False)
    except FileNotFoundError:
        yield None
        return
    try:
        size = os.fstat(fd).st_size
        found, pos = _start_position(fd, directory, base, rel, size)
        yield BatchScan(fd, pos, size, next_offset=base + found)
    finally:
        os.close(fd)


def find_timestamp(directory: Path, timestamp: int) -> int | None:
    """The first offset whose record is timestamped at or after ``timestamp``, else None: Kafka's
    ListOffsets by time, answered as the log's own ``Segment.find_timestamp`` answers it.

    Timestamps need not grow with offsets (producers give them). Each segment
    is searched from where its time index says a record at or after
    ``timestamp`` may first be, so only the batches from there are read.
    """
    for base in _segment_bases(Path(directory)):
        with _scan_from(directory, base, _time_start(directory, base, timestamp)) as scan:
            for view in scan or ():  # None: removed by retention meanwhile
                if view.header.max_timestamp < timestamp:
                    continue
                found = first_at_or_after(view.buf, view.off, view.header, timestamp)
                if found is not None:
                    return found
    return None


def _time_start(directory: Path, base: int, timestamp: int) -> int:
    """The relative offset of a batch from which a search for ``timestamp`` may start, else 0.

    An entry (T, r) of the time index says no record up to the batch at r is
    timestamped after T, so the search starts at the last entry with T below
    ``timestamp``. The index may be mid-append: only whole, ordered entries count.
    """
    try:
        raw = Segment.paths(directory, base)[2].read_bytes()
    except FileNotFoundError:
        return 0
    entries = list(TIME_ENTRY.iter_unpack(raw[: len(raw) - len(raw) % TIME_ENTRY.size]))
    stamps = [t for t, _ in entries]
    rels = [r for _, r in entries]
    if stamps != sorted(stamps) or rels != sorted(rels):
        return 0
    i = bisect_left(stamps, timestamp) - 1
    return rels[i] if i >= 0 else 0
