"""The three-broker cluster the failure tests share, started once for the module.

Each test leaves it whole (every node running, none frozen) for the next, and a failing test
gets the tail of every node's log attached to its report.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import pytest

from deploy.local.kafka_cluster import KafkaCluster


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with KafkaCluster(tmp_path_factory.mktemp("kafka-cluster")) as cluster:
        yield cluster


@pytest.fixture
def cluster(kafka_cluster: KafkaCluster) -> Iterator[KafkaCluster]:
    """The module's cluster, whole again after the test whatever it did to it."""
    yield kafka_cluster
    kafka_cluster.start_all()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, KafkaCluster):
                report.sections.append(("kafka cluster logs", value.output()))
                break
