"""Jobs next to a running gateway: lag equal to the API's, and ``committed:<group>`` bounds.

Records and commits go through the gateway's HTTP API, on the embedded log and
coordinator (the jobs read the same data dir the gateway holds), on Kafka with
the embedded coordinator (the jobs told only where Kafka is: the groups'
offsets are Kafka's) and on Kafka with ZooKeeper (the jobs told both); the Spark
side runs in a worker thread so the gateway keeps serving meanwhile.
"""

from __future__ import annotations

import asyncio
import io
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from deploy.local.kafka_broker import KafkaBroker
from deploy.local.zookeeper_server import ZooKeeperServer
from spark_jobs.lag import LagOptions, run_lag
from spark_jobs.logs import is_kafka
from spark_jobs.progress import Progress
from tests.conftest import ZOOKEEPER_TEST_SETTINGS, RunningGateway, kafka_settings, start_gateway
from tests.helpers import cluster_id, commit, consumer, create_topic, poll_until, produce, subscribe

from .test_streaming_source import read_offsets, run_available_now


@dataclass
class Setup:
    gateway: RunningGateway
    log: str  # what the jobs read: the gateway's data dir or its Kafka
    coordinator: str | None


@pytest.fixture(params=["embedded", "kafka", "kafka+zookeeper"])
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setup]:
    data = tmp_path / "data"
    if request.param == "embedded":
        gateway = await start_gateway(data)
        found = Setup(gateway, str(data), None)
    elif request.param == "kafka":
        broker: KafkaBroker = request.getfixturevalue("kafka_broker")
        gateway = await start_gateway(data, **kafka_settings(broker))
        found = Setup(gateway, broker.url, None)
    else:
        broker = request.getfixturevalue("kafka_broker")
        zookeeper: ZooKeeperServer = request.getfixturevalue("zookeeper")
        coordinator = f"{zookeeper.url}/t-{uuid.uuid4().hex[:12]}"
        gateway = await start_gateway(
            data, coordinator=coordinator, **kafka_settings(broker), **ZOOKEEPER_TEST_SETTINGS
        )
        found = Setup(gateway, broker.url, coordinator)
    try:
        yield found
    finally:
        await gateway.client.aclose()
        await gateway.stop()


async def groups_with_commits(setup: Setup) -> tuple[str, str, str]:
    """A topic of 2 x 5 records; group ``behind`` processed 0..2 of partition 0, ``done`` everything."""
    client = setup.gateway.client
    topic = f"t-{uuid.uuid4().hex[:10]}"
    await create_topic(client, topic, 2)
    await produce(client, topic, [{"value": f"v{i}", "partition": i % 2} for i in range(10)])
    behind, done = f"behind-{topic}", f"done-{topic}"
    for group in (behind, done):
        base = await consumer(client, group)
        await subscribe(client, base, topic)
        assert len(await poll_until(client, base, 10)) == 10
        if group == behind:
            # v2 commits name the last record processed: the committed offset is 3
            await commit(client, base, [{"topic": topic, "partition": 0, "offset": 2}])
        else:
            await commit(client, base)
    return topic, behind, done


async def test_lag_equals_the_gateways_lag_endpoint(
    spark: SparkSession, setup: Setup, tmp_path: Path
) -> None:
    topic, behind, done = await groups_with_commits(setup)
    client = setup.gateway.client
    cid = await cluster_id(client)
    api = {}
    for group in (behind, done):
        r = await client.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lags")
        assert r.status_code == 200, r.text
        for row in r.json()["data"]:
            key = (group, row["topic_name"], row["partition_id"])
            api[key] = (row["current_offset"], row["log_end_offset"], row["lag"])

    out = tmp_path / "lag"
    # Every group with commits, on the embedded log; Kafka's groups are the whole cluster's
    groups = (behind, done) if is_kafka(setup.log) else ()
    options = LagOptions(
        log=setup.log, coordinator=setup.coordinator, groups=groups, output=str(out), format="csv"
    )
    summary_out = io.StringIO()
    rows = await asyncio.to_thread(
        run_lag, spark, options, Progress("lag", out=io.StringIO(), summary_out=summary_out)
    )
    mine = {
        (r.group, r.topic, r.partition): (-1 if r.committed is None else r.committed, r.end_offset, r.lag)
        for r in rows
    }
    assert mine == api
    assert mine == {
        (behind, topic, 0): (3, 5, 2),
        (behind, topic, 1): (-1, 5, 5),
        (done, topic, 0): (5, 5, 0),
        (done, topic, 1): (5, 5, 0),
    }
    assert "lag: 7 records behind in" in summary_out.getvalue()
    written = spark.read.option("header", "true").option("inferSchema", "true").csv(str(out)).collect()
    assert sorted((r["group"], r["partition"], r["lag"]) for r in written) == sorted(
        (g, p, lag) for (g, _, p), (_, _, lag) in mine.items()
    )


async def test_committed_offsets_bound_a_read(spark: SparkSession, setup: Setup) -> None:
    topic, behind, _ = await groups_with_commits(setup)

    def offsets(**options: str) -> list[tuple[int, int]]:
        reader = spark.read.format("brokergate").option("log", setup.log).option("topic", topic)
        if setup.coordinator:
            reader = reader.option("coordinator", setup.coordinator)
        for key, value in options.items():
            reader = reader.option(key, value)
        return sorted(
            (r["partition"], r["offset"]) for r in reader.load().select("partition", "offset").collect()
        )

    processed = await asyncio.to_thread(offsets, endingOffsets=f"committed:{behind}")
    assert processed == [(0, 0), (0, 1), (0, 2)]  # partition 1: nothing committed, nothing processed
    pending = await asyncio.to_thread(offsets, startingOffsets=f"committed:{behind}")
    assert pending == [(0, 3), (0, 4)] + [(1, i) for i in range(5)]


async def test_a_commit_past_the_log_end_fails_the_read_naming_it(spark: SparkSession, setup: Setup) -> None:
    """Spark's Kafka source fails on a starting offset after the ending one; a commit past the end
    is such a start, never clamped to the end as if the group had read everything."""
    topic, _, _ = await groups_with_commits(setup)
    client, past = setup.gateway.client, f"past-{topic}"
    base = await consumer(client, past)
    await subscribe(client, base, topic)
    assert len(await poll_until(client, base, 10)) == 10
    await commit(client, base, [{"topic": topic, "partition": 0, "offset": 99998}])  # kept, as Kafka does

    def read() -> int:
        reader = spark.read.format("brokergate").option("log", setup.log).option("topic", topic)
        if setup.coordinator:
            reader = reader.option("coordinator", setup.coordinator)
        return reader.option("startingOffsets", f"committed:{past}").load().count()

    with pytest.raises(Exception, match=rf"{topic}-0 is committed at 99999, past its log end \(log start 0"):
        await asyncio.to_thread(read)


async def test_a_stream_from_a_commit_past_the_log_end_fails_or_starts_at_the_end(
    spark: SparkSession, setup: Setup, tmp_path: Path
) -> None:
    """As Spark's Kafka source, a new stream whose start is past a partition's end fails naming it,
    or with failOnDataLoss=false warns and goes on from the log end."""
    topic, _, _ = await groups_with_commits(setup)
    client, past = setup.gateway.client, f"past-{topic}"
    base = await consumer(client, past)
    await subscribe(client, base, topic)
    assert len(await poll_until(client, base, 10)) == 10
    await commit(client, base, [{"topic": topic, "partition": 0, "offset": 99998}])

    def run(checkpoint: Path, **options: str) -> list[tuple[int, int]]:
        frame = spark.readStream.format("brokergate").option("log", setup.log).option("topic", topic)
        if setup.coordinator:
            frame = frame.option("coordinator", setup.coordinator)
        for key, value in {"startingOffsets": f"committed:{past}", **options}.items():
            frame = frame.option(key, value)
        return read_offsets(run_available_now(frame.load(), checkpoint))

    with pytest.raises(StreamingQueryException) as failed:
        await asyncio.to_thread(run, tmp_path / "failing")
    says = str(failed.value)
    assert f"{topic}-0 is committed at 99999, past its log end (log start 0, log end 5)" in says, says
    assert "Set failOnDataLoss=false to start such a partition at its log end" in says, says

    # Partition 0 starts at its end, 5; partition 1, never committed by the group, at its start.
    skipping = tmp_path / "skipping"
    got = await asyncio.to_thread(run, skipping, failOnDataLoss="false")
    assert got == [(topic, 1, i) for i in range(5)]
    await produce(client, topic, [{"value": "new", "partition": 0}])
    assert await asyncio.to_thread(run, skipping, failOnDataLoss="false") == [(topic, 0, 5)]


async def test_json_offsets_past_the_log_end_or_a_start_after_the_end_fail_the_read(
    spark: SparkSession, setup: Setup
) -> None:
    """Spark's Kafka source fails a batch beginning after its ending offset, or ending where no
    record can be fetched; no JSON offset is clamped to the end silently."""
    topic, _, _ = await groups_with_commits(setup)

    def read(**options: str) -> int:
        reader = spark.read.format("brokergate").option("log", setup.log).option("topic", topic)
        for key, value in options.items():
            reader = reader.option(key, value.replace("T", topic))
        return reader.load().count()

    for option in ("startingOffsets", "endingOffsets"):
        says = rf"{option}: {topic}-0 is given offset 7, past its log end \(log start 0, log end 5\)"
        with pytest.raises(Exception, match=says):
            await asyncio.to_thread(read, **{option: '{"T": {"0": 7}}'})
    with pytest.raises(
        Exception, match=rf"startingOffsets: {topic}-1 begins at 4, after its ending offset 2"
    ):
        await asyncio.to_thread(read, startingOffsets='{"T": {"1": 4}}', endingOffsets='{"T": {"1": 2}}')
    assert (
        await asyncio.to_thread(read, startingOffsets='{"T": {"0": 5}}', endingOffsets='{"T": {"0": 5}}') == 5
    )
