"""``OffsetLookup``: a partition's first and next offsets, and the offset for a time (ListOffsets).

Kafka's ListOffsets request, sent to the partition's leader, answers all three
questions: timestamp -2 is the log start ("earliest"), -1 the high watermark
("latest", the next offset to be written), and any other timestamp the first
offset whose record timestamp is at or after it (-1 when there is none). A
leader that moved (stale metadata) costs one metadata refresh and one retry.

Collaborators: ``ClusterClient`` (requests), ``TopicMetadata`` (leaders).
Used by ``KafkaLog`` and by ``Fetcher`` (after an out-of-range fetch).
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiokafka.protocol.offset import OffsetRequest

from service.core.models import TopicPartition
from service.errors import BackendUnavailable

from .cluster import ClusterClient
from .errors import for_code, is_metadata_error
from .metadata import TopicMetadata

EARLIEST: Final = -2
LATEST: Final = -1
READ_UNCOMMITTED: Final = 0  # what the fetcher reads: the high watermark, not the last stable offset


class OffsetLookup:
    """ListOffsets for one partition at a time, each bounded by ``timeout`` seconds."""

    def __init__(self, cluster: ClusterClient, metadata: TopicMetadata, *, timeout: float) -> None:
        self._cluster = cluster
        self._metadata = metadata
        self._timeout = timeout

    async def bounds(self, tp: TopicPartition) -> tuple[int, int]:
        """(log start offset, high watermark) of ``tp``."""
        earliest, latest = await asyncio.gather(self.lookup(tp, EARLIEST), self.lookup(tp, LATEST))
        return earliest[0], latest[0]

    async def for_timestamp(self, tp: TopicPartition, timestamp_ms: int) -> int | None:
        """First offset with a timestamp >= ``timestamp_ms``; None if every record is older."""
        # Negative timestamps are Kafka's special values (-1 latest, -2 earliest), not times;
        # every record is at or after any time before 1970, so ask for 0 instead.
        offset, _ = await self.lookup(tp, max(timestamp_ms, 0))
        return None if offset < 0 else offset

    async def lookup(self, tp: TopicPartition, spec: int) -> tuple[int, int]:
        """(offset, timestamp) that ListOffsets answers for ``spec`` (a time, EARLIEST or LATEST)."""
        what = f"listing offsets of {tp}"
        for attempt in (1, 2):
            info = await self._metadata.partition(tp.topic, tp.partition)
            if info.leader < 0:
                self._metadata.invalidate(tp.topic)
                if attempt == 1:
                    continue
                raise BackendUnavailable(f"Partition {tp} has no leader right now; retry shortly.")
            request = OffsetRequest(-1, READ_UNCOMMITTED, [(tp.topic, [(tp.partition, spec)])])
            response = await self._cluster.send(info.leader, request, timeout=self._timeout, what=what)
            code, offset, timestamp = _partition_answer(response, tp)
            if code and is_metadata_error(code) and attempt == 1:
                self._metadata.invalidate(tp.topic)
                continue
            if error := for_code(code, what, topic=tp.topic, partition=tp.partition):
                raise error
            return offset, timestamp
        raise BackendUnavailable(f"Partition {tp} keeps moving; retry shortly.")  # pragma: no cover


def _partition_answer(response: object, tp: TopicPartition) -> tuple[int, int, int]:
    """(error code, offset, timestamp) for ``tp`` in an OffsetResponse of any version."""
    version = getattr(response, "API_VERSION", 1)
    for topic, partitions in getattr(response, "topics", []):
        if topic != tp.topic:
            continue
        for entry in partitions:
            if entry[0] != tp.partition:
                continue
            if version == 0:  # (partition, error, [offsets])
                offsets = entry[2]
                return entry[1], (offsets[0] if offsets else -1), -1
            return entry[1], entry[3], entry[2]  # (partition, error, timestamp, offset, ...)
    return 3, -1, -1  # not in the answer: as Kafka says for a partition it does not know
