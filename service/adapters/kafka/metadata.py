"""``TopicMetadata``: topics, partitions, leaders and configs, cached briefly.

The core describes a topic on every produce and the fetch path needs each
partition's leader, so asking the cluster each time would double the round
trips of the hot paths. A described topic (a Metadata request and a
DescribeConfigs request, sent together, each to any broker that answers: one
just gone costs its share of the deadline, not the lookup) is kept for
``max_age_ms``; entries
are dropped early when the log creates, deletes or grows the topic, and when a
produce or fetch meets a stale-metadata error (``invalidate``). Concurrent
misses for one topic share one lookup. Missing topics are never cached, so a
topic created elsewhere is seen at once.

Collaborators: ``ClusterClient`` (Metadata and DescribeConfigs requests).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from aiokafka.protocol.admin import DescribeConfigsRequest

from service.core.models import Broker, PartitionInfo, TopicInfo
from service.errors import BackendUnavailable, PartitionNotFound, TopicNotFound

from ..tasks import retrieve
from .cluster import ClusterClient
from .errors import for_code, is_unknown_topic, not_ready

MAX_ENTRIES = 10_000
TOPIC_RESOURCE: Final = 2  # DescribeConfigs' resource type of a topic


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What a Metadata request without topics tells: the brokers and the cluster's id."""

    cluster_id: str | None
    controller_id: int | None
    brokers: list[Broker]


def parse_cluster(response: Any) -> ClusterView:
    brokers = sorted((Broker(b[0], b[1], b[2]) for b in response.brokers), key=lambda b: b.broker_id)
    cluster_id = getattr(response, "cluster_id", None)
    controller = getattr(response, "controller_id", None)
    return ClusterView(
        cluster_id or None, controller if controller is not None and controller >= 0 else None, brokers
    )


def parse_topic(response: Any, topic: str) -> TopicInfo | None:
    """The topic's partitions from a MetadataResponse; None if the topic is unknown.

    Raises ``BackendUnavailable`` while the topic exists but is not ready (e.g. a
    leader election), and translated errors for anything else.
    """
    for entry in response.topics:
        code, name = entry[0], entry[1]
        if name != topic:
            continue
        if is_unknown_topic(code):
            return None
        if (reason := not_ready(code)) is not None:  # just created, or a leader moving
            raise BackendUnavailable(f"Topic {topic!r} has no leader yet ({reason}); retry shortly.")
        if error := for_code(code, f"describing topic {topic!r}", topic=topic):
            raise error
        partitions = entry[-1]  # v0 has no is_internal field; partitions are always last
        infos = sorted(
            (PartitionInfo(p[1], p[2], tuple(p[3]), tuple(p[4])) for p in partitions),
            key=lambda p: p.partition,
        )
        replication = len(infos[0].replicas) if infos else 0
        return TopicInfo(topic, tuple(infos), replication)
    return None


def parse_configs(response: Any, topic: str) -> dict[str, str]:
    """Name -> value from a DescribeConfigs response for ``topic`` (every version puts name, value
    first); sensitive values, which come back as null, are left out."""
    what = f"reading the configs of {topic!r}"
    configs: dict[str, str] = {}
    for resource in response.resources:
        code, message = resource[0], resource[1]
        if error := for_code(code, what, topic=topic, message=message):
            raise error
        for entry in resource[4]:
            name, value = entry[0], entry[1]
            if value is not None:
                configs[name] = str(value)
    return dict(sorted(configs.items()))


def topic_names(response: Any) -> list[str]:
    """Every topic a MetadataResponse lists, without Kafka's internal ones (``__consumer_offsets``)."""
    names = []
    for entry in response.topics:
        code, name = entry[0], entry[1]
        internal = bool(entry[2]) if len(entry) > 3 else name.startswith("__")
        if internal or is_unknown_topic(code):
            continue
        names.append(name)
    return sorted(names)


@dataclass(slots=True)
class _Entry:
    info: TopicInfo
    expires: float


class TopicMetadata:
    """Described topics, cached for ``max_age_ms``, with shared in-flight lookups."""

    def __init__(
        self,
        cluster: ClusterClient,
        *,
        max_age_ms: int,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cluster = cluster
        self._max_age = max_age_ms / 1000
        self._timeout = timeout
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._inflight: dict[str, tuple[int, asyncio.Future[TopicInfo]]] = {}
        self._generation = 0  # bumped by invalidate: a lookup started before must not be cached

    def invalidate(self, topic: str | None = None) -> None:
        """Forget ``topic`` (every topic when None); the next ``describe`` asks the cluster."""
        self._generation += 1
        if topic is None:
            self._entries.clear()
        else:
            self._entries.pop(topic, None)

    def cached(self, topic: str) -> TopicInfo | None:
        entry = self._entries.get(topic)
        if entry is None or entry.expires <= self._clock():
            return None
        return entry.info

    async def describe(self, topic: str) -> TopicInfo:
        """The topic with partitions, leaders and configs; ``TopicNotFound`` if absent."""
        info = self.cached(topic)
        if info is not None:
            return info
        generation = self._generation
        inflight = self._inflight.get(topic)
        if inflight is not None and inflight[0] == generation:
            pending = inflight[1]
        else:  # none yet, or one started before an invalidation: its answer may be stale
            pending = asyncio.ensure_future(self._load(topic, generation))
            self._inflight[topic] = (generation, pending)
            pending.add_done_callback(lambda f: self._done(topic, f))
        # shield: one caller giving up (a client disconnect) must not cancel the others' lookup
        return await asyncio.shield(pending)

    def _done(self, topic: str, future: asyncio.Future[TopicInfo]) -> None:
        inflight = self._inflight.get(topic)
        if inflight is not None and inflight[1] is future:
            del self._inflight[topic]
        retrieve(future)  # every waiter may have gone away

    async def partition(self, topic: str, partition: int) -> PartitionInfo:
        """One partition of ``topic``; ``PartitionNotFound`` if the topic has fewer."""
        info = await self.describe(topic)
        if not 0 <= partition < len(info.partitions):
            raise PartitionNotFound(f"Partition {partition} of topic {topic!r} not found.")
        return info.partitions[partition]

    async def fresh(self, topic: str) -> TopicInfo:
        """Describe ``topic`` from the cluster, ignoring (and replacing) the cached entry."""
        self.invalidate(topic)
        return await self.describe(topic)

    async def _load(self, topic: str, generation: int) -> TopicInfo:
        what = f"describing topic {topic!r}"
        described = DescribeConfigsRequest([(TOPIC_RESOURCE, topic, None)])
        metadata, configs = await asyncio.gather(
            self._cluster.metadata([topic], timeout=self._timeout, what=what),
            self._cluster.send_any(
                described, timeout=self._timeout, what=f"reading the configs of {topic!r}"
            ),
        )
        info = parse_topic(metadata, topic)
        if info is None:
            raise TopicNotFound(f"Topic {topic!r} not found.")
        info = TopicInfo(info.name, info.partitions, info.replication_factor, parse_configs(configs, topic))
        if generation == self._generation:
            now = self._clock()
            if len(self._entries) >= MAX_ENTRIES:  # many topics, each described once: forget the stale
                self._entries = {t: e for t, e in self._entries.items() if e.expires > now}
            self._entries[topic] = _Entry(info, now + self._max_age)
        return info

    async def topic_names(self) -> list[str]:
        response = await self._cluster.metadata(None, timeout=self._timeout, what="listing topics")
        return topic_names(response)

    async def cluster(self) -> ClusterView:
        response = await self._cluster.metadata([], timeout=self._timeout, what="listing brokers")
        return parse_cluster(response)
