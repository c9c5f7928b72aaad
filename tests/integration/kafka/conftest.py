"""Fixtures for the Kafka log tests: the session's Apache Kafka broker, a started KafkaLog per test.

The log runs with Kafka's client defaults (idempotent producer, acks=all) and a short request
timeout, so that a test that fails does so quickly. Tests keep apart by their own topic names;
those that freeze, kill or restart a broker start one of their own, once per module. A failing
test gets the log of every broker it used attached to its report.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Generator
from typing import Any

import pytest

from deploy.local.kafka_broker import KafkaBroker, KafkaNode
from service.adapters.kafka import KafkaLog

from .helpers import options

LOG_LINES = 400  # the session broker's log is the whole run's: its end is what a failure shows


@pytest.fixture
async def kafka_log(kafka_broker: KafkaBroker) -> AsyncIterator[KafkaLog]:
    log = KafkaLog(kafka_broker.url, options())
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
            if isinstance(value, KafkaNode):
                report.sections.append((f"kafka broker log ({value.bootstrap})", value.output(LOG_LINES)))
