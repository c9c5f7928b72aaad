"""Fixtures for the Kafka log tests: one real Tansu broker per session, a started KafkaLog per test.

Tansu 0.6 lacks InitProducerId for idempotent producers, so the log under test
runs with idempotence off (``kafka_idempotence=false``); a strict xfail test
keeps the gap visible. Timeouts are short so that outage tests end quickly.
A failing test gets the broker's log attached to its report.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import pytest

from deploy.local.kafka_broker import TansuBroker
from service.adapters.kafka import KafkaLog

from .helpers import options


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    broker = TansuBroker(tmp_path_factory.mktemp("tansu")).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
async def kafka_log(tansu: TansuBroker) -> AsyncIterator[KafkaLog]:
    log = KafkaLog(tansu.url, options())
    await log.start()
    try:
        yield log
    finally:
        await log.stop()


@pytest.fixture
def topic() -> str:
    return f"k-{uuid.uuid4().hex[:10]}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and not hasattr(report, "wasxfail"):
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, TansuBroker):
                report.sections.append((f"tansu broker log ({value.bootstrap})", value.output()))
