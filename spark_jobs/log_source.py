"""``LogSource``: what every log source gives the planner and the Spark tasks, and the chunks it yields.

The embedded source (``embedded_source``) and the Kafka source
(``kafka_source``) implement it; ``logs.open_log`` picks one for a URL.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final, Protocol

from service.core.models import Record, RecordColumns, TopicPartition

from .offsets import Bounds, OffsetRange

# Records handed to Spark per Arrow batch: large enough to amortise the conversion, small
# enough to keep a task's memory flat.
CHUNK_RECORDS: Final = 4096
CHUNK_BYTES: Final = 8 << 20


class LogSource(Protocol):
    """Read access to one log: metadata and bounds for planning, ranges for tasks."""

    def topics(self) -> list[str]: ...

    def partition_count(self, topic: str) -> int: ...

    def bounds(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Bounds]: ...

    def offset_for_timestamp(self, tp: TopicPartition, at_ms: int) -> int | None:
        """The first offset of ``tp`` whose record is timestamped at or after ``at_ms`` (>= 0), as
        Kafka's ListOffsets by time answers it; None when no record is. Timestamps are the
        producers' and need not grow with offsets: the log's own lookup answers, never a search
        that assumes they do."""
        ...

    def read(self, rng: OffsetRange) -> Iterator[RecordColumns]:
        """The records of ``rng`` in offset order, in chunks of at most ``CHUNK_RECORDS``."""
        ...

    def close(self) -> None: ...


def chunked(records: Iterable[Record]) -> Iterator[RecordColumns]:
    """Group records into chunks bounded by ``CHUNK_RECORDS`` and ``CHUNK_BYTES``."""
    chunk: list[Record] = []
    sizes: list[int] = []
    size = 0
    for r in records:
        chunk.append(r)
        sizes.append(counted := r.size)
        size += counted
        if len(chunk) >= CHUNK_RECORDS or size >= CHUNK_BYTES:
            yield RecordColumns.of(chunk, sizes)
            chunk, sizes, size = [], [], 0
    if chunk:
        yield RecordColumns.of(chunk, sizes)
