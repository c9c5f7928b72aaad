"""Fixtures of the Spark suite: one local[2] SparkSession for the whole run, logs to read from.

Spark starts once per session (a JVM start costs seconds), binds to 127.0.0.1
and keeps its scratch files under pytest's temporary directory. ``logs`` gives
each test a ``TestLog`` on the embedded log (a data dir of its own) or on the
Kafka log (one Tansu broker per session, topics unique per test), so the same
test runs over both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from deploy.local.kafka_broker import TansuBroker
from spark_jobs.session import build_session

from .helpers import TestLog

LOGS = ["embedded", "kafka"]
FAST_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    scratch = tmp_path_factory.mktemp("spark")
    session = build_session(
        "brokergate-tests",
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.local.dir": str(scratch / "local"),
            "spark.sql.warehouse.dir": str(scratch / "warehouse"),
            "spark.sql.shuffle.partitions": "2",
            # C1 only and the serial collector: a faster JVM start, and the tests are short
            "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={scratch} {FAST_START_JVM}",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    with TansuBroker(tmp_path_factory.mktemp("tansu")) as broker:
        yield broker


@pytest.fixture(params=LOGS)
def log(request: pytest.FixtureRequest, tmp_path: Path) -> TestLog:
    """The same test over the embedded log and over the Kafka log."""
    if request.param == "embedded":
        data = tmp_path / "data"
        (data / "topics").mkdir(parents=True)
        return TestLog("embedded", str(data), tmp_path)
    broker: TansuBroker = request.getfixturevalue("spark_tansu")
    return TestLog("kafka", broker.url, tmp_path)
