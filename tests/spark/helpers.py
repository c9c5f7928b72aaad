"""What the Spark tests share: records to write, a log they write to directly, its schema registry,
and a job run in the suite's session."""

from __future__ import annotations

import asyncio
import io
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.adapters.embedded.log import EmbeddedLog
from service.core.models import NewRecord, TopicPartition
from service.core.schemas.formats import parse
from service.core.schemas.model import JSON, Schema, SchemaType
from service.core.schemas.registry import SchemaRegistry
from service.core.schemas.wire import frame
from spark_jobs.__main__ import JOBS, parser
from spark_jobs.progress import Progress

NO_RETENTION = {"retention.ms": "-1"}


def records(n: int, *, start: int = 0, ts: int = 1_700_000_000_000, step_ms: int = 1000) -> list[NewRecord]:
    """``n`` records whose value names their index (keys cycle through k0..k4; one header each)."""
    return [
        NewRecord(f"k{i % 5}".encode(), f"v{i}".encode(), (("n", str(i).encode()),), ts + i * step_ms)
        for i in range(start, start + n)
    ]


class TestLog:
    """A log tests write to directly (not through a gateway): its URL is what the jobs read."""

    __test__ = False

    def __init__(self, kind: str, url: str, tmp: Path) -> None:
        self.kind = kind
        self.url = url
        self.tmp = tmp

    def create_topic(self, partitions: int = 1) -> str:
        topic = f"t-{uuid.uuid4().hex[:10]}"
        asyncio.run(self._create(topic, partitions))
        return topic

    def produce(self, topic: str, partition: int, batch: Sequence[NewRecord]) -> None:
        asyncio.run(self._produce(TopicPartition(topic, partition), batch))

    async def _create(self, topic: str, partitions: int) -> None:
        if self.kind == "embedded":
            log = EmbeddedLog(Path(self.url))
            await log.start()
            try:
                await log.create_topic(topic, partitions, 1, {})
            finally:
                await log.stop()
            return
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        admin = AIOKafkaAdminClient(bootstrap_servers=self.url.removeprefix("kafka://"))
        await admin.start()
        try:
            # The records' times are of 2023: Kafka's time retention (7 days) would delete them
            await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=NO_RETENTION)])
            # The controller answered; the broker learns of the topic from the metadata log a moment
            # later. A test that asks right away must find it, as a planner asking later would.
            deadline = time.monotonic() + 10
            while True:
                (described,) = await admin.describe_topics([topic])
                if described["error_code"] == 0 and len(described["partitions"]) == partitions:
                    break
                assert time.monotonic() < deadline, f"{topic} not in the broker's metadata after 10 s"
                await asyncio.sleep(0.02)
        finally:
            await admin.close()

    async def _produce(self, tp: TopicPartition, batch: Sequence[NewRecord]) -> None:
        if self.kind == "embedded":
            log = EmbeddedLog(Path(self.url))
            await log.start()
            try:
                await log.append(tp, batch)
            finally:
                await log.stop()
            return
        from aiokafka import AIOKafkaProducer

        # Kafka's own clients' defaults: an idempotent producer, acks=all
        producer = AIOKafkaProducer(
            bootstrap_servers=self.url.removeprefix("kafka://"), enable_idempotence=True, acks="all"
        )
        await producer.start()
        try:
            sent = []
            for r in batch:
                headers: Any = list(r.headers)
                sent.append(
                    await producer.send(
                        tp.topic,
                        r.value,
                        key=r.key,
                        partition=tp.partition,
                        timestamp_ms=r.timestamp,
                        headers=headers,
                    )
                )
            await asyncio.gather(*sent)
        finally:
            await producer.stop()


class TestRegistry:
    """The embedded schema registry over a ``TestLog``'s data dir, as a gateway on it would run it:
    its records in the log's ``_schemas`` topic, its lock the data dir's embedded coordinator."""

    __test__ = False

    def __init__(self, log: TestLog) -> None:
        assert log.kind == "embedded", "the Kafka tests register through a gateway"
        self.data_dir = Path(log.url)
        self.schemas: dict[int, Schema] = {}

    def register(self, subject: str, kind: SchemaType, text: str) -> int:
        """The id of ``text`` registered under ``subject`` (the registry's compatibility checks apply)."""
        schema = Schema(kind, text)
        schema_id = asyncio.run(self._register(subject, schema))
        self.schemas[schema_id] = schema
        return schema_id

    async def _register(self, subject: str, schema: Schema) -> int:
        log, coordinator = EmbeddedLog(self.data_dir), EmbeddedCoordinator(self.data_dir)
        await log.start()
        await coordinator.start()
        registry = SchemaRegistry(log, coordinator)
        await registry.start()
        try:
            schema_id, _ = await registry.register(subject, schema)
            return schema_id
        finally:
            await registry.stop()
            await coordinator.stop()
            await log.stop()

    def framed(self, schema_id: int, value: JSON) -> bytes:
        """``value`` (JSON as the REST API takes it for the schema's format) in the wire format."""
        return frame(schema_id, parse(self.schemas[schema_id], {}).codec().encode(value))


def in_this_thread(spark: SparkSession) -> SparkSession:
    """``spark``, made this thread's active session: Spark looks a Python data source up in it (a
    JVM thread-local), and a test runs Spark in a worker thread beside a gateway's event loop."""
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)  # type: ignore[union-attr]
    return spark


def run_job(spark: SparkSession, words: list[str]) -> str:
    """Run ``python -m spark_jobs …`` (``words`` after the module) in the suite's session, from any
    thread; its summary."""
    in_this_thread(spark)
    args = parser().parse_args(words)
    job = JOBS[args.job]
    out = io.StringIO()
    job.run(spark, job.options_from(args), Progress(args.job, out=io.StringIO(), summary_out=out))
    return out.getvalue()
