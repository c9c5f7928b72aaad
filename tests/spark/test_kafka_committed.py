"""On a Kafka log, ``committed:<group>`` and the lag job read a group's offsets where the gateway does.

A gateway on Kafka commits its groups' offsets to Kafka's group coordinator, where native
consumers of the same group commit too; offsets committed before they moved there are in the
coordinator's own store (here a data dir) until the gateway carries them into Kafka, leaving a
mark among them. The jobs must answer what the gateway answers: Kafka's offsets, the older
store's only for partitions Kafka lacks and only while the group was not carried, and never the
mark.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as KafkaTP
from pyspark.sql import SparkSession

from deploy.local.kafka_broker import KafkaBroker
from deploy.local.kafka_tools import run_tool
from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.adapters.embedded.offsets_reader import committed_offsets
from service.adapters.kafka.group_offsets import KafkaGroupOffsets
from service.adapters.kafka.options import KafkaOptions
from service.core.carried_offsets import CARRIED
from service.core.models import TopicPartition
from spark_jobs.lag import LagOptions, run_lag
from spark_jobs.plan import Planner
from spark_jobs.progress import Progress
from tests.conftest import RunningGateway, kafka_settings, running_gateway, start_gateway
from tests.helpers import V2, cluster_id, commit, consumer, create_topic, poll_until, produce, subscribe

Lags = dict[tuple[str, int], tuple[int | None, int, int]]  # (group, partition) -> committed, end, lag


@pytest.fixture
async def gateway(kafka_broker: KafkaBroker, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """A gateway on the session's Kafka, its embedded coordinator in ``tmp_path / "data"``."""
    async with running_gateway(tmp_path / "data", **kafka_settings(kafka_broker)) as gw:
        yield gw


async def topic_of_2x5(gw: RunningGateway, topic: str) -> None:
    await create_topic(gw.client, topic, 2)
    for p in (0, 1):
        await produce(gw.client, topic, [{"value": f"{p}-{i}"} for i in range(5)], partition=p)


def lag(spark: SparkSession, log: str, groups: tuple[str, ...], coordinator: str | None = None) -> Lags:
    options = LagOptions(log=log, coordinator=coordinator, groups=groups)
    rows = run_lag(spark, options, Progress("lag", out=io.StringIO(), summary_out=io.StringIO()))
    assert all(r.topic != CARRIED.topic for r in rows)
    return {(r.group, r.partition): (r.committed, r.end_offset, r.lag) for r in rows}


def read(spark: SparkSession, log: str, topic: str, coordinator: str | None = None, **options: str) -> list:
    reader = spark.read.format("brokergate").option("log", log).option("topic", topic)
    if coordinator is not None:
        reader = reader.option("coordinator", coordinator)
    for key, value in options.items():
        reader = reader.option(key, value)
    return sorted(
        (r["partition"], r["offset"]) for r in reader.load().select("partition", "offset").collect()
    )


def committed(log: str, group: str, coordinator: str | None = None) -> dict[TopicPartition, int]:
    with Planner(log, coordinator) as planner:
        return planner.committed(group)


def groups(log: str, coordinator: str | None = None) -> list[str]:
    with Planner(log, coordinator) as planner:
        return planner.groups()


async def api_lags(gw: RunningGateway, group: str) -> Lags:
    cid = await cluster_id(gw.client)
    r = await gw.client.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lags")
    assert r.status_code == 200, r.text
    return {
        (group, row["partition_id"]): (row["current_offset"], row["log_end_offset"], row["lag"])
        for row in r.json()["data"]
    }


async def test_an_http_groups_commits_and_a_native_consumers_bound_reads_and_make_the_lag(
    spark: SparkSession, kafka_broker: KafkaBroker, gateway: RunningGateway, name: str
) -> None:
    log, group = kafka_broker.url, f"g-{name}"
    await topic_of_2x5(gateway, name)
    base = await consumer(gateway.client, group)
    await subscribe(gateway.client, base, name)
    assert len(await poll_until(gateway.client, base, 10)) == 10
    await commit(gateway.client, base, [{"topic": name, "partition": 0, "offset": 2}])  # committed: 3
    assert (await gateway.client.delete(base, headers={"Content-Type": V2})).status_code == 204

    # What the HTTP group committed, read from Kafka (the jobs are told nothing but the log)
    assert await asyncio.to_thread(lag, spark, log, (group,)) == {
        (group, 0): (3, 5, 2),
        (group, 1): (None, 5, 5),
    }
    ending = await asyncio.to_thread(read, spark, log, name, endingOffsets=f"committed:{group}")
    assert ending == [(0, 0), (0, 1), (0, 2)]

    # A native consumer joins the group, resumes there, and commits partition 1 up to offset 4
    native = AIOKafkaConsumer(
        name,
        bootstrap_servers=kafka_broker.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await native.start()
    try:
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + 20
        while len(got) < 7 and time.monotonic() < deadline:
            for tp, records in (await native.getmany(timeout_ms=500)).items():
                got += [(tp.partition, r.offset) for r in records]
        assert sorted(got) == [(0, 3), (0, 4)] + [(1, i) for i in range(5)]
        await native.commit({KafkaTP(name, 1): 4})
    finally:
        await native.stop()

    mine = await asyncio.to_thread(lag, spark, log, (group,))
    assert mine == {(group, 0): (3, 5, 2), (group, 1): (4, 5, 1)}
    assert mine == await api_lags(gateway, group)
    ending = await asyncio.to_thread(read, spark, log, name, endingOffsets=f"committed:{group}")
    assert ending == [(0, 0), (0, 1), (0, 2)] + [(1, i) for i in range(4)]
    starting = await asyncio.to_thread(read, spark, log, name, startingOffsets=f"committed:{group}")
    assert starting == [(0, 3), (0, 4), (1, 4)]


async def test_offsets_from_before_kafka_are_read_as_the_gateway_reads_them_and_the_mark_never_shows(
    spark: SparkSession, kafka_broker: KafkaBroker, tmp_path: Path, name: str
) -> None:
    log, data = kafka_broker.url, tmp_path / "data"
    carried, waiting = f"carried-{name}", f"waiting-{name}"
    t0, t1 = TopicPartition(name, 0), TopicPartition(name, 1)
    # Committed before the offsets moved to Kafka: in the coordinator's own store, the data dir
    async with EmbeddedCoordinator(data) as older:
        await older.commit(carried, {t0: 1, t1: 1})
        await older.commit(waiting, {t0: 2, t1: 2})
    gw = await start_gateway(data, **kafka_settings(kafka_broker))
    try:
        await topic_of_2x5(gw, name)
        # Kafka already has partition 1 of the waiting group (its tools or a native consumer set it)
        async with KafkaGroupOffsets(log, KafkaOptions(request_timeout_ms=5_000)) as kafka:
            await kafka.commit(waiting, [(t1, 4)])
        # The carried group's first read carries its offsets into Kafka; it then commits 0 at 4
        base = await consumer(gw.client, carried)
        await subscribe(gw.client, base, name)
        assert len(await poll_until(gw.client, base, 8)) == 8
        await commit(gw.client, base, [{"topic": name, "partition": 0, "offset": 3}])
        assert (await gw.client.delete(base, headers={"Content-Type": V2})).status_code == 204
        assert CARRIED in committed_offsets(data, carried)  # the older store holds the mark
        assert CARRIED not in committed_offsets(data, waiting)

        coordinator = str(data)
        expected = {
            (carried, 0): (4, 5, 1),  # Kafka's, committed since it was carried
            (carried, 1): (1, 5, 4),  # carried into Kafka
            (waiting, 0): (2, 5, 3),  # not carried yet: the older store's, where Kafka has none
            (waiting, 1): (4, 5, 1),  # Kafka's wins
        }
        assert await asyncio.to_thread(lag, spark, log, (carried, waiting), coordinator) == expected
        assert await asyncio.to_thread(committed, log, carried, coordinator) == {t0: 4, t1: 1}
        listed = await asyncio.to_thread(groups, log, coordinator)
        assert {carried, waiting} <= set(listed)  # the waiting group is in Kafka only partly
        starting = await asyncio.to_thread(
            read, spark, log, name, coordinator, startingOffsets=f"committed:{waiting}"
        )
        assert starting == [(0, 2), (0, 3), (0, 4), (1, 4)]
        # Not told where the older store is, the jobs know only Kafka's offsets
        assert await asyncio.to_thread(committed, log, waiting) == {t1: 4}

        # The gateway answers the same, and its read carries the waiting group; nothing changes
        # for the jobs
        assert await api_lags(gw, waiting) == {k: v for k, v in expected.items() if k[0] == waiting}
        assert CARRIED in committed_offsets(data, waiting)
        assert await asyncio.to_thread(lag, spark, log, (carried, waiting), coordinator) == expected
    finally:
        await gw.client.aclose()
        await gw.stop()

    # Once carried, an offset deleted in Kafka stays deleted, for the jobs as for the gateway
    await run_tool(
        "kafka-consumer-groups",
        *("--bootstrap-server", kafka_broker.bootstrap, "--delete-offsets"),
        *("--group", carried, "--topic", name),
    )
    assert await asyncio.to_thread(committed, log, carried, str(data)) == {}
    assert await asyncio.to_thread(lag, spark, log, (carried, waiting), str(data)) == {
        k: v for k, v in expected.items() if k[0] == waiting
    }
