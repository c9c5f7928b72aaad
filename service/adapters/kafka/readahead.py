"""``ReadAhead``: records fetched from Kafka but not yet returned, kept for the next read.

Kafka answers a fetch with whole batches and the gateway asks for at least
``kafka_fetch_bytes`` per partition, so a reader with a small ``max_bytes``
gets only part of what came back. The rest is kept here, per partition, and
a fetch starting inside the kept range is served from memory: a sequential
reader makes one round trip per ``kafka_fetch_bytes`` instead of one per call.

All chunks together hold at most ``capacity`` bytes (``Record.size`` plus a
per-record allowance for the Python objects of its columns); the least recently used chunk
goes first. A chunk is also dropped after ``max_age`` seconds, so a topic
deleted and recreated behind the gateway's back is not served from old data
for long. The log drops a topic's chunks itself when it deletes the topic.

One chunk per partition: a second reader elsewhere in the same partition
replaces it (both still get correct data; only the saving is lost). Pure data
structure, no I/O; used by ``Fetcher``.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from service.core.models import RecordColumns, TopicPartition

# bytes a decoded record costs beyond its payload: its value's bytes object, offset and timestamp
# ints, and a slot in each column (about 140 measured with tracemalloc), with a margin
RECORD_OVERHEAD: Final = 160
MAX_AGE_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class Chunk:
    """Records covering the offsets ``[start, end)`` of a partition (gaps inside are real:
    compacted away or transaction markers), with the partition's state when fetched."""

    start: int
    end: int
    records: RecordColumns  # with each record's ``Record.size``
    high_watermark: int
    log_start_offset: int
    stored_at: float = 0.0

    @property
    def cost(self) -> int:
        return sum(self.records.sizes) + RECORD_OVERHEAD * len(self.records)

    def since(self, offset: int) -> Chunk:
        """The part of this chunk from ``offset`` on (``start <= offset < end``)."""
        records = self.records
        offsets = records.offsets
        if offsets and offsets[0] < offset:
            records = records[bisect_left(offsets, offset) :]
        return Chunk(offset, self.end, records, self.high_watermark, self.log_start_offset, self.stored_at)


class ReadAhead:
    """An LRU of ``Chunk`` per partition within ``capacity`` bytes (0 disables it)."""

    def __init__(
        self, capacity: int, *, max_age: float = MAX_AGE_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._capacity = max(capacity, 0)
        self._max_age = max_age
        self._clock = clock
        self._chunks: OrderedDict[TopicPartition, tuple[Chunk, int]] = OrderedDict()
        self._bytes = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def bytes(self) -> int:
        """What the kept chunks cost now (never more than the capacity)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._chunks)

    def get(self, tp: TopicPartition, offset: int) -> Chunk | None:
        """The kept records of ``tp`` from ``offset`` on, if ``offset`` is inside the kept range."""
        found = self._chunks.get(tp)
        if found is None:
            return None
        chunk = found[0]
        if self._clock() - chunk.stored_at > self._max_age:
            self.drop(tp)
            return None
        if not chunk.start <= offset < chunk.end:
            return None
        self._chunks.move_to_end(tp)
        return chunk.since(offset)

    def put(self, tp: TopicPartition, chunk: Chunk) -> None:
        """Keep ``chunk`` for ``tp`` (replacing what was kept), evicting others to stay in budget."""
        self.drop(tp)
        if not chunk.records or self._capacity == 0:
            return
        records = chunk.records
        cost = chunk.cost
        if cost > self._capacity:  # keep the head that fits: it is what the reader asks for next
            kept, used = 0, 0
            for size in records.sizes:
                if used + size + RECORD_OVERHEAD > self._capacity:
                    break
                used += size + RECORD_OVERHEAD
                kept += 1
            if kept == 0:
                return
            records = records[:kept]
            chunk = Chunk(
                chunk.start, records.offsets[-1] + 1, records, chunk.high_watermark, chunk.log_start_offset
            )
            cost = used
        while self._chunks and self._bytes + cost > self._capacity:
            _, (_, evicted) = self._chunks.popitem(last=False)
            self._bytes -= evicted
        stamped = Chunk(
            chunk.start, chunk.end, records, chunk.high_watermark, chunk.log_start_offset, self._clock()
        )
        self._chunks[tp] = (stamped, cost)
        self._bytes += cost

    def drop(self, tp: TopicPartition) -> None:
        found = self._chunks.pop(tp, None)
        if found is not None:
            self._bytes -= found[1]

    def drop_topic(self, topic: str) -> None:
        for tp in [tp for tp in self._chunks if tp.topic == topic]:
            self.drop(tp)

    def clear(self) -> None:
        self._chunks.clear()
        self._bytes = 0
