"""Topic names, metadata and administration over the Log port.

``TopicService`` validates names before any adapter sees them (Kafka's rule,
so no name can escape a data dir), auto-creates topics on produce when the
policy allows, and tells the group manager when partitions change so that
subscribed groups rebalance at once.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from service.errors import (
    InvalidTopic,
    InvalidTopicConfig,
    PartitionNotFound,
    TopicExists,
    TopicNotFound,
)

from .models import TopicInfo, TopicPartition
from .ports import Log

_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")
MAX_PARTITIONS: Final = 10_000  # a guard against a typo creating millions of partitions


def validate_topic_name(name: str) -> str:
    """Return ``name`` if it is a legal Kafka topic name (so no path can escape a data dir),
    else raise ``InvalidTopic``. Every log checks its arguments with it."""
    if not isinstance(name, str) or not _TOPIC_RE.fullmatch(name) or name in (".", ".."):
        raise InvalidTopic(
            f"Invalid topic name {str(name)[:300]!r}: "
            "use 1 to 249 characters of [a-zA-Z0-9._-], not '.' or '..'."
        )
    return name


def check_partition_count(partitions: int) -> None:
    """Refuse a partition count no topic may have (``InvalidTopicConfig``); for the logs' own checks."""
    if (
        isinstance(partitions, bool)
        or not isinstance(partitions, int)
        or not 1 <= partitions <= MAX_PARTITIONS
    ):
        raise InvalidTopicConfig(
            f"Invalid partition count {partitions!r}: a topic has between 1 and {MAX_PARTITIONS} partitions."
        )


class TopicService:
    """Topic metadata and admin; the only core module that creates or deletes topics."""

    def __init__(
        self,
        log: Log,
        *,
        auto_create: bool,
        default_partitions: int,
        on_change: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._log = log
        self._auto_create = auto_create
        self._default_partitions = default_partitions
        self._on_change = on_change

    def set_on_change(self, callback: Callable[[], Awaitable[None]]) -> None:
        self._on_change = callback

    async def _changed(self) -> None:
        if self._on_change is not None:
            await self._on_change()

    async def names(self) -> list[str]:
        return sorted(await self._log.list_topics())

    async def describe(self, topic: str) -> TopicInfo:
        return await self._log.describe_topic(validate_topic_name(topic))

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
        await self._changed()
        return info

    async def create(
        self, topic: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> TopicInfo:
        validate_topic_name(topic)
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidTopicConfig(f"partitions_count must be between 1 and {MAX_PARTITIONS}.")
        # -1 asks the log for its default (the cluster's, on Kafka)
        if replication_factor < 1 and replication_factor != -1:
            raise InvalidTopicConfig("replication_factor must be at least 1 (or -1 for the default).")
        info = await self._log.create_topic(topic, partitions, replication_factor, configs)
        await self._changed()
        return info

    async def delete(self, topic: str) -> None:
        await self.describe(topic)
        await self._log.delete_topic(topic)
        await self._changed()

    async def set_partition_count(self, topic: str, total: int) -> TopicInfo:
        current = await self.partition_count(topic)
        if total == current:
            return await self.describe(topic)
        if not current < total <= MAX_PARTITIONS:
            raise InvalidTopicConfig(
                f"Topic {topic!r} has {current} partitions; the count can only grow, up to {MAX_PARTITIONS}."
            )
        info = await self._log.add_partitions(topic, total)
        await self._changed()
        return info
