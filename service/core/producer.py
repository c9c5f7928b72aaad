"""Produce: place each record on a partition and append per partition.

Everything a client can get wrong (unknown partition, oversized record) is
checked before anything is appended, so a bad request stores nothing. The
records of one request that go to one partition are appended as one batch;
partitions are appended concurrently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from service.errors import ErrorCode, GatewayError, PartitionNotFound, PayloadTooLarge

from .models import NewRecord, TopicPartition
from .partitioner import Partitioner
from .ports import Log
from .topics import TopicService


@dataclass(slots=True)
class ProduceResult:
    """The outcome for one record, in request order (Confluent's ``offsets`` entry)."""

    partition: int
    offset: int | None
    error_code: int | None = None
    error: str | None = None


class ProduceService:
    """Routes records to partitions (explicit, by key with murmur2, or spread) and appends them."""

    def __init__(
        self, log: Log, topics: TopicService, partitioner: Partitioner, *, max_record_bytes: int
    ) -> None:
        self._log = log
        self._topics = topics
        self._partitioner = partitioner
        self._max_record_bytes = max_record_bytes

    async def produce(
        self,
        topic: str,
        records: Sequence[NewRecord],
        explicit: Sequence[int | None] | None = None,
        *,
        partition: int | None = None,
    ) -> list[ProduceResult]:
        """Append ``records`` to ``topic``.

        ``partition`` pins the whole request (the /partitions/{p} endpoint);
        otherwise ``explicit`` may give a partition per record.
        """
        info = await self._topics.for_produce(topic)
        count = len(info.partitions)
        if partition is not None and not 0 <= partition < count:
            raise PartitionNotFound(f"Partition {partition} of topic {topic!r} not found.")
        limit = self._max_record_bytes
        placed: list[int] = []
        for i, rec in enumerate(records):
            if len(rec.value or b"") + len(rec.key or b"") > limit:
                raise PayloadTooLarge(f"records[{i}] is larger than the record size limit of {limit} bytes.")
            p = partition if partition is not None else (explicit[i] if explicit else None)
            if p is None:
                p = self._partitioner.partition(topic, rec.key, count)
            elif not 0 <= p < count:
                raise PartitionNotFound(
                    f"records[{i}]: partition {p} of topic {topic!r} not found (it has {count})."
                )
            placed.append(p)

        by_partition: dict[int, list[int]] = {}
        for i, p in enumerate(placed):
            by_partition.setdefault(p, []).append(i)
        parts = list(by_partition)
        outcomes = await asyncio.gather(
            *(
                self._log.append(TopicPartition(topic, p), [records[i] for i in by_partition[p]])
                for p in parts
            ),
            return_exceptions=True,
        )

        results: list[ProduceResult | None] = [None] * len(records)
        failures: list[BaseException] = []
        for p, outcome in zip(parts, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, GatewayError):
                    raise outcome
                failures.append(outcome)
                code = ErrorCode.BACKEND_RETRIABLE if outcome.retriable else ErrorCode.BACKEND
                for i in by_partition[p]:
                    results[i] = ProduceResult(p, None, int(code), outcome.message)
            else:
                for n, i in enumerate(by_partition[p]):
                    results[i] = ProduceResult(p, outcome + n)
        if failures and len(failures) == len(parts):
            # Nothing was stored: answer with the backend's own status (e.g. 503 + Retry-After).
            raise failures[0]
        return [r for r in results if r is not None]
