"""Helpers the Kafka log tests share: the log's test options, records to write, reading back."""

from __future__ import annotations

from typing import Any

from service.adapters.kafka import KafkaLog
from service.adapters.kafka.options import KafkaOptions
from service.core.models import NewRecord, Record, TopicPartition


def options(**overrides: Any) -> KafkaOptions:
    """The options tests run the log with: Kafka's defaults, a short request timeout."""
    base: dict[str, Any] = {"request_timeout_ms": 5_000, "client_id": "brokergate-test"}
    return KafkaOptions(**{**base, **overrides})


def values(n: int, *, size: int = 0, prefix: str = "v") -> list[NewRecord]:
    """``n`` keyless records whose values name their index (padded to ``size`` bytes)."""
    return [NewRecord(None, f"{prefix}{i}".encode().ljust(size, b".")) for i in range(n)]


async def read_all(
    log: KafkaLog, tp: TopicPartition, start: int = 0, *, max_bytes: int = 1 << 20
) -> list[Record]:
    """Every record from ``start`` to the current end, by repeated fetches."""
    end = (await log.fetch({tp: start}, max_bytes=1, max_wait_ms=0))[tp].high_watermark
    out: list[Record] = []
    pos = start
    while pos < end:
        data = (await log.fetch({tp: pos}, max_bytes=max_bytes, max_wait_ms=1000))[tp]
        if not data.records:
            break
        out.extend(data.records)
        pos = data.records[-1].offset + 1
    return out
