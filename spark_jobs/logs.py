"""Where the records are read from: an embedded data dir or a Kafka cluster, behind one small interface.

``open_log(url)`` gives a ``LogSource``: the planner (on the driver) asks it
for topics, partition counts and bounds; each Spark task opens its own and
reads one ``OffsetRange``. Sources are opened where they are used, never
pickled.

What "the end" of a partition is, so that only acknowledged, durable records
are read:

embedded data dir
    The end is the offset after the last complete, CRC-valid batch of the
    newest segment (``reader.partition_bounds``), and the planner then fsyncs
    that segment through a read-only descriptor. Everything below the end is
    therefore on disk whatever the gateway's ``flush`` policy, and no crash
    can take it back: recovery only ever cuts an incomplete batch. (With
    ``flush=always`` a batch can be complete a moment before the gateway's own
    fsync acknowledges it; it is durable all the same.) The gateway's lock on
    the data dir is not taken: reading while it writes is safe.
Kafka
    The end is the high watermark (ListOffsets "latest"): records every
    in-sync replica has, which is what ``acks=all`` acknowledged.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final, Protocol

from service.adapters.embedded.log import reader
from service.adapters.embedded.log.segment import Segment, parse_segment_name
from service.core.models import Record, TopicPartition

from .offsets import Bounds, OffsetRange

KAFKA_SCHEME: Final = "kafka://"
# Records handed to Spark per Arrow batch: large enough to amortise the conversion, small
# enough to keep a task's memory flat.
CHUNK_RECORDS: Final = 4096
CHUNK_BYTES: Final = 8 << 20


class LogSource(Protocol):
    """Read access to one log: metadata and bounds for planning, ranges for tasks."""

    def topics(self) -> list[str]: ...

    def partition_count(self, topic: str) -> int: ...

    def bounds(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Bounds]: ...

    def read(self, rng: OffsetRange) -> Iterator[list[Record]]:
        """The records of ``rng`` in offset order, in chunks."""
        ...

    def close(self) -> None: ...


def open_log(url: str) -> LogSource:
    """A source for ``kafka://host:port[,...]`` or an embedded data dir path."""
    if url.startswith(KAFKA_SCHEME):
        from .kafka_source import KafkaSource

        return KafkaSource(url)
    return EmbeddedSource(Path(url))


def is_kafka(url: str) -> bool:
    return url.startswith(KAFKA_SCHEME)


def chunked(records: Iterable[Record]) -> Iterator[list[Record]]:
    """Group records into lists bounded by ``CHUNK_RECORDS`` and ``CHUNK_BYTES``."""
    chunk: list[Record] = []
    size = 0
    for r in records:
        chunk.append(r)
        size += r.size
        if len(chunk) >= CHUNK_RECORDS or size >= CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


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

    def read(self, rng: OffsetRange) -> Iterator[list[Record]]:
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
