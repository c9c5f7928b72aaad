"""Fixtures for the tests that hold the gateway against Kafka's own command-line tools: a gateway
on the session's broker, and the tools' common arguments."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from deploy.local.kafka_broker import KafkaBroker
from tests.conftest import RunningGateway, kafka_settings, running_gateway


@pytest.fixture
async def kafka_gateway(tmp_path: Path, kafka_broker: KafkaBroker) -> AsyncIterator[RunningGateway]:
    """A gateway whose log is the session's Kafka broker (embedded coordinator and sessions)."""
    async with running_gateway(tmp_path / "data", **kafka_settings(kafka_broker)) as gw:
        yield gw
