"""Topic admin, names, configs and lifecycle of the embedded log."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from service.adapters.embedded.log import EmbeddedLog
from service.core.models import TopicPartition
from service.core.ports import Log
from service.errors import (
    BackendError,
    BackendUnavailable,
    InvalidTopic,
    InvalidTopicConfig,
    PartitionNotFound,
    TopicExists,
    TopicNotFound,
)

from .conftest import OpenLog, read_all, values


async def test_implements_the_log_port(open_log: OpenLog) -> None:
    log = await open_log()
    assert isinstance(log, Log)
    brokers = await log.brokers()
    assert [(b.broker_id, b.host, b.port) for b in brokers] == [(0, "localhost", 8082)]


async def test_create_describe_list(open_log: OpenLog) -> None:
    log = await open_log()
    info = await log.create_topic("orders", 3, 1, {"retention.ms": "1000"})
    assert info.name == "orders" and info.replication_factor == 1
    assert [(p.partition, p.leader, p.replicas, p.in_sync) for p in info.partitions] == [
        (0, 0, (0,), (0,)),
        (1, 0, (0,), (0,)),
        (2, 0, (0,), (0,)),
    ]
    assert info.configs["retention.ms"] == "1000"
    assert info.configs["cleanup.policy"] == "delete"
    assert info.configs["segment.bytes"] == str(64 * 1024 * 1024)
    await log.create_topic("a.b-c_D9", 1, -1, {})
    assert await log.list_topics() == ["a.b-c_D9", "orders"]
    assert await log.describe_topic("orders") == info
    with pytest.raises(TopicExists):
        await log.create_topic("orders", 1, 1, {})
    with pytest.raises(TopicNotFound):
        await log.describe_topic("nope")


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a/b", "../escape", "a b", "x" * 250, "tópico", "a\x00b", "a\nb", "~trash", "/abs"],
)
async def test_invalid_topic_names(open_log: OpenLog, data_dir: Path, name: str) -> None:
    log = await open_log()
    with pytest.raises(InvalidTopic):
        await log.create_topic(name, 1, 1, {})
    with pytest.raises(InvalidTopic):
        await log.delete_topic(name)
    assert await log.list_topics() == []
    assert sorted(p.name for p in (data_dir / "topics").iterdir()) == []


async def test_longest_legal_name(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("x" * 249, 1, 1, {})
    assert await log.list_topics() == ["x" * 249]


@pytest.mark.parametrize(
    ("configs", "key"),
    [
        ({"retention.ms": "soon"}, "retention.ms"),
        ({"retention.ms": "-2"}, "retention.ms"),
        ({"retention.bytes": "1.5"}, "retention.bytes"),
        ({"segment.bytes": "0"}, "segment.bytes"),
        ({"segment.bytes": str(2**31)}, "segment.bytes"),
        ({"segment.ms": "0"}, "segment.ms"),
        ({"cleanup.policy": "compact"}, "cleanup.policy"),
        ({"max.message.bytes": "-5"}, "max.message.bytes"),
        ({"compression.type": "gzip"}, "compression.type"),
    ],
)
async def test_invalid_configs_name_the_key(open_log: OpenLog, configs: dict[str, str], key: str) -> None:
    log = await open_log()
    with pytest.raises(InvalidTopicConfig, match=key.replace(".", r"\.")):
        await log.create_topic("t", 1, 1, configs)
    assert await log.list_topics() == []


async def test_partition_and_replication_checks(open_log: OpenLog) -> None:
    log = await open_log()
    with pytest.raises(InvalidTopicConfig, match="partition"):
        await log.create_topic("t", 0, 1, {})
    with pytest.raises(InvalidTopicConfig, match="must be 1"):
        await log.create_topic("t", 1, 3, {})
    with pytest.raises(InvalidTopicConfig, match="must be 1"):
        await log.create_topic("t", 1, 0, {})


async def test_metadata_survives_restart(open_log: OpenLog, data_dir: Path) -> None:
    log = await open_log()
    cid = log.cluster_id
    await log.create_topic("keep", 2, 1, {"retention.bytes": "1000000", "max.message.bytes": "5000"})
    before = await log.describe_topic("keep")
    await log.stop()
    log2 = await open_log(data_dir)
    assert log2.cluster_id == cid and len(cid) == 22
    assert await log2.describe_topic("keep") == before
    assert before.configs["retention.bytes"] == "1000000"


async def test_cluster_ids_differ_between_data_dirs(tmp_path: Path) -> None:
    a = EmbeddedLog(tmp_path / "a").cluster_id
    b = EmbeddedLog(tmp_path / "b").cluster_id
    assert a != b and EmbeddedLog(tmp_path / "a").cluster_id == a


async def test_delete_is_durable(open_log: OpenLog, data_dir: Path) -> None:
    log = await open_log()
    await log.create_topic("gone", 2, 1, {})
    await log.create_topic("stays", 1, 1, {})
    await log.append(TopicPartition("gone", 0), values(3))
    await log.delete_topic("gone")
    assert await log.list_topics() == ["stays"]
    with pytest.raises(TopicNotFound):
        await log.append(TopicPartition("gone", 0), values(1))
    with pytest.raises(TopicNotFound):
        await log.delete_topic("gone")
    assert not (data_dir / "topics" / "gone").exists()
    await log.stop()
    log2 = await open_log(data_dir)
    assert await log2.list_topics() == ["stays"]
    # The name is free again, and the new topic starts empty.
    await log2.create_topic("gone", 1, 1, {})
    assert await log2.offsets(TopicPartition("gone", 0)) == (0, 0)


async def test_leftovers_of_a_crash_mid_create_or_delete_are_cleaned(
    open_log: OpenLog, data_dir: Path
) -> None:
    log = await open_log()
    await log.create_topic("t", 1, 1, {})
    await log.stop()
    (data_dir / "topics.staging" / "half~abc" / "0").mkdir(parents=True)
    (data_dir / "topics.trash" / "old~def" / "0").mkdir(parents=True)
    (data_dir / "topics" / "no-meta").mkdir()  # not a topic: ignored, not deleted
    log2 = await open_log(data_dir)
    assert await log2.list_topics() == ["t"]
    assert list((data_dir / "topics.staging").iterdir()) == []
    assert list((data_dir / "topics.trash").iterdir()) == []
    assert (data_dir / "topics" / "no-meta").exists()


async def test_add_partitions(open_log: OpenLog, data_dir: Path) -> None:
    log = await open_log()
    await log.create_topic("grow", 1, 1, {})
    await log.append(TopicPartition("grow", 0), values(2))
    info = await log.add_partitions("grow", 3)
    assert len(info.partitions) == 3
    assert await log.append(TopicPartition("grow", 2), values(1)) == range(0, 1)
    for total in (3, 2):
        with pytest.raises(InvalidTopicConfig, match="only grow"):
            await log.add_partitions("grow", total)
    with pytest.raises(TopicNotFound):
        await log.add_partitions("nope", 5)
    await log.stop()
    log2 = await open_log(data_dir)
    assert len((await log2.describe_topic("grow")).partitions) == 3
    assert [r.value for r in await read_all(log2, TopicPartition("grow", 0))] == [b"v0", b"v1"]
    assert [r.value for r in await read_all(log2, TopicPartition("grow", 2))] == [b"v0"]


async def test_unknown_topic_and_partition(open_log: OpenLog) -> None:
    log = await open_log()
    await log.create_topic("t", 2, 1, {})
    for call in (
        lambda tp: log.append(tp, values(1)),
        lambda tp: log.fetch({tp: 0}, max_bytes=100, max_wait_ms=0),
        log.offsets,
        lambda tp: log.offset_for_timestamp(tp, 0),
    ):
        with pytest.raises(TopicNotFound):
            await call(TopicPartition("missing", 0))
        with pytest.raises(PartitionNotFound):
            await call(TopicPartition("t", 2))
        with pytest.raises(PartitionNotFound):
            await call(TopicPartition("t", -1))


async def test_lifecycle(data_dir: Path) -> None:
    log = EmbeddedLog(data_dir)
    with pytest.raises(BackendUnavailable):
        await log.list_topics()
    async with log:
        await log.create_topic("t", 1, 1, {})
        other = EmbeddedLog(data_dir)
        with pytest.raises(BackendError, match="in use"):
            await other.start()
    await log.stop()  # idempotent
    await other.start()  # a failed start can be retried
    await other.stop()
    await asyncio.gather(log.stop(), log.stop())
    with pytest.raises(BackendUnavailable):
        await log.append(TopicPartition("t", 0), values(1))
    async with EmbeddedLog(data_dir) as again:  # the lock was released
        assert await again.list_topics() == ["t"]


async def test_constructor_rejects_nonsense(data_dir: Path) -> None:
    with pytest.raises(ValueError):
        EmbeddedLog(data_dir, flush="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        EmbeddedLog(data_dir, segment_bytes=0)
