"""Fixtures for the embedded log tests: real files under tmp_path, an injectable clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from service.adapters.embedded.log import EmbeddedLog
from service.adapters.embedded.log.segment import Segment
from service.core.models import NewRecord, Record, TopicPartition

T0 = 1_700_000_000.0  # seconds; a fixed "now" for tests that inject the clock


class Clock:
    """A clock the test moves by hand (``EmbeddedLog(clock=...)`` takes seconds, like time.time)."""

    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: int) -> None:
        self.now += ms / 1000

    @property
    def ms(self) -> int:
        return int(self.now * 1000)


OpenLog = Callable[..., Awaitable[EmbeddedLog]]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
async def open_log(data_dir: Path) -> AsyncIterator[OpenLog]:
    """Start an EmbeddedLog (default: on ``data_dir``); every one started is stopped after the test."""
    started: list[EmbeddedLog] = []

    async def factory(path: Path | None = None, **kwargs: Any) -> EmbeddedLog:
        log = EmbeddedLog(path or data_dir, **kwargs)
        await log.start()
        started.append(log)
        return log

    yield factory
    for log in started:
        await log.stop()


def values(n: int, *, start: int = 0, size: int = 0, prefix: str = "v") -> list[NewRecord]:
    """``n`` records whose values name their index (padded to ``size`` bytes)."""
    return [NewRecord(None, f"{prefix}{i}".encode().ljust(size, b".")) for i in range(start, start + n)]


async def read_all(log: EmbeddedLog, tp: TopicPartition, start: int | None = None) -> list[Record]:
    """Every record from ``start`` (default: the log start) to the end, by repeated fetches."""
    pos = (await log.offsets(tp))[0] if start is None else start
    out: list[Record] = []
    while True:
        data = (await log.fetch({tp: pos}, max_bytes=1 << 20, max_wait_ms=0))[tp]
        if not data.records:
            return out
        out.extend(data.records)
        pos = data.records[-1].offset + 1


def segments_of(log: EmbeddedLog, tp: TopicPartition) -> tuple[Segment, ...]:
    """The live segments of a partition (white box: roll and retention tests count them)."""
    return log._topics[tp.topic].partitions[tp.partition].segments
