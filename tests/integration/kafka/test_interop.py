"""KafkaLog speaks plain Kafka: native clients read what it writes and it reads what they write."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as KafkaTP

from deploy.local.kafka_broker import KafkaBroker
from service.adapters.kafka import KafkaLog
from service.core.models import NewRecord, TopicPartition

from .helpers import read_all


async def test_a_plain_consumer_reads_what_kafka_log_appended(
    kafka_log: KafkaLog, kafka_broker: KafkaBroker, topic: str
) -> None:
    await kafka_log.create_topic(topic, 2, 1, {})
    sent = {
        0: [
            NewRecord(b"k0", b"v0", (("h", b"1"), ("null", None)), 1_700_000_000_000),
            NewRecord(None, b"v1", (), 1_700_000_000_001),
        ],
        1: [NewRecord(b"k2", None, (("a", b""),), 1_700_000_000_002)],
    }
    for partition, records in sent.items():
        await kafka_log.append(TopicPartition(topic, partition), records)

    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([KafkaTP(topic, 0), KafkaTP(topic, 1)])
        await consumer.seek_to_beginning()
        got: dict[int, list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]]] = {
            0: [],
            1: [],
        }
        async with asyncio.timeout(10):
            while sum(map(len, got.values())) < 3:
                batch = await consumer.getmany(timeout_ms=500)
                for ktp, messages in batch.items():
                    for m in messages:
                        got[ktp.partition].append((m.key, m.value, tuple(m.headers), m.timestamp))
    finally:
        await consumer.stop()
    for partition, records in sent.items():
        assert got[partition] == [(r.key, r.value, r.headers, r.timestamp) for r in records]


async def test_kafka_log_reads_what_a_plain_producer_sent(
    kafka_log: KafkaLog, kafka_broker: KafkaBroker, topic: str
) -> None:
    await kafka_log.create_topic(topic, 1, 1, {})
    producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    await producer.start()
    try:
        first = await producer.send_and_wait(
            topic, b"one", key=b"k", partition=0, timestamp_ms=1_650_000_000_000, headers=[("x", b"y")]
        )
        futures = [await producer.send(topic, f"n{i}".encode(), partition=0) for i in range(20)]
        await producer.send_and_wait(topic, None, key=b"gone", partition=0)
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    records = await read_all(kafka_log, TopicPartition(topic, 0), max_bytes=30)
    assert first.offset == 0 and [r.offset for r in records] == list(range(22))
    head = records[0]
    assert (head.key, head.value, head.headers, head.timestamp) == (
        b"k",
        b"one",
        (("x", b"y"),),
        1_650_000_000_000,
    )
    assert [r.value for r in records[1:21]] == [f"n{i}".encode() for i in range(20)]
    assert (records[21].key, records[21].value) == (b"gone", None)
