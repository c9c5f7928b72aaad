"""Topic names, metadata and administration over the Log port.

``TopicService`` validates names before any adapter sees them (``rules``:
Kafka's rule, so no name can escape a data dir), auto-creates topics on
produce when the policy allows, and tells the group manager when an admin
request changes partitions so that subscribed groups rebalance at once. A
topic auto-created by a produce only signals ``on_created``: the produce
answers without waiting for groups, and the metadata worker catches up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping

from service.errors import (
    BackendUnavailable,
    Forbidden,
    OffsetOutOfRange,
    PartitionNotFound,
    TopicExists,
    TopicNotFound,
)

from .acl import Caller, Decision, Operation, ResourceType
from .fair import holder_of
from .models import PartitionData, TopicInfo, TopicPartition
from .ports import Log
from .rules import check_partition_count, check_replication_factor, check_topic
from .waits import OpenWaits

# After a fetch that answered early with nothing, before the next (not a busy loop).
_IDLE_SLICE_S = 0.1


class TopicService:
    """Topic metadata and admin; the only core module that creates or deletes topics."""

    def __init__(
        self,
        log: Log,
        *,
        auto_create: bool,
        default_partitions: int,
        on_change: Callable[[], Awaitable[None]] | None = None,
        on_created: Callable[[], None] | None = None,
        draining: asyncio.Event | None = None,
        waits: OpenWaits | None = None,
        reserved: Mapping[str, str] | None = None,
    ) -> None:
        self._log = log
        # Topics clients may read but not create, write, grow or delete: name -> whose they are.
        self._reserved = dict(reserved or {})
        self._auto_create = auto_create
        self._default_partitions = default_partitions
        self._on_change = on_change
        self._on_created = on_created
        self._draining = draining or asyncio.Event()
        self._waits = waits or OpenWaits()

    def check_not_reserved(self, topic: str, doing: str) -> None:
        """``Forbidden`` if ``topic`` is reserved to the gateway (the schema registry's records):
        a record produced into it, or the topic deleted or grown, would corrupt what it holds."""
        owner = self._reserved.get(topic)
        if owner is not None:
            raise Forbidden(f"Topic {topic!r} holds {owner}; clients may not {doing} it.")

    async def _changed(self) -> None:
        if self._on_change is not None:
            await self._on_change()

    async def names(self) -> list[str]:
        return sorted(await self._log.list_topics())

    async def describe(self, topic: str) -> TopicInfo:
        return await self._log.describe_topic(check_topic(topic))

    async def partition_count(self, topic: str) -> int:
        return len((await self.describe(topic)).partitions)

    async def check_partition(self, tp: TopicPartition) -> TopicInfo:
        info = await self.describe(tp.topic)
        if not 0 <= tp.partition < len(info.partitions):
            raise PartitionNotFound(f"Partition {tp.partition} of topic {tp.topic!r} not found.")
        return info

    async def offsets(self, tp: TopicPartition) -> tuple[int, int]:
        await self.check_partition(tp)
        return await self._log.offsets(tp)

    async def read(
        self,
        tp: TopicPartition,
        offset: int,
        *,
        max_bytes: int,
        max_wait_ms: int,
        counted: bool = True,
        caller: Caller | None = None,
    ) -> PartitionData:
        """A stateless read at ``offset``: at once if records are there, else when some arrive or after
        ``max_wait_ms``; an offset past the log end is refused at once (``OffsetOutOfRange``, as
        Kafka's fetch answers it), one before the log start answers nothing, with the log start.
        It waits on the log's fetch (an append wakes it) and the drain, which answers it at once
        with what is there; nothing wakes it on a timer. It takes a place among
        the open long-polls, of ``caller``'s share of them, unless not ``counted`` (a stream's: it
        holds one of its own)."""
        await self.check_partition(tp)
        if not counted:
            return await self._read(tp, offset, max_bytes, max_wait_ms)
        with self._waits.enter(holder_of(caller) if caller is not None else ""):
            return await self._read(tp, offset, max_bytes, max_wait_ms)

    async def _read(self, tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int) -> PartitionData:
        deadline = time.monotonic() + max_wait_ms / 1000
        while True:
            left_ms = 0 if self._draining.is_set() else max(0, int((deadline - time.monotonic()) * 1000))
            fetch = self._log.fetch({tp: offset}, max_bytes=max_bytes, max_wait_ms=left_ms)
            data = await self._unless_drained(fetch) if left_ms else await fetch
            if data is None:  # the gateway drains: what is there, at once
                data = await self._log.fetch({tp: offset}, max_bytes=max_bytes, max_wait_ms=0)
            part = data[tp]
            if part.out_of_range and offset > part.high_watermark:  # Kafka's fetch: OFFSET_OUT_OF_RANGE
                raise OffsetOutOfRange(str(tp), offset, part.log_start_offset, part.high_watermark)
            left_s = deadline - time.monotonic()
            if part.records or left_s <= 0 or self._draining.is_set():
                return part
            await asyncio.sleep(min(left_s, _IDLE_SLICE_S))  # it answered early with nothing

    async def _unless_drained(
        self, fetch: Awaitable[dict[TopicPartition, PartitionData]]
    ) -> dict[TopicPartition, PartitionData] | None:
        """The fetch's answer, or None (the fetch dropped: it only reads) once the gateway drains."""
        fetching = asyncio.ensure_future(fetch)
        draining = asyncio.ensure_future(self._draining.wait())
        try:
            await asyncio.wait((fetching, draining), return_when=asyncio.FIRST_COMPLETED)
            return fetching.result() if fetching.done() else None
        finally:
            draining.cancel()
            if not fetching.done():
                fetching.cancel()
                try:
                    await fetching
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise

    async def for_produce(self, topic: str, who: Decision | None) -> TopicInfo:
        """The topic to produce to, created with the defaults if missing, auto-creation is on and
        ``who`` may create it (Kafka's CREATE on the topic or the cluster; ``Forbidden`` if not)."""
        self.check_not_reserved(topic, "produce to")
        try:
            return await self.describe(topic)
        except TopicNotFound:
            if not self._auto_create:
                raise TopicNotFound(
                    f"Topic {topic!r} not found (auto.create.topics.enable is off)."
                ) from None
        if who is not None:
            who.check_create_topic(topic)
        try:
            info = await self._log.create_topic(topic, self._default_partitions, -1, {})
        except TopicExists:  # another request created it first
            return await self.describe(topic)
        if who is not None:
            who.audit("topic.create", Operation.CREATE, ResourceType.TOPIC, topic, auto_created=True)
        if self._on_created is not None:
            self._on_created()
        return info

    async def create(
        self, topic: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> TopicInfo:
        check_topic(topic)
        self.check_not_reserved(topic, "create")
        check_partition_count(partitions)
        check_replication_factor(replication_factor)  # -1 asks the log for its default
        info = await self._log.create_topic(topic, partitions, replication_factor, configs)
        await self._changed()
        return info

    async def delete(self, topic: str) -> None:
        self.check_not_reserved(topic, "delete")
        try:
            await self.describe(topic)
        except BackendUnavailable:  # e.g. a topic the log could not open: deleting it is the cure
            pass
        await self._log.delete_topic(topic)
        await self._changed()

    async def set_partition_count(self, topic: str, total: int) -> TopicInfo:
        """Grow ``topic`` to ``total`` partitions; asking for the count it has already changes nothing.

        Whether ``total`` is a valid new count is the log's to judge (``rules.check_partition_growth``),
        under its own lock: only it knows the current count for certain.
        """
        self.check_not_reserved(topic, "add partitions to")
        info = await self.describe(topic)
        if total == len(info.partitions):
            return info
        info = await self._log.add_partitions(topic, total)
        await self._changed()
        return info
