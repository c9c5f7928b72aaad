"""Offset arithmetic of the streaming source.

Its checkpointed offsets, each micro-batch's end, and the records found lost.

Pure functions and value types, no I/O. The stream reader (``stream_source``)
feeds them the offsets Spark checkpointed, each partition's bounds and the
read limit, and gets back the end of the next micro-batch and the ranges its
tasks read; ``offsets.split_ranges`` cuts those into tasks as the batch source
does.

A stream's offset is the next offset to read of every partition it knows,
as the JSON Spark's Kafka source checkpoints (``{"orders": {"0": 42}}``).
Spark compares offsets as text, so the same offsets always give the same
JSON (``offset_doc``). A partition the offsets do not hold yet (a new topic of
a pattern, a partition added to a topic) is read from offset 0, as Spark's
Kafka source reads one from its earliest offset; if retention already removed
the first records, that is reported as lost like any other range below the
log start.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from service.core.models import TopicPartition

from .offsets import Bounds, OffsetRange, offsets_json, parse_offsets_json, split_ranges

Offsets = dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class DataLoss:
    """Offsets ``first <= offset < end`` of one partition that can no longer be read."""

    tp: TopicPartition
    first: int
    end: int
    log_start: int

    def describe(self) -> str:
        where = f"{self.tp.topic}-{self.tp.partition}"
        if self.end < self.first:
            # The log is behind an offset the stream already read: the topic was deleted and
            # created again, and what its new incarnation held before this point is not read.
            return (
                f"{where}: the log ends at {self.end}, before offset {self.first} the stream had "
                "reached (was the topic deleted and created again?); some records may have been missed"
            )
        return (
            f"{where}: offsets {self.first}..{self.end - 1} were deleted by retention before they "
            f"were read (the log starts at {self.log_start})"
        )


def offset_doc(offsets: Mapping[TopicPartition, int]) -> dict[str, Any]:
    """The JSON object Spark checkpoints for ``offsets``: the same offsets always give the same text."""
    doc: dict[str, Any] = json.loads(offsets_json(offsets))
    return doc


def parse_offset_doc(doc: Mapping[str, Any]) -> Offsets:
    """Offsets from a checkpointed JSON object (what ``offset_doc`` wrote)."""
    return parse_offsets_json(json.dumps(doc), option="offset")


def micro_batch_end(
    start: Mapping[TopicPartition, int],
    bounds: Mapping[TopicPartition, Bounds],
    max_records: int | None,
) -> Offsets:
    """Where the next micro-batch ends: every partition of ``bounds`` up to its log end, at most
    ``max_records`` records in all.

    A partition ``start`` does not hold begins at 0; a start below the log start
    counts from the log start (what is below cannot be read; ``ranges`` reports
    it). A log end below the start (a re-created topic) becomes the end as it
    is, as Spark's Kafka source takes it. The limit is shared in proportion to
    what each partition has to read, the remainder to the largest fractions
    (ties in partition order), so a batch holds exactly ``max_records`` records
    when more are waiting.
    """
    end: Offsets = {}
    begin: Offsets = {}
    for tp, (log_start, log_end) in bounds.items():
        offset = start.get(tp, 0)
        if log_end < offset:
            end[tp] = log_end
        else:
            begin[tp] = max(offset, log_start)
            end[tp] = log_end
    sizes = {tp: end[tp] - b for tp, b in begin.items()}
    total = sum(sizes.values())
    if max_records is None or total <= max_records:
        return dict(sorted(end.items()))
    shares = {tp: max_records * size // total for tp, size in sizes.items()}
    left = max_records - sum(shares.values())
    by_fraction = sorted(sizes, key=lambda tp: (-(max_records * sizes[tp] % total), tp))
    for tp in by_fraction[:left]:
        shares[tp] += 1
    end.update({tp: b + shares[tp] for tp, b in begin.items()})
    return dict(sorted(end.items()))


def available_now(end: Mapping[TopicPartition, int], target: Mapping[TopicPartition, int]) -> Offsets:
    """``end`` held at ``target``, the offsets of ``trigger(availableNow=True)``: nothing written
    later, no partition created later."""
    return {tp: min(offset, target[tp]) for tp, offset in end.items() if tp in target}


def ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    bounds: Mapping[TopicPartition, Bounds],
) -> tuple[list[OffsetRange], list[DataLoss]]:
    """What a micro-batch from ``start`` to ``end`` reads, and what of it was lost.

    ``bounds`` are the partitions' bounds now: a range that begins below the
    log start reads from the log start, and the offsets below it are lost.
    """
    out: list[OffsetRange] = []
    lost: list[DataLoss] = []
    for tp in sorted(end):
        first, last = start.get(tp, 0), end[tp]
        log_start = bounds[tp][0] if tp in bounds else first
        if last < first:
            lost.append(DataLoss(tp, first, last, log_start))
            continue
        if first < log_start:
            if min(log_start, last) > first:
                lost.append(DataLoss(tp, first, min(log_start, last), log_start))
            first = min(log_start, last)
        if last > first:
            out.append(OffsetRange(tp.topic, tp.partition, first, last))
    return out, lost


def gone(start: Iterable[TopicPartition], current: Iterable[TopicPartition]) -> list[TopicPartition]:
    """The partitions of ``start`` the log no longer has (their topic was deleted)."""
    now = set(current)
    return sorted(tp for tp in start if tp not in now)


def split_for_tasks(
    batch: Iterable[OffsetRange], max_records_per_partition: int, min_partitions: int | None
) -> list[OffsetRange]:
    """The batch's ranges cut into Spark tasks: pieces of at most ``max_records_per_partition``
    offsets, and at least ``min_partitions`` pieces when the batch holds that many records."""
    pieces = [r for r in batch if r.size > 0]
    limit = max_records_per_partition
    total = sum(r.size for r in pieces)
    if min_partitions is not None and total > 0:
        limit = min(limit, max(1, total // min_partitions))
    return split_ranges(pieces, limit)
