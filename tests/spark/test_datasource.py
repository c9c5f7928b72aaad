"""The ``brokergate`` data source on a real local[2] Spark, over the embedded log and the Kafka log."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from deploy.local.kafka_broker import KafkaBroker
from service.adapters.embedded.log import EmbeddedLog
from service.adapters.kafka import KafkaLog
from service.adapters.kafka.options import KafkaOptions
from service.core.models import NewRecord, TopicPartition

from .helpers import TestLog, records


def read(spark: SparkSession, log_url: str, topic: str, **options: Any) -> DataFrame:
    reader = spark.read.format("brokergate").option("log", log_url).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def offsets(frame: DataFrame) -> list[tuple[int, int]]:
    return sorted((r["partition"], r["offset"]) for r in frame.select("partition", "offset").collect())


def test_every_record_with_its_columns(spark: SparkSession, log: TestLog) -> None:
    topic = log.create_topic(2)
    log.produce(topic, 0, records(6))
    log.produce(topic, 1, [NewRecord(None, b"", (), 1_700_000_000_000)])
    frame = read(spark, log.url, topic)
    assert frame.columns == ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]
    rows = sorted(frame.collect(), key=lambda r: (r["partition"], r["offset"]))
    assert [(r["partition"], r["offset"]) for r in rows] == [(0, i) for i in range(6)] + [(1, 0)]
    first = rows[1]
    assert first["topic"] == topic
    assert (bytes(first["key"]), bytes(first["value"])) == (b"k1", b"v1")
    assert [(h["key"], bytes(h["value"])) for h in first["headers"]] == [("n", b"1")]
    millis = frame.where("partition = 0 and offset = 1").select(F.unix_millis("timestamp")).first()
    assert millis is not None and millis[0] == 1_700_000_001_000
    keyless = rows[-1]
    assert keyless["key"] is None and bytes(keyless["value"]) == b"" and keyless["headers"] == []


def test_large_ranges_are_read_by_several_tasks(spark: SparkSession, log: TestLog) -> None:
    topic = log.create_topic(2)
    log.produce(topic, 0, records(20))
    log.produce(topic, 1, records(5))
    frame = read(spark, log.url, topic, maxRecordsPerPartition=7)
    assert frame.rdd.getNumPartitions() == 3 + 1
    assert offsets(frame) == [(0, i) for i in range(20)] + [(1, i) for i in range(5)]


def test_offset_specs_bound_the_read(spark: SparkSession, log: TestLog) -> None:
    topic = log.create_topic(2)
    log.produce(topic, 0, records(10))
    log.produce(topic, 1, records(4))
    json_start = f'{{"{topic}": {{"0": 7, "1": -1}}}}'
    assert offsets(read(spark, log.url, topic, startingOffsets=json_start)) == [(0, 7), (0, 8), (0, 9)]
    json_end = f'{{"{topic}": {{"0": 2}}}}'
    assert offsets(read(spark, log.url, topic, endingOffsets=json_end)) == [(0, 0), (0, 1)] + [
        (1, i) for i in range(4)
    ]
    assert offsets(read(spark, log.url, topic, startingOffsets="latest")) == []
    # Beyond the end no record is, and the read fails as Spark's Kafka source's does (docs/spark.md).
    with pytest.raises(Exception, match=rf"startingOffsets: {topic}-0 is given offset 99, past its log end"):
        offsets(read(spark, log.url, topic, startingOffsets=f'{{"{topic}": {{"0": 99}}}}'))


def test_topic_lists_and_patterns(spark: SparkSession, log: TestLog) -> None:
    first, second = log.create_topic(1), log.create_topic(1)
    log.produce(first, 0, records(2))
    log.produce(second, 0, records(3))
    listed = read(spark, log.url, f"{first}, {second}").groupBy("topic").count().collect()
    assert {r["topic"]: r["count"] for r in listed} == {first: 2, second: 3}
    pattern = read(spark, log.url, f"({first}|{second})").select("topic").distinct().collect()
    assert {r["topic"] for r in pattern} == {first, second}
    assert read(spark, log.url, "nothing-matches-.*").count() == 0


def test_an_unknown_topic_fails_planning_with_its_name(spark: SparkSession, log: TestLog) -> None:
    with pytest.raises(PySparkException, match="no such topic: missing-topic"):
        read(spark, log.url, "missing-topic").collect()


def test_reading_while_the_gateway_log_appends(spark: SparkSession, tmp_path: Path) -> None:
    """A running embedded log holds its data dir's lock and keeps appending; reads see whole batches."""
    data = tmp_path / "data"
    stop = threading.Event()
    started = threading.Event()
    written: list[int] = []

    async def writer() -> None:
        log = EmbeddedLog(data)
        await log.start()
        try:
            await log.create_topic("live", 1, 1, {})
            started.set()
            while not stop.is_set():
                base = len(written) * 10
                await log.append(TopicPartition("live", 0), records(10, start=base))
                written.append(base)
                await asyncio.sleep(0.005)
        finally:
            await log.stop()

    thread = threading.Thread(target=asyncio.run, args=(writer(),))
    thread.start()
    try:
        assert started.wait(30)
        seen = []
        for _ in range(3):
            rows = read(spark, str(data), "live").select("offset", "value").collect()
            got = sorted((r["offset"], bytes(r["value"])) for r in rows)
            assert got == [(i, f"v{i}".encode()) for i in range(len(got))]  # dense, no torn batch
            assert len(got) % 10 == 0  # whole batches only
            seen.append(len(got))
    finally:
        stop.set()
        thread.join(30)
    assert seen == sorted(seen) and seen[-1] > 0


def test_records_written_as_one_kafka_batch_are_all_read(
    spark: SparkSession, kafka_broker: KafkaBroker
) -> None:
    """The end of a Kafka read is the partition's latest offset (ListOffsets latest), past every
    record of a batch of several that the gateway's idempotent producer wrote."""
    log = TestLog("kafka", kafka_broker.url, Path())
    topic = log.create_topic(1)

    async def append() -> None:
        async with KafkaLog(kafka_broker.url, KafkaOptions()) as kafka:
            await kafka.append(TopicPartition(topic, 0), records(5))

    asyncio.run(append())
    assert offsets(read(spark, log.url, topic)) == [(0, i) for i in range(5)]
