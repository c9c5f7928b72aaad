"""KafkaLog topic admin and metadata against Apache Kafka: topics, partitions, configs, offsets."""

from __future__ import annotations

import pytest

from deploy.local.kafka_broker import KafkaBroker
from service.adapters.kafka import KafkaLog
from service.core.models import NewRecord, TopicPartition
from service.errors import (
    InvalidPayload,
    InvalidTopic,
    InvalidTopicConfig,
    TopicExists,
    TopicNotFound,
)

from .helpers import values


async def test_cluster_id_and_brokers_come_from_the_cluster(
    kafka_log: KafkaLog, kafka_broker: KafkaBroker
) -> None:
    assert kafka_log.cluster_id == kafka_broker.cluster_id
    brokers = await kafka_log.brokers()
    assert [(b.host, b.port) for b in brokers] == [("127.0.0.1", kafka_broker.port)]


async def test_create_describe_list_delete(kafka_log: KafkaLog, topic: str) -> None:
    info = await kafka_log.create_topic(topic, 3, 1, {"retention.ms": "3600000"})
    assert info.name == topic and info.replication_factor == 1
    assert [p.partition for p in info.partitions] == [0, 1, 2]
    broker_ids = {b.broker_id for b in await kafka_log.brokers()}
    for p in info.partitions:
        assert p.leader in broker_ids and p.replicas == (p.leader,) and p.in_sync == (p.leader,)
    assert info.configs["retention.ms"] == "3600000"

    described = await kafka_log.describe_topic(topic)
    assert described.partitions == info.partitions and described.configs["retention.ms"] == "3600000"
    assert topic in await kafka_log.list_topics()

    await kafka_log.delete_topic(topic)
    assert topic not in await kafka_log.list_topics()
    with pytest.raises(TopicNotFound):
        await kafka_log.describe_topic(topic)
    with pytest.raises(TopicNotFound):
        await kafka_log.delete_topic(topic)
    # the name is free again at once
    again = await kafka_log.create_topic(topic, 1, -1, {})  # the controller's default factor: 1
    assert len(again.partitions) == 1 and again.replication_factor == 1


async def test_creating_an_existing_topic_is_topic_exists(kafka_log: KafkaLog, topic: str) -> None:
    await kafka_log.create_topic(topic, 1, 1, {})
    with pytest.raises(TopicExists):
        await kafka_log.create_topic(topic, 2, 1, {})
    assert len((await kafka_log.describe_topic(topic)).partitions) == 1


async def test_bad_names_counts_and_factors_are_refused_before_kafka_sees_them(kafka_log: KafkaLog) -> None:
    for name in ("", ".", "..", "a/b", "x" * 250, "bad name", "ü"):
        with pytest.raises(InvalidTopic):
            await kafka_log.create_topic(name, 1, 1, {})
        with pytest.raises(InvalidTopic):
            await kafka_log.describe_topic(name)
        with pytest.raises(InvalidTopic):
            await kafka_log.append(TopicPartition(name, 0), values(1))
    for partitions in (0, -1, 10_001):
        with pytest.raises(InvalidTopicConfig):
            await kafka_log.create_topic("fine", partitions, 1, {})
    for factor in (0, -2, 40_000):
        with pytest.raises(InvalidTopicConfig):
            await kafka_log.create_topic("fine", 1, factor, {})
    assert "fine" not in await kafka_log.list_topics()


async def test_internal_topics_are_not_listed(kafka_log: KafkaLog, topic: str) -> None:
    await kafka_log.create_topic(topic, 1, 1, {})
    listed = await kafka_log.list_topics()
    assert topic in listed and not [t for t in listed if t.startswith("__")]


async def test_offsets_earliest_and_latest(kafka_log: KafkaLog, topic: str) -> None:
    await kafka_log.create_topic(topic, 2, 1, {})
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    assert await kafka_log.offsets(tp0) == (0, 0)
    for i in range(3):  # one record per call: one batch each
        await kafka_log.append(tp0, [NewRecord(None, f"r{i}".encode())])
    assert await kafka_log.offsets(tp0) == (0, 3)
    assert await kafka_log.offsets(tp1) == (0, 0)


async def test_latest_offset_after_a_multi_record_batch(kafka_log: KafkaLog, topic: str) -> None:
    """A partition's end offset is past every record of its last batch (ListOffsets latest)."""
    await kafka_log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)
    await kafka_log.append(tp, values(5))
    assert await kafka_log.offsets(tp) == (0, 5)


async def test_offset_for_timestamp(kafka_log: KafkaLog, topic: str) -> None:
    """Seek by time: the first offset whose timestamp is at or after the one asked, none past the last."""
    await kafka_log.create_topic(topic, 1, 1, {})
    tp = TopicPartition(topic, 0)
    for ts in (1000, 2000, 3000):
        await kafka_log.append(tp, [NewRecord(None, b"x", (), ts)])
    assert await kafka_log.offset_for_timestamp(tp, 0) == 0
    assert await kafka_log.offset_for_timestamp(tp, 1500) == 1
    assert await kafka_log.offset_for_timestamp(tp, 3000) == 2
    assert await kafka_log.offset_for_timestamp(tp, 3001) is None


async def test_add_partitions_grows_the_topic(kafka_log: KafkaLog, topic: str) -> None:
    """CreatePartitions: a topic grows, and the new partitions take records at once."""
    await kafka_log.create_topic(topic, 1, 1, {})
    info = await kafka_log.add_partitions(topic, 3)
    assert len(info.partitions) == 3
    assert list(await kafka_log.append(TopicPartition(topic, 2), values(1))) == [0]


async def test_add_partitions_never_shrinks(kafka_log: KafkaLog, topic: str) -> None:
    await kafka_log.create_topic(topic, 2, 1, {})
    for total in (1, 2):
        with pytest.raises(InvalidTopicConfig):
            await kafka_log.add_partitions(topic, total)
    with pytest.raises(TopicNotFound):
        await kafka_log.add_partitions(topic + "-missing", 3)


async def test_invalid_topic_configs_are_refused(kafka_log: KafkaLog, topic: str) -> None:
    """A config Kafka refuses (InvalidConfigurationException) is InvalidTopicConfig, and no topic is made."""
    with pytest.raises(InvalidTopicConfig):
        await kafka_log.create_topic(topic, 1, 1, {"retention.ms": "soon"})
    assert topic not in await kafka_log.list_topics()


async def test_describe_shows_every_effective_config(kafka_log: KafkaLog, topic: str) -> None:
    """A topic's configs are all that apply to it, the broker's defaults too, not only what it set."""
    await kafka_log.create_topic(topic, 1, 1, {})
    configs = (await kafka_log.describe_topic(topic)).configs
    assert {"cleanup.policy", "retention.ms", "max.message.bytes"} <= set(configs)


async def test_topic_limits_from_configs_are_enforced_before_sending(kafka_log: KafkaLog, topic: str) -> None:
    await kafka_log.create_topic(topic, 1, 1, {"max.message.bytes": "2000", "cleanup.policy": "compact"})
    tp = TopicPartition(topic, 0)
    from service.errors import PayloadTooLarge

    with pytest.raises(PayloadTooLarge):
        await kafka_log.append(tp, [NewRecord(b"k", b"x" * 3000)])
    with pytest.raises(InvalidPayload):
        await kafka_log.append(tp, [NewRecord(b"k", b"v"), NewRecord(None, b"no key")])
    many = [NewRecord(b"k%d" % i, b"y" * 300) for i in range(20)]  # 6 KB: several 2 KB batches
    assert list(await kafka_log.append(tp, many)) == list(range(20))


async def test_a_deleted_topic_is_not_brought_back_by_the_producer(kafka_log: KafkaLog, topic: str) -> None:
    # aiokafka's producer refreshes metadata with auto-creation on; a cluster with
    # auto.create.topics.enable=true would make the topic again. After a delete, the producer must
    # forget it.
    await kafka_log.create_topic(topic, 1, 1, {})
    await kafka_log.append(TopicPartition(topic, 0), values(1))
    await kafka_log.delete_topic(topic)
    other = topic + "-other"
    await kafka_log.create_topic(other, 1, 1, {})
    await kafka_log.append(TopicPartition(other, 0), values(1))  # a producer metadata refresh
    assert topic not in await kafka_log.list_topics()
