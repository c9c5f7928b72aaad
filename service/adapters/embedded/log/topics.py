"""Opening topics: every partition of one topic at once, and every topic a data directory holds.

``EmbeddedLog`` calls these at start, and when a topic is created, grows or
must be served again after a failed deletion. Partitions open in worker threads,
all of a topic's at once; a topic opens whole or not at all. At start, a topic
that cannot be opened (damaged, a config no longer valid, too many files) is
logged and reported, and the others are served; a data directory written by a
newer release stops the start.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from service.core.models import TopicPartition
from service.errors import GatewayError, InvalidTopicConfig, NewerFormat

from ..fileio import opening_failed
from .config import SEGMENT_BYTES, LogDefaults, TopicConfig
from .metadata import DataDir, TopicMeta
from .partition import Partition, PartitionOptions

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Topic:
    """An open topic: its stored metadata, its effective config and its partitions."""

    meta: TopicMeta
    config: TopicConfig
    partitions: list[Partition]  # replaced, never mutated, so iterating callers see a stable list


async def open_partitions(
    data_dir: DataDir,
    topic: str,
    numbers: range,
    config: TopicConfig,
    opts: PartitionOptions,
    *,
    clean: bool,
) -> list[Partition]:
    """Open partitions ``numbers`` of ``topic``, or none: one that fails closes the others and raises."""
    jobs = [
        asyncio.to_thread(
            Partition.open,
            TopicPartition(topic, n),
            data_dir.partition_dir(topic, n),
            config,
            opts,
            clean=clean,
        )
        for n in numbers
    ]
    results = await asyncio.gather(*jobs, return_exceptions=True)
    opened = [r for r in results if isinstance(r, Partition)]
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        for p in opened:
            await p.close(flush=False)
        log.error("topic %s: a partition could not be opened: %s", topic, failed[0])  # with its file
        raise opening_failed(f"Cannot open topic {topic!r}", failed) from failed[0]
    return opened


async def open_all(
    data_dir: DataDir, defaults: LogDefaults, opts: PartitionOptions, *, clean: bool
) -> tuple[dict[str, Topic], dict[str, str]]:
    """Every topic the directory holds: those opened, and why each of the others could not be."""
    topics: dict[str, Topic] = {}
    unopened: dict[str, str] = {}
    try:
        for meta in await asyncio.to_thread(data_dir.load_topics):
            try:
                config = TopicConfig.build(meta.configs, defaults, stored=True)
            except InvalidTopicConfig as exc:
                log.error("topic %s not opened: %s", meta.name, exc)
                continue
            small = config.overrides.get(SEGMENT_BYTES)
            if small is not None and int(small) < config.segment_bytes:
                log.warning(
                    "topic %s: segment.bytes %s is below the minimum; its segments roll at %d",
                    meta.name,
                    small,
                    config.segment_bytes,
                )
            try:
                parts = await open_partitions(
                    data_dir, meta.name, range(meta.partitions), config, opts, clean=clean
                )
            except NewerFormat:
                raise  # not this topic's damage: the data dir is a newer release's
            except GatewayError as exc:
                # One topic that cannot be opened (damaged, too many files for the limit) must not
                # keep the others from being served: it is logged, and reported by unopened_topics.
                log.error("topic %s not opened: %s", meta.name, exc)
                unopened[meta.name] = exc.message
                continue
            topics[meta.name] = Topic(meta, config, parts)
    except BaseException:
        for t in topics.values():
            for p in t.partitions:
                await p.close(flush=False)
        raise
    return topics, unopened
