"""What a segment file holds after a restart: read from its indexes when they are sound, else rebuilt.

``Segment.open`` calls one of the two and applies the answer: ``from_indexes``
trusts sound index files and reads only the batches after the last offset-index
entry (so a healthy log opens fast); ``rebuild`` re-reads every batch and writes
both index files again, as appends (and, for a closed segment, ``seal``) would
have written them. Both stop at the first torn or corrupt batch: ``size`` is
where the valid data ends, and the caller decides what to do with the rest.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from service.core.rules import INT64_MIN

from .index import OffsetIndex, TimeIndex
from .scan import BatchScan, read_header_at

log = logging.getLogger(__name__)

NO_TIMESTAMP: Final = INT64_MIN


@dataclass(frozen=True, slots=True)
class Found:
    """A segment's state as its file holds it: indexes, valid size, next offset and timestamps."""

    index: OffsetIndex
    time_index: TimeIndex
    size: int
    next_offset: int
    max_timestamp: int
    last_rel: int  # relative offset of the last valid batch
    since_index: int  # bytes written since the last offset-index entry


def from_indexes(
    fd: int, base_offset: int, index_path: Path, time_path: Path, file_size: int
) -> Found | None:
    """The segment as its index files describe it, checked against the log; None if they must be rebuilt."""
    index = OffsetIndex.load(index_path, file_size)
    if index is None or not len(index):
        return None
    rel, pos = index.last
    header = read_header_at(fd, pos)
    if header is None or header.base_offset != base_offset + rel:
        return None
    scan = BatchScan(fd, pos, file_size, next_offset=base_offset + rel)
    tail_max = NO_TIMESTAMP
    last_rel = rel
    for view in scan:
        tail_max = max(tail_max, view.header.max_timestamp)
        last_rel = view.header.base_offset - base_offset
    if scan.valid_end == pos:
        return None  # the indexed batch itself is bad: the index cannot be trusted
    assert scan.next_offset is not None
    time_index = TimeIndex.load(time_path, scan.next_offset - base_offset)
    if time_index is None:
        return None
    return Found(
        index=index,
        time_index=time_index,
        size=scan.valid_end,
        next_offset=scan.next_offset,
        max_timestamp=max(tail_max, time_index.last_timestamp or NO_TIMESTAMP),
        last_rel=last_rel,
        since_index=scan.valid_end - pos,
    )


def rebuild(
    fd: int,
    log_path: Path,
    base_offset: int,
    index: OffsetIndex,
    time_index: TimeIndex,
    interval: int,
    file_size: int,
    *,
    sealed: bool,
) -> Found:
    """Re-read every batch and rewrite ``index`` and ``time_index`` from them.

    An offset-index entry every ``interval`` bytes and a time-index entry where
    the maximum timestamp grows, as appends write them; a ``sealed`` segment's
    time index also gets the final entry ``seal`` adds.
    """
    rels: list[int] = []
    positions: list[int] = []
    stamps: list[int] = []
    time_rels: list[int] = []
    since = 0
    last_rel = 0
    max_ts = NO_TIMESTAMP
    scan = BatchScan(fd, 0, file_size, next_offset=base_offset)
    for view in scan:
        rel = view.header.base_offset - base_offset
        max_ts = max(max_ts, view.header.max_timestamp)
        if not rels or since >= interval:
            rels.append(rel)
            positions.append(view.pos)
            if not stamps or max_ts > stamps[-1]:
                stamps.append(max_ts)
                time_rels.append(rel)
            since = 0
        since += view.header.size
        last_rel = rel
    if sealed and rels and max_ts > stamps[-1]:
        stamps.append(max_ts)
        time_rels.append(last_rel)
    if scan.error:
        log.warning("%s: %s", log_path, scan.error)
    log.info("%s: rebuilt indexes (%d entries)", log_path, len(rels))
    index.replace(rels, positions)
    time_index.replace(stamps, time_rels)
    assert scan.next_offset is not None
    return Found(
        index=index,
        time_index=time_index,
        size=scan.valid_end,
        next_offset=scan.next_offset,
        max_timestamp=max_ts,
        last_rel=last_rel,
        since_index=since,
    )
