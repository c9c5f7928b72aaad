"""Topic names, metadata and administration over the Log port.

``TopicService`` validates names before any adapter sees them (``rules``:
Kafka's rule, so no name can escape a data dir), auto-creates topics on
produce when the policy allows, and tells the group manager when an admin
request changes partitions so that subscribed groups rebalance at once. A
topic auto-created by a produce only signals ``on_created``: the produce
answers without waiting for groups, and the metadata worker catches up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from service.errors import BackendUnavailable, PartitionNotFound, TopicExists, TopicNotFound

from .models import TopicInfo, TopicPartition
from .ports import Log
from .rules import check_partition_count, check_replication_factor, check_topic


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
    ) -> None:
        self._log = log
        self._auto_create = auto_create
        self._default_partitions = default_partitions
        self._on_change = on_change
        self._on_created = on_created

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

    async def for_produce(self, topic: str) -> TopicInfo:
        """The topic to produce to, created with the defaults if allowed and missing."""
        try:
            return await self.describe(topic)
        except TopicNotFound:
            if not self._auto_create:
                raise TopicNotFound(
                    f"Topic {topic!r} not found (auto.create.topics.enable is off)."
                ) from None
        try:
            info = await self._log.create_topic(topic, self._default_partitions, -1, {})
        except TopicExists:  # another request created it first
            return await self.describe(topic)
        if self._on_created is not None:
            self._on_created()
        return info

    async def create(
        self, topic: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> TopicInfo:
        check_topic(topic)
        check_partition_count(partitions)
        check_replication_factor(replication_factor)  # -1 asks the log for its default
        info = await self._log.create_topic(topic, partitions, replication_factor, configs)
        await self._changed()
        return info

    async def delete(self, topic: str) -> None:
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
        info = await self.describe(topic)
        if total == len(info.partitions):
            return info
        info = await self._log.add_partitions(topic, total)
        await self._changed()
        return info
