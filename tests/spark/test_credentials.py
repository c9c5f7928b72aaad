"""The gateway's backend credentials in the data source and the jobs: ZooKeeper digest, Kafka SASL and TLS.

A ZooKeeper coordinator with digest credentials that is not world-readable lets nobody else read
its offsets: the data source's ``committed:<group>`` and the lag job read them here through a real
ZooKeeper, signed in with the options, the flags or the gateway's own environment variables.
Tansu started with ``--authentication`` wants SASL first and, having no users, refuses every
credential: what is proven for real is that the options reach aiokafka (the refusal names the
identity they gave, never the secret); the round trip itself is a strict xfail, as in the Kafka
log's own tests (``tests/integration/kafka/test_security.py``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from deploy.local.zookeeper_server import ZooKeeperServer
from service.adapters.kafka import KafkaLog
from service.adapters.kafka.options import KafkaOptions
from service.adapters.kafka.security import KafkaSecurity
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.adapters.zookeeper.security import DigestCredentials
from service.core.models import TopicPartition
from spark_jobs.credentials import BackendCredentials
from spark_jobs.offsets import OptionError
from spark_jobs.plan import SourceOptions
from tests.integration.kafka.helpers import BROKER_LACKS_IT, SecuredTansu, authenticating_broker

from .helpers import TestLog, records

ZK_USER, ZK_PASSWORD = "brokergate", "zk-secret-7c1"
KAFKA_USER, KAFKA_PASSWORD = "alice", "kafka-secret-93b"
SCRAM_OPTIONS = {
    "kafkaSecurityProtocol": "SASL_PLAINTEXT",
    "kafkaSaslMechanism": "SCRAM-SHA-256",
    "kafkaSaslUsername": KAFKA_USER,
    "kafkaSaslPassword": KAFKA_PASSWORD,
}


def read(spark: SparkSession, log: str, topic: str, **options: str) -> DataFrame:
    return spark.read.format("brokergate").option("log", log).option("topic", topic).options(**options).load()


def run_job(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m spark_jobs …`` in an environment of no gateway settings but ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BROKERGATE_")}
    return subprocess.run(
        [sys.executable, "-m", "spark_jobs", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **(env or {})},
    )


# --- the options, checked as the gateway checks its settings --------------------------------------


def test_credential_options_are_checked_as_the_gateways_settings_are(tmp_path: Path) -> None:
    def refused(**options: str) -> str:
        with pytest.raises(OptionError) as caught:
            SourceOptions.parse({"log": "kafka://k:9092", "topic": "t", **options})
        assert "secret" not in str(caught.value)
        return str(caught.value)

    assert refused(kafkaSecurityProtocol="SASL_PLAINTEXT") == (
        "kafkaSecurityProtocol SASL_PLAINTEXT needs kafkaSaslMechanism "
        "(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)"
    )
    assert refused(kafkaSaslMechanism="PLAIN", kafkaSaslUsername="u", kafkaSaslPassword="secret") == (
        "kafkaSaslMechanism, kafkaSaslUsername, kafkaSaslPassword set, but kafkaSecurityProtocol "
        "PLAINTEXT does not use SASL; use SASL_PLAINTEXT or SASL_SSL"
    )
    assert refused(kafkaSecurityProtocol="ssl", kafkaSslCaFile=str(tmp_path / "none.pem")) == (
        f"kafkaSslCaFile: cannot load CA certificates from '{tmp_path / 'none.pem'}' "
        "(No such file or directory)"
    )
    assert refused(zookeeperUsername="u") == (
        "ZooKeeper digest credentials need both zookeeperUsername and zookeeperPassword "
        "(or zookeeperPasswordFile)"
    )
    assert refused(zookeeperUsername="u", zookeeperPassword="secret", zookeeperPasswordFile="f") == (
        "set zookeeperPassword or zookeeperPasswordFile, not both"
    )

    password_file = tmp_path / "zk-password"
    password_file.write_text(ZK_PASSWORD + "\n")
    options = SourceOptions.parse(
        {
            "log": "kafka://k:9092",
            "topic": "t",
            **{k.lower(): v for k, v in SCRAM_OPTIONS.items()},  # Spark's keys come in any case
            "kafkasecurityprotocol": "sasl_plaintext",
            "ZOOKEEPERUSERNAME": ZK_USER,
            "zookeeperPasswordFile": str(password_file),
        }
    )
    assert options.credentials == BackendCredentials(
        KafkaSecurity("SASL_PLAINTEXT", "SCRAM-SHA-256", KAFKA_USER, KAFKA_PASSWORD),
        DigestCredentials(ZK_USER, ZK_PASSWORD),
    )
    # what the jobs hand the data source says the same; the repr shows no secret
    assert BackendCredentials.parse({k.lower(): v for k, v in options.credentials.as_options().items()}) == (
        options.credentials
    )
    assert KAFKA_PASSWORD not in repr(options) and ZK_PASSWORD not in repr(options)


def test_job_flags_and_the_gateways_environment_are_named_as_given() -> None:
    bad = run_job(
        "lag",
        "--kafka-security-protocol",
        "SASL_SSL",
        env={"BROKERGATE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "BROKERGATE_KAFKA_SASL_USERNAME": "u"},
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "spark_jobs: error: BROKERGATE_KAFKA_SASL_MECHANISM SCRAM-SHA-512 needs "
        "BROKERGATE_KAFKA_SASL_USERNAME and BROKERGATE_KAFKA_SASL_PASSWORD (or --kafka-sasl-password-file)"
    ]
    helped = run_job("stats", "--help")
    assert "--kafka-sasl-password-file" in helped.stdout and "--zookeeper-username" in helped.stdout
    assert "--kafka-sasl-password " not in helped.stdout  # a secret never goes on a command line


# --- ZooKeeper with digest auth -------------------------------------------------------------------


@dataclass
class Committed:
    log: TestLog
    coordinator: str
    topic: str
    group: str


@pytest.fixture
def committed(zookeeper: ZooKeeperServer, tmp_path: Path) -> Committed:
    """A topic of 2 x 5 records in a data dir; a group committed 3 on partition 0 in a ZooKeeper
    coordinator whose znodes only its digest identity may read."""
    data = tmp_path / "data"
    (data / "topics").mkdir(parents=True)
    log = TestLog("embedded", str(data), tmp_path)
    topic = log.create_topic(2)
    for partition in (0, 1):
        log.produce(topic, partition, records(5))
    url, group = f"{zookeeper.url}/t-{uuid.uuid4().hex[:12]}", f"billing-{topic}"

    async def commit() -> None:
        coordinator = ZooKeeperCoordinator(
            url, node_id="t", credentials=DigestCredentials(ZK_USER, ZK_PASSWORD, world_readable=False)
        )
        await coordinator.start()
        try:
            await coordinator.commit(group, {TopicPartition(topic, 0): 3})
        finally:
            await coordinator.stop()

    asyncio.run(commit())
    return Committed(log, url, topic, group)


def test_the_source_reads_committed_offsets_through_a_digest_protected_zookeeper(
    spark: SparkSession, committed: Committed
) -> None:
    def offsets(**options: str) -> list[tuple[int, int]]:
        frame = read(
            spark,
            committed.log.url,
            committed.topic,
            coordinator=committed.coordinator,
            startingOffsets=f"committed:{committed.group}",
            **options,
        )
        return sorted((r["partition"], r["offset"]) for r in frame.select("partition", "offset").collect())

    pending = offsets(zookeeperUsername=ZK_USER, zookeeperPassword=ZK_PASSWORD)
    assert pending == [(0, 3), (0, 4)] + [(1, i) for i in range(5)]

    with pytest.raises(PySparkException) as anonymous:
        offsets()
    assert "refused a read (without credentials): NoAuthError" in str(anonymous.value)
    with pytest.raises(PySparkException) as wrong:
        offsets(zookeeperUsername=ZK_USER, zookeeperPassword="not-it")
    assert f"refused a read (as '{ZK_USER}'): NoAuthError" in str(wrong.value)
    assert "not-it" not in str(wrong.value)


def test_lag_signs_in_to_zookeeper_with_the_gateways_environment(
    committed: Committed, tmp_path: Path
) -> None:
    password_file = tmp_path / "zk-password"
    password_file.write_text(ZK_PASSWORD + "\n")
    args = ("lag", "--log", committed.log.url, "--coordinator", committed.coordinator)
    env = {"BROKERGATE_ZOOKEEPER_USERNAME": ZK_USER, "BROKERGATE_ZOOKEEPER_PASSWORD": ZK_PASSWORD}
    for run in (
        run_job(*args, env=env),
        run_job(*args, "--zookeeper-username", ZK_USER, "--zookeeper-password-file", str(password_file)),
    ):
        assert run.returncode == 0, run.stderr
        table = [line.split() for line in run.stdout.splitlines()]
        assert [committed.group, committed.topic, "0", "3", "5", "2"] in table
        assert [committed.group, committed.topic, "1", "-", "5", "5"] in table
        assert "lag: 7 records behind" in run.stdout
        assert ZK_PASSWORD not in run.stdout + run.stderr

    anonymous = run_job(*args)
    assert anonymous.returncode == 1
    assert anonymous.stderr.strip().splitlines()[-1].startswith("spark_jobs: error: ZooKeeper at 127.0.0.1:")
    assert anonymous.stderr.strip().endswith("refused a read (without credentials): NoAuthError.")


# --- Kafka with SASL ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def authenticating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredTansu]:
    with authenticating_broker(tmp_path_factory.mktemp("tansu-sasl")) as broker:
        yield broker


def test_the_source_signs_in_to_kafka_with_its_options(
    spark: SparkSession, authenticating: SecuredTansu
) -> None:
    with pytest.raises(PySparkException) as refused:
        read(spark, authenticating.url, "orders", **SCRAM_OPTIONS).collect()
    message = str(refused.value)
    assert (
        f"BackendUnavailable: The Kafka cluster at {authenticating.bootstrap} refused the gateway's "
        f"credentials (SASL_PLAINTEXT, SCRAM-SHA-256 as '{KAFKA_USER}')"
    ) in message
    assert KAFKA_PASSWORD not in message
    # without them the broker closes the connection at the first request that is not SASL's
    with pytest.raises(PySparkException) as anonymous:
        read(spark, authenticating.url, "orders").collect()
    assert (
        f"BackendUnavailable: Cannot reach the Kafka cluster at {authenticating.bootstrap}: "
        "no bootstrap server accepted a connection"
    ) in str(anonymous.value)


def test_jobs_sign_in_to_kafka_with_the_gateways_environment(
    authenticating: SecuredTansu, zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    password_file = tmp_path / "kafka-password"
    password_file.write_text(KAFKA_PASSWORD + "\n")
    env = {
        "BROKERGATE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "BROKERGATE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "BROKERGATE_KAFKA_SASL_USERNAME": KAFKA_USER,
        "BROKERGATE_KAFKA_SASL_PASSWORD_FILE": str(password_file),
    }
    args = ("lag", "--log", authenticating.url, "--coordinator", f"{zookeeper.url}/t-{uuid.uuid4().hex[:12]}")
    for extra, mechanism in (
        ((), "SCRAM-SHA-512"),
        (("--kafka-sasl-mechanism", "SCRAM-SHA-256"), "SCRAM-SHA-256"),
    ):
        run = run_job(*args, *extra, env=env)
        assert run.returncode == 1, run.stderr
        assert "Traceback" not in run.stderr and KAFKA_PASSWORD not in run.stdout + run.stderr
        assert run.stderr.strip().splitlines()[-1] == (
            f"spark_jobs: error: The Kafka cluster at {authenticating.bootstrap} refused the gateway's "
            f"credentials (SASL_PLAINTEXT, {mechanism} as '{KAFKA_USER}')"
        )


@pytest.mark.xfail(strict=True, reason=f"{BROKER_LACKS_IT}: SASL users (Tansu 0.6 cannot add a SCRAM user)")
def test_a_round_trip_over_sasl_scram(spark: SparkSession, authenticating: SecuredTansu) -> None:
    topic = f"t-{uuid.uuid4().hex[:10]}"
    security = KafkaSecurity("SASL_PLAINTEXT", "SCRAM-SHA-256", KAFKA_USER, KAFKA_PASSWORD)

    async def write() -> None:
        log = KafkaLog(
            authenticating.url, KafkaOptions(idempotence=False, request_timeout_ms=5000, security=security)
        )
        await log.start()
        try:
            await log.create_topic(topic, 1, 1, {})
            await log.append(TopicPartition(topic, 0), records(3))
        finally:
            await log.stop()

    asyncio.run(write())
    got: list[Any] = read(spark, authenticating.url, topic, **SCRAM_OPTIONS).select("value").collect()
    assert [bytes(r["value"]) for r in got] == [b"v0", b"v1", b"v2"]
