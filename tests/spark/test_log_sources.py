"""The log sources the Spark planner and tasks ask (``spark_jobs.logs.open_log``), without Spark:
what a source opened before a topic was created says of it, and how a task's range is read from
Kafka where its offsets hold no records or no longer exist."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from aiokafka.structs import TopicPartition as KafkaTP

from deploy.local.kafka_broker import KafkaBroker
from service.core.models import TopicPartition
from spark_jobs.kafka_source import KafkaSource
from spark_jobs.logs import open_log
from spark_jobs.offsets import OffsetRange
from tests.spark.helpers import TestLog, records


def test_a_source_sees_topics_and_partitions_created_after_it_opened(log: TestLog) -> None:
    source = open_log(log.url)
    try:
        before = log.create_topic(1)
        assert source.partition_count(before) == 1  # opens the source (its first metadata)
        later = log.create_topic(3)  # created after: a stream's planner keeps its source open
        assert later in source.topics()
        assert source.partition_count(later) == 3
    finally:
        source.close()


# --- a task's range, read from Kafka ----------------------------------------------------------------


def kafka_log(request: pytest.FixtureRequest, tmp_path: Path) -> TestLog:
    broker: KafkaBroker = request.getfixturevalue("kafka_broker")
    return TestLog("kafka", broker.url, tmp_path)


def offsets_read(source: KafkaSource, rng: OffsetRange) -> list[int]:
    return [offset for chunk in source.read(rng) for offset in chunk.offsets]


async def transactions(url: str, topic: str) -> None:
    """3 records committed, 2 aborted, 3 committed: offsets 0-2, marker 3, 4-5, marker 6, 7-9, marker 10."""
    producer = AIOKafkaProducer(
        bootstrap_servers=url.removeprefix("kafka://"), transactional_id=f"tx-{topic}"
    )
    await producer.start()
    try:
        for commit in (True, False, True):
            await producer.begin_transaction()
            for i in range(3 if commit else 2):
                await producer.send_and_wait(topic, f"v{i}".encode(), partition=0)
            await (producer.commit_transaction() if commit else producer.abort_transaction())
    finally:
        await producer.stop()


def test_a_range_ending_in_transaction_markers_ends_and_reads_uncommitted(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    log = kafka_log(request, tmp_path)
    topic = log.create_topic(1)
    asyncio.run(transactions(log.url, topic))
    source = KafkaSource(log.url, timeout_s=10)
    try:
        tp = TopicPartition(topic, 0)
        assert source.bounds([tp]) == {tp: (0, 11)}
        began = time.monotonic()
        # the markers take offsets and hold no record; aborted records are read, as Spark's Kafka
        # source reads them by default (read_uncommitted)
        assert offsets_read(source, OffsetRange(topic, 0, 0, 11)) == [0, 1, 2, 4, 5, 7, 8, 9]
        assert offsets_read(source, OffsetRange(topic, 0, 3, 7)) == [4, 5]
        assert time.monotonic() - began < 5  # never waited out a stall
    finally:
        source.close()


def test_a_range_that_retention_cut_reads_from_the_log_start_and_a_vanished_one_says_so(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    log = kafka_log(request, tmp_path)
    topic = log.create_topic(1)
    log.produce(topic, 0, records(10))

    async def delete_below(offset: int) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=log.url.removeprefix("kafka://"))
        await admin.start()
        try:
            await admin.delete_records({KafkaTP(topic, 0): RecordsToDelete(offset)})
        finally:
            await admin.close()

    asyncio.run(delete_below(4))
    source = KafkaSource(log.url, timeout_s=2)
    try:
        assert offsets_read(source, OffsetRange(topic, 0, 0, 10)) == list(range(4, 10))
        with pytest.raises(
            ValueError, match=rf"{topic}-0 ends at offset 10 now, before the planned range's end 20"
        ):
            offsets_read(source, OffsetRange(topic, 0, 15, 20))
        with pytest.raises(TimeoutError, match=rf"Kafka returned nothing for {topic}-0 at offset 10"):
            offsets_read(source, OffsetRange(topic, 0, 8, 20))  # the end never comes
    finally:
        source.close()
