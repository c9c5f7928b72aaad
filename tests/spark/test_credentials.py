"""The gateway's backend credentials in the data source and the jobs: ZooKeeper digest, Kafka SASL and TLS.

A ZooKeeper coordinator with digest credentials that is not world-readable lets nobody else read
its offsets: the data source's ``committed:<group>`` and the lag job read them here through a real
ZooKeeper, signed in with the options, the flags or the gateway's own environment variables.
Kafka is the session's Apache Kafka broker, on its SASL listener (SCRAM, user ``brokergate``),
its TLS listener and its mutual-TLS one: records the gateway's Kafka log writes there (the topic
made by its admin client, the records by its idempotent producer) are read back by the data
source and by the jobs signed in with their options, flags or environment, and a wrong password
or a missing client certificate is refused in one line naming the identity, never the secret.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from deploy.local.kafka_broker import DEFAULT_USERS, KafkaBroker
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

from .helpers import NO_RETENTION, TestLog, records
from .helpers import run_job as run_in_session

ZK_USER, ZK_PASSWORD = "brokergate", "zk-secret-7c1"
KAFKA_USER = "brokergate"  # the broker's SASL user, made when its storage was formatted
KAFKA_PASSWORD = DEFAULT_USERS[KAFKA_USER]
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


# --- Kafka: SASL, TLS and mutual TLS --------------------------------------------------------------


@dataclass
class Listener:
    """One listener of the broker and how to sign in to it: as the gateway's settings say
    (``security``), as the data source's options and as the jobs' flags (a password in a file)."""

    url: str
    security: KafkaSecurity
    options: dict[str, str]
    flags: list[str]


def listener(broker: KafkaBroker, kind: str, tmp: Path) -> Listener:
    """The broker's listener ``kind``: a SASL mechanism, ``SSL`` or ``MTLS``."""
    if kind == "SSL" or kind == "MTLS":
        tls = {"kafkaSecurityProtocol": "SSL", "kafkaSslCaFile": str(broker.tls.ca)}
        flags = ["--kafka-security-protocol", "SSL", "--kafka-ssl-cafile", str(broker.tls.ca)]
        if kind == "SSL":
            security = KafkaSecurity("SSL", ssl_cafile=broker.tls.ca)
            return Listener(f"kafka://{broker.ssl_bootstrap}", security, tls, flags)
        cert, key = broker.client_certificate("spark-jobs")
        security = KafkaSecurity("SSL", ssl_cafile=broker.tls.ca, ssl_certfile=cert, ssl_keyfile=key)
        tls |= {"kafkaSslCertFile": str(cert), "kafkaSslKeyFile": str(key)}
        flags += ["--kafka-ssl-certfile", str(cert), "--kafka-ssl-keyfile", str(key)]
        return Listener(f"kafka://{broker.mtls_bootstrap}", security, tls, flags)
    password_file = tmp / "kafka-password"
    password_file.write_text(KAFKA_PASSWORD + "\n")
    security = KafkaSecurity("SASL_PLAINTEXT", kind, KAFKA_USER, KAFKA_PASSWORD)  # type: ignore[arg-type]
    options = {**SCRAM_OPTIONS, "kafkaSaslMechanism": kind}
    flags = ["--kafka-security-protocol", "SASL_PLAINTEXT", "--kafka-sasl-mechanism", kind]
    flags += ["--kafka-sasl-username", KAFKA_USER, "--kafka-sasl-password-file", str(password_file)]
    return Listener(f"kafka://{broker.sasl_bootstrap}", security, options, flags)


def write_topic(url: str, security: KafkaSecurity, partitions: dict[int, int]) -> str:
    """A topic made and filled through the gateway's Kafka log (its admin client and idempotent
    producer) signed in with ``security``: ``partitions[p]`` records in partition ``p``."""
    topic = f"t-{uuid.uuid4().hex[:10]}"

    async def write() -> None:
        async with KafkaLog(url, KafkaOptions(request_timeout_ms=5000, security=security)) as log:
            await log.create_topic(topic, len(partitions), 1, NO_RETENTION)
            start = 0
            for partition, count in partitions.items():
                await log.append(TopicPartition(topic, partition), records(count, start=start))
                start += count

    asyncio.run(write())
    return topic


@pytest.mark.parametrize("kind", ["SCRAM-SHA-256", "SCRAM-SHA-512", "SSL", "MTLS"])
def test_a_round_trip_through_each_secured_listener(
    spark: SparkSession, kafka_broker: KafkaBroker, kind: str, tmp_path: Path
) -> None:
    way = listener(kafka_broker, kind, tmp_path)
    topic = write_topic(way.url, way.security, {0: 3, 1: 2})

    got: list[Any] = read(spark, way.url, topic, **way.options).collect()
    rows = sorted((r["partition"], r["offset"], bytes(r["value"]), r["headers"][0]["key"]) for r in got)
    assert rows == [(0, i, f"v{i}".encode(), "n") for i in range(3)] + [
        (1, i - 3, f"v{i}".encode(), "n") for i in range(3, 5)
    ]
    output = tmp_path / "export"
    summary = run_in_session(
        spark, ["export", "--log", way.url, "--topic", topic, "--output", str(output), *way.flags]
    )
    assert summary.startswith("export: 5 records"), summary
    assert spark.read.parquet(str(output)).count() == 5


def test_the_source_names_who_kafka_refused(spark: SparkSession, kafka_broker: KafkaBroker) -> None:
    sasl = f"kafka://{kafka_broker.sasl_bootstrap}"
    with pytest.raises(PySparkException) as refused:
        read(spark, sasl, "orders", **{**SCRAM_OPTIONS, "kafkaSaslPassword": "not-it"}).collect()
    message = str(refused.value)
    assert (
        f"BackendUnavailable: The Kafka cluster at {kafka_broker.sasl_bootstrap} refused the gateway's "
        f"credentials (SASL_PLAINTEXT, SCRAM-SHA-256 as '{KAFKA_USER}'): [Error 58] SaslAuthenticationFailed"
    ) in message
    assert "not-it" not in message
    # the mutual-TLS listener without a client certificate: refused in the TLS handshake
    with pytest.raises(PySparkException) as anonymous:
        mtls = f"kafka://{kafka_broker.mtls_bootstrap}"
        read(
            spark, mtls, "orders", kafkaSecurityProtocol="SSL", kafkaSslCaFile=str(kafka_broker.tls.ca)
        ).collect()
    message = str(anonymous.value)
    assert f"Kafka cluster at {kafka_broker.mtls_bootstrap}" in message and "(SSL)" in message


def test_lag_signs_in_to_kafka_with_the_gateways_environment(
    kafka_broker: KafkaBroker, zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    way = listener(kafka_broker, "SCRAM-SHA-512", tmp_path)
    topic = write_topic(way.url, way.security, {0: 5})
    coordinator, group = f"{zookeeper.url}/t-{uuid.uuid4().hex[:12]}", f"billing-{topic}"

    async def commit() -> None:
        zk = ZooKeeperCoordinator(coordinator, node_id="t")
        await zk.start()
        try:
            await zk.commit(group, {TopicPartition(topic, 0): 2})
        finally:
            await zk.stop()

    asyncio.run(commit())
    password_file = tmp_path / "kafka-password"
    env = {
        "BROKERGATE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "BROKERGATE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "BROKERGATE_KAFKA_SASL_USERNAME": KAFKA_USER,
        "BROKERGATE_KAFKA_SASL_PASSWORD_FILE": str(password_file),
    }
    args = ("lag", "--log", way.url, "--coordinator", coordinator)
    run = run_job(*args, env=env)
    assert run.returncode == 0, run.stderr
    assert [group, topic, "0", "2", "5", "3"] in [line.split() for line in run.stdout.splitlines()]
    assert KAFKA_PASSWORD not in run.stdout + run.stderr

    # a flag wins over the environment: the password of another file, refused
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-it\n")
    run = run_job(
        *args, "--kafka-sasl-mechanism", "SCRAM-SHA-256", "--kafka-sasl-password-file", str(wrong), env=env
    )
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr and "not-it" not in run.stdout + run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        f"spark_jobs: error: The Kafka cluster at {kafka_broker.sasl_bootstrap} refused the gateway's "
        f"credentials (SASL_PLAINTEXT, SCRAM-SHA-256 as '{KAFKA_USER}'): [Error 58] "
        "SaslAuthenticationFailed: Authentication failed during authentication due to invalid "
        "credentials with SASL mechanism SCRAM-SHA-256"
    )
