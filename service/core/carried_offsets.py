"""The rule of committed offsets carried into Kafka from the coordinator's own store.

On a Kafka log a group's committed offsets are Kafka's. Offsets committed before they moved
there are in the coordinator's own store (its data dir, or ZooKeeper); the gateway carries them
into Kafka once a group, at its first read, and marks the group so in that store (``CARRIED``).
Two readers follow one rule: the gateway (``service.adapters.split_offsets``) and the Spark
jobs that read committed offsets without a gateway (``spark_jobs.committed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from .models import TopicPartition

__all__ = ["CARRIED", "as_read", "is_carried", "to_carry"]

# The mark a group's offsets were carried to Kafka, kept among them in the coordinator's store (its
# offset: when, in ms since the epoch). Kafka's topic names are never this one's long, leading
# "__" kind: Kafka keeps that for its own internal topics, and no gateway creates one. An older
# release reads it as the offset of a topic that does not exist, which it leaves out.
CARRIED: Final = TopicPartition("__brokergate_offsets_carried_to_kafka", 0)

Offsets = Mapping[TopicPartition, int]


def is_carried(older: Offsets) -> bool:
    """Whether the coordinator's store (``older``) says the group was carried into Kafka."""
    return CARRIED in older


def to_carry(older: Offsets, kafka: Offsets) -> dict[TopicPartition, int]:
    """What carrying commits to Kafka: the older store's offsets of the partitions Kafka has no
    offset for (Kafka's own are newer), without the mark; {} once the group was carried."""
    if is_carried(older):
        return {}
    return {tp: offset for tp, offset in older.items() if tp not in kafka}


def as_read(kafka: Offsets, older: Offsets) -> dict[TopicPartition, int]:
    """A group's committed offsets as the gateway answers them, sorted: once carried, Kafka's
    alone (an offset deleted in Kafka stays deleted, as Kafka means it); before, Kafka's where it
    has one and the older store's elsewhere."""
    return dict(sorted({**to_carry(older, kafka), **kafka}.items()))
