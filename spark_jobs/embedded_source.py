"""``EmbeddedSource``: a gateway's embedded data dir, read through ``service.adapters.embedded.log.reader``.

The end of a partition is the offset after the last complete, CRC-valid batch
of its newest segment, made durable before it is used (``durable_bounds``);
``logs`` explains why that is the end a reader may trust.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from service.adapters.embedded.log import reader
from service.adapters.embedded.log.segment import Segment, parse_segment_name
from service.core.models import RecordColumns, TopicPartition

from .log_source import chunked
from .offsets import Bounds, OffsetRange


class EmbeddedSource:
    """A gateway's embedded data dir, read through ``service.adapters.embedded.log.reader``."""

    def __init__(self, data_dir: Path) -> None:
        if not (data_dir / "topics").is_dir():
            raise FileNotFoundError(f"{data_dir} is not a brokergate data dir (it has no topics/)")
        self.data_dir = data_dir

    def topics(self) -> list[str]:
        return reader.list_topics(self.data_dir)

    def partition_count(self, topic: str) -> int:
        return reader.partition_count(self.data_dir, topic)

    def bounds(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Bounds]:
        return {tp: durable_bounds(reader.partition_dir(self.data_dir, tp.topic, tp.partition)) for tp in tps}

    def offset_for_timestamp(self, tp: TopicPartition, at_ms: int) -> int | None:
        # The log's time index and batch scan, as the gateway's own timestamp seek uses them.
        return reader.find_timestamp(reader.partition_dir(self.data_dir, tp.topic, tp.partition), at_ms)

    def read(self, rng: OffsetRange) -> Iterator[RecordColumns]:
        directory = reader.partition_dir(self.data_dir, rng.topic, rng.partition)
        yield from chunked(reader.read_partition_range(directory, rng.start, rng.end))

    def close(self) -> None:
        pass


def durable_bounds(directory: Path) -> Bounds:
    """(log start, end) of a partition, with everything below the end made durable first."""
    start, end = reader.partition_bounds(directory)
    if end > start:
        _sync_segment_holding(directory, end - 1)
    return start, end


def _sync_segment_holding(directory: Path, offset: int) -> None:
    """fsync the segment that holds ``offset``; older segments were fsynced when they were sealed."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    bases = sorted(b for b in map(parse_segment_name, names) if b is not None and b <= offset)
    if not bases:
        return
    try:
        fd = os.open(Segment.paths(directory, bases[-1])[0], os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:  # removed by retention meanwhile: nothing of it is read
        return
    try:
        os.fsync(fd)  # a read-only descriptor flushes the file's dirty pages too (Linux, BSD, macOS)
    finally:
        os.close(fd)
