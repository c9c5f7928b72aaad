"""Produce: place each record on a partition and append per partition.

Everything a client can get wrong (unknown partition) is checked before
anything is appended, so a bad request stores nothing. The
records of one request that go to one partition are appended as one batch;
partitions are appended concurrently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

from service.errors import ErrorCode, GatewayError, PartitionNotFound

from .acl import Decision
from .models import NewRecord, NewRecords, TopicPartition
from .partitioner import Partitioner
from .ports import Log
from .quotas import Quotas
from .topics import TopicService


@dataclass(slots=True)
class PartitionOutcome:
    """What happened to the records of one request that went to one partition."""

    partition: int
    indexes: range | list[int]  # positions of these records in the request
    offsets: Sequence[int] = ()  # their offsets, when stored
    error: GatewayError | None = None

    @property
    def error_code(self) -> int | None:
        if self.error is None:
            return None
        return int(ErrorCode.BACKEND_RETRIABLE if self.error.retriable else ErrorCode.BACKEND)


@dataclass(slots=True)
class ProduceOutcome:
    """The outcome of a produce request, per partition; ``per_record`` restores request order."""

    count: int
    partitions: list[PartitionOutcome]

    def per_record(self) -> list[tuple[int, int | None, int | None, str | None]]:
        """(partition, offset, error_code, error) for each record, in request order."""
        out: list[tuple[int, int | None, int | None, str | None]] = [(0, None, None, None)] * self.count
        for part in self.partitions:
            message = part.error.message if part.error else None
            if part.error is not None:
                for i in part.indexes:
                    out[i] = (part.partition, None, part.error_code, message)
            else:
                for i, offset in zip(part.indexes, part.offsets, strict=True):
                    out[i] = (part.partition, offset, None, None)
        return out


class ProduceService:
    """Routes records to partitions (explicit, by key with murmur2, or spread) and appends them.

    Collaborators: the Log, ``TopicService`` (auto-creation) and the produce quotas.
    """

    def __init__(
        self, log: Log, topics: TopicService, partitioner: Partitioner, quotas: Quotas | None = None
    ) -> None:
        self._log = log
        self._topics = topics
        self._partitioner = partitioner
        self._quotas = quotas or Quotas.off()

    def _place(
        self, topic: str, count: int, records: NewRecords, explicit: Sequence[int | None] | None
    ) -> dict[int, range | list[int]]:
        """Record indexes per partition, in request order within each partition."""
        if explicit is None:
            if count == 1:
                return {0: range(len(records))}
            keys = repeat(None, len(records)) if records.keys is None else records.keys
            placed = self._partitioner.partitions(topic, keys, count)
        else:
            placed = []
            keys = repeat(None) if records.keys is None else records.keys
            for i, (key, p) in enumerate(zip(keys, explicit, strict=False)):  # repeat: endless
                if p is None:
                    p = self._partitioner.partition(topic, key, count)
                elif p >= count:
                    raise PartitionNotFound(
                        f"records[{i}]: partition {p} of topic {topic!r} not found (it has {count})."
                    )
                placed.append(p)
        by_partition: dict[int, list[int]] = {}
        for i, p in enumerate(placed):
            by_partition.setdefault(p, []).append(i)
        return dict(by_partition)

    async def produce(
        self,
        topic: str,
        records: Sequence[NewRecord],
        explicit: Sequence[int | None] | None = None,
        *,
        partition: int | None = None,
        client: str = "",
        who: Decision | None,
    ) -> ProduceOutcome:
        """Append ``records`` to ``topic`` for ``client`` (charged to its produce quotas, if any).

        ``partition`` pins the whole request (the /partitions/{p} endpoint);
        otherwise ``explicit`` may give a partition per record. A missing topic is created only
        if ``who`` may create it (see ``TopicService.for_produce``). ``records`` as a request
        parsed them (``NewRecords``), or any sequence of them.
        """
        records = NewRecords.of(records)
        if self._quotas.produce:
            await self._quotas.admit_produce(client, topic, records)
        info = await self._topics.for_produce(topic, who)
        count = len(info.partitions)
        if partition is not None:
            if not 0 <= partition < count:
                raise PartitionNotFound(f"Partition {partition} of topic {topic!r} not found.")
            by_partition: dict[int, range | list[int]] = {partition: range(len(records))}
        else:
            by_partition = self._place(topic, count, records, explicit)

        parts = list(by_partition)
        if len(parts) == 1:  # the common case: no regrouping, no copies
            batches = [records]
        else:
            batches = [records.take(by_partition[p]) for p in parts]
        appended: list[Sequence[int] | BaseException]
        if len(parts) == 1:  # awaited in place: gather would wrap the one call in a task
            try:
                appended = [await self._log.append(TopicPartition(topic, parts[0]), batches[0])]
            except GatewayError as exc:
                appended = [exc]
        else:
            appended = await asyncio.gather(
                *(
                    self._log.append(TopicPartition(topic, p), batch)
                    for p, batch in zip(parts, batches, strict=True)
                ),
                return_exceptions=True,
            )
        outcomes: list[PartitionOutcome] = []
        for p, result in zip(parts, appended, strict=True):
            if isinstance(result, GatewayError):
                outcomes.append(PartitionOutcome(p, by_partition[p], error=result))
            elif isinstance(result, BaseException):
                raise result
            else:
                outcomes.append(PartitionOutcome(p, by_partition[p], offsets=result))
        failed = [o.error for o in outcomes if o.error is not None]
        if failed and len(failed) == len(outcomes):
            # Nothing was stored: answer with the backend's own status (e.g. 503 + Retry-After).
            raise failed[0]
        return ProduceOutcome(len(records), outcomes)
