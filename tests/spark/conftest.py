"""Fixtures of the Spark suite: one local[2] SparkSession for the whole run, logs to read from.

Spark starts once per session (a JVM start costs seconds), binds to 127.0.0.1
and keeps its scratch files under pytest's temporary directory. Spark's own Kafka
source is on its class path (``spark.jars``: the jars of ``deploy.jars`` that pyspark
does not ship), so a test can read a topic with ``format("kafka")`` beside
``format("brokergate")``. ``logs`` gives each test a ``TestLog`` on the embedded log (a
data dir of its own) or on the Kafka log (the session's Apache Kafka broker, topics unique
per test), so the same test runs over both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from deploy.jars import spark_kafka_jars
from deploy.local.kafka_broker import KafkaBroker
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
            # Spark's own Kafka source, from jars resolved once (spark.jars.packages would need Ivy
            # and the network at every start)
            "spark.jars": ",".join(str(jar) for jar in spark_kafka_jars()),
            # C1 only and the serial collector: a faster JVM start, and the tests are short
            "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={scratch} {FAST_START_JVM}",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(params=LOGS)
def log(request: pytest.FixtureRequest, tmp_path: Path) -> TestLog:
    """The same test over the embedded log and over the Kafka log."""
    if request.param == "embedded":
        data = tmp_path / "data"
        (data / "topics").mkdir(parents=True)
        return TestLog("embedded", str(data), tmp_path)
    broker: KafkaBroker = request.getfixturevalue("kafka_broker")
    return TestLog("kafka", broker.url, tmp_path)
