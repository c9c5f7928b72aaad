"""Helpers the Kafka log tests share: the log's test options, records to write, reading back."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deploy.local.kafka_broker import TansuBroker
from service.adapters.kafka import KafkaLog
from service.adapters.kafka.options import KafkaOptions
from service.core.models import NewRecord, Record, TopicPartition

BROKER_LACKS_IT = "broker lacks it"


def options(**overrides: Any) -> KafkaOptions:
    """The options tests run the log with (Tansu cannot do idempotence)."""
    base: dict[str, Any] = {"idempotence": False, "request_timeout_ms": 5_000, "client_id": "brokergate-test"}
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


class SecuredTansu(TansuBroker):
    """A Tansu broker with extra flags (and its listener's scheme); ready when it takes a TCP
    connection, since a Metadata request without signing in is refused."""

    def __init__(self, workdir: Path, flags: list[str], *, scheme: str = "tcp") -> None:
        super().__init__(workdir)
        self.flags = flags
        self.scheme = scheme

    def command(self) -> list[str]:
        command = super().command()
        listener = command.index("--listener-url") + 1
        command[listener] = command[listener].replace("tcp://", f"{self.scheme}://", 1)
        return [*command, *self.flags]

    def _probe(self, timeout: float) -> None:
        socket.create_connection(("127.0.0.1", self.port), timeout=timeout).close()


@contextmanager
def authenticating_broker(workdir: Path) -> Iterator[SecuredTansu]:
    """A Tansu broker that wants SASL before anything else (and, having no users, refuses every
    credential), running until the block ends."""
    broker = SecuredTansu(workdir, ["--authentication"])
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
