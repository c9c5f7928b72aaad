"""The jobs on a Spark standalone cluster: docs/spark.md's ``spark-submit`` commands, run as written.

The module starts one cluster (a master and two workers of one core and 1 GiB each, from
pyspark's own ``spark-class``) and the page's block runs in bash against it, with the session's
Kafka broker and ZooKeeper where the page names ``kafka-1`` and ``zk-1``, from a directory that
holds the packages as the repository root does, and no ``PYTHONPATH``: the executors import the
code from the zip the block makes (``--py-files``, first on their path). The export's records come
back whole from its Parquet files, the lag job's table and history say what the group
committed, and the master and the workers' executor logs show both applications ran there.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from deploy.local.kafka_broker import KafkaBroker
from deploy.local.spark_cluster import LOOPBACK, SparkStandalone
from deploy.local.zookeeper_server import ZooKeeperServer
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.core.models import TopicPartition
from tests.e2e.docs_blocks import ROOT, claim, shell_env

from .conftest import FAST_START_JVM
from .helpers import TestLog, records

PACKAGES = ("service", "api_schemas", "spark_jobs")
# Every JVM of the module (daemons, executors, drivers): C1 only and the serial collector, a faster
# start for short jobs, as the suite's own session has
FAST_JVMS = {"JAVA_TOOL_OPTIONS": FAST_START_JVM}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    workdir = tmp_path_factory.mktemp("spark-cluster")
    with SparkStandalone(workdir, workers=2, cores=1, memory="1g", env=FAST_JVMS) as running:
        yield running


def commit(coordinator: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    async def run() -> None:
        zk = ZooKeeperCoordinator(coordinator, node_id="t")
        await zk.start()
        try:
            await zk.commit(group, offsets)
        finally:
            await zk.stop()

    asyncio.run(run())


@pytest.mark.timeout(900)  # two applications, each a driver and two executors: JVMs on 2 busy cores
def test_the_pages_cluster_commands_run_on_a_standalone_cluster(
    spark: SparkSession,
    cluster: SparkStandalone,
    kafka_broker: KafkaBroker,
    zookeeper: ZooKeeperServer,
    tmp_path: Path,
) -> None:
    log = TestLog("kafka", kafka_broker.url, tmp_path)
    topic = log.create_topic(2)
    log.produce(topic, 0, records(30))
    log.produce(topic, 1, records(20, start=30))
    coordinator = f"{zookeeper.url}/t-{uuid.uuid4().hex[:12]}"
    commit(coordinator, "billing", {TopicPartition(topic, 0): 10})

    root = tmp_path / "root"  # the repository root as the page has it: the packages, nothing else
    root.mkdir()
    for package in PACKAGES:
        (root / package).symlink_to(ROOT / package, target_is_directory=True)
    exports, lag = tmp_path / "exports" / "orders", tmp_path / "lag"
    with claim("docs/spark.md", "On a Spark cluster") as section:
        script = section.script()
    for page, here in (
        ("spark://spark-master:7077", cluster.url),
        ("kafka://kafka-1:9092", kafka_broker.url),
        ("zookeeper://zk-1:2181/brokergate", coordinator),
        ("--topic orders", f"--topic {topic}"),
        ("/shared/exports/orders", str(exports)),
        ("hdfs:///brokergate/lag", f"file://{lag}"),
    ):
        assert page in script, page
        script = script.replace(page, here)
    env = {k: v for k, v in shell_env().items() if k != "PYTHONPATH"}
    env |= {
        "SPARK_LOCAL_IP": LOOPBACK,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        **FAST_JVMS,
    }
    done = subprocess.run(
        ["bash", "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr[-6000:]}\n{cluster.output()}"

    assert "export: 50 records" in done.stdout, done.stdout
    exported = spark.read.parquet(str(exports)).select("partition", "offset", "value").collect()
    assert sorted((r["partition"], r["offset"]) for r in exported) == [(0, i) for i in range(30)] + [
        (1, i) for i in range(20)
    ]
    table = [line.split() for line in done.stdout.splitlines()]
    assert ["billing", topic, "0", "10", "30", "20"] in table
    assert ["billing", topic, "1", "-", "20", "20"] in table
    history = spark.read.parquet(str(lag))  # the lag job's default format
    assert history.where(f"topic = '{topic}'").count() == 2

    # both applications ran on the cluster, their executors on both workers
    completed = cluster.master.status()["completedapps"]
    assert len(completed) >= 2 and all(app["state"] == "FINISHED" for app in completed)
    assert all(worker.executor_logs() for worker in cluster.workers), cluster.output()
    ran = [path.read_text(errors="replace") for worker in cluster.workers for path in worker.executor_logs()]
    assert any("Finished task" in text for text in ran), cluster.output()
