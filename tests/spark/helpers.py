"""What the Spark tests share: records to write, and a log they write to directly."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from service.adapters.embedded.log import EmbeddedLog
from service.core.models import NewRecord, TopicPartition


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
            await admin.create_topics([NewTopic(topic, partitions, 1)])
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

        producer = AIOKafkaProducer(
            bootstrap_servers=self.url.removeprefix("kafka://"), enable_idempotence=False, acks="all"
        )
        await producer.start()
        try:
            # One record per request: Tansu 0.6 answers ListOffsets(latest) with the last batch's
            # base offset + 1, right only when that batch holds one record.
            for r in batch:
                headers: Any = list(r.headers)
                await producer.send_and_wait(
                    tp.topic,
                    r.value,
                    key=r.key,
                    partition=tp.partition,
                    timestamp_ms=r.timestamp,
                    headers=headers,
                )
        finally:
            await producer.stop()
