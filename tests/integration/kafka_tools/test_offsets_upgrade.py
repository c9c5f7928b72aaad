"""Upgrading loses no committed offset: what a group committed before its offsets moved to Kafka
(in the coordinator's own store, the data directory or ZooKeeper) is where a gateway on Kafka
starts the group, and is carried into Kafka, where ``kafka-consumer-groups`` shows it. It is
carried once: an offset then deleted in Kafka stays deleted.

A gateway that still kept offsets in its coordinator cannot run any more, so the older offsets are
written as it wrote them: through the coordinator adapter itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.local.kafka_broker import KafkaBroker
from deploy.local.kafka_tools import run_tool
from deploy.local.zookeeper_server import ZooKeeperServer
from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.adapters.kafka.group_offsets import KafkaGroupOffsets
from service.adapters.kafka.options import KafkaOptions
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.core.carried_offsets import CARRIED
from service.core.models import TopicPartition
from service.core.ports import Coordinator
from tests.conftest import ZOOKEEPER_TEST_SETTINGS, RunningGateway, kafka_settings, start_gateway
from tests.helpers import V2, consumer, create_topic, poll_until, produce, subscribe
from tests.integration.kafka_tools.test_group_offsets import describe_rows
from tests.integration.zookeeper.conftest import chroot_url


class OldStore:
    """Where a gateway of the release before kept a group's committed offsets, and the settings of
    a gateway of this release on the same coordinator."""

    def __init__(self, kind: str, data_dir: Path, zookeeper: ZooKeeperServer | None) -> None:
        self.data_dir = data_dir
        self.settings: dict[str, object] = {}
        if kind == "zookeeper":
            assert zookeeper is not None
            self.settings = {"coordinator": chroot_url(zookeeper), **ZOOKEEPER_TEST_SETTINGS}

    def coordinator(self) -> Coordinator:
        url = self.settings.get("coordinator")
        if url is None:
            return EmbeddedCoordinator(self.data_dir)
        return ZooKeeperCoordinator(str(url), node_id="older-release", session_timeout_ms=1500)

    async def commit(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        async with self.coordinator() as c:
            await c.commit(group, offsets)

    async def committed(self, group: str) -> dict[TopicPartition, int]:
        async with self.coordinator() as c:
            return await c.committed(group)

    async def gateway(self, broker: KafkaBroker) -> RunningGateway:
        return await start_gateway(self.data_dir, **kafka_settings(broker), **self.settings)


@pytest.fixture(params=["embedded", "zookeeper"])
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> OldStore:
    zookeeper = request.getfixturevalue("zookeeper") if request.param == "zookeeper" else None
    return OldStore(request.param, tmp_path / "data", zookeeper)


async def describe(broker: KafkaBroker, group: str) -> dict[int, tuple[int | None, int, int | None]]:
    out = await run_tool(
        "kafka-consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", group
    )
    return describe_rows(out, group)


async def test_offsets_committed_before_the_upgrade_start_the_group_and_move_to_kafka(
    old_store: OldStore, kafka_broker: KafkaBroker, name: str
) -> None:
    group = f"g-{name}"
    t0, t1 = TopicPartition(name, 0), TopicPartition(name, 1)
    # Before the upgrade: 3 records of partition 0 processed, all 5 of partition 1.
    await old_store.commit(group, {t0: 3, t1: 5})
    gw = await old_store.gateway(kafka_broker)
    try:
        client = gw.client
        await create_topic(client, name, 2)
        for p in (0, 1):
            await produce(client, name, [{"value": f"{p}-{i}"} for i in range(5)], partition=p)
        # Kafka's tools already set partition 1 (a --reset-offsets before the first read): Kafka's
        # offset wins where it has one; the older store fills in only what Kafka lacks.
        async with KafkaGroupOffsets(kafka_broker.url, KafkaOptions(request_timeout_ms=5_000)) as kafka:
            await kafka.commit(group, [(t1, 2)])

        base = await consumer(client, group, reset="earliest")
        await subscribe(client, base, name)
        got = await poll_until(client, base, 5)
        assert sorted((r["partition"], r["offset"]) for r in got) == [(0, 3), (0, 4), (1, 2), (1, 3), (1, 4)]
        # Kafka holds the carried offset now: its own tool shows it, and the group's lag.
        assert await describe(kafka_broker, group) == {0: (3, 5, 2), 1: (2, 5, 3)}
        assert (await client.delete(base, headers={"Content-Type": V2})).status_code == 204
    finally:
        await gw.client.aclose()
        await gw.stop()
    # The older store keeps its offsets (a release before this one still reads them) and the mark
    # that they were carried.
    older = await old_store.committed(group)
    assert {t0: 3, t1: 5}.items() <= older.items() and CARRIED in older

    # Deleted in Kafka on purpose: the group starts over from auto.offset.reset, in a gateway that
    # starts afresh too; the older offsets are not carried a second time.
    out = await run_tool(
        "kafka-consumer-groups",
        *("--bootstrap-server", kafka_broker.bootstrap, "--delete-offsets"),
        *("--group", group, "--topic", name),
    )
    assert await describe(kafka_broker, group) == {}, out
    gw = await old_store.gateway(kafka_broker)
    try:
        base = await consumer(gw.client, group, reset="earliest")
        await subscribe(gw.client, base, name)
        got = await poll_until(gw.client, base, 10)
        everything = [(p, o) for p in (0, 1) for o in range(5)]
        assert sorted((r["partition"], r["offset"]) for r in got) == everything
    finally:
        await gw.client.aclose()
        await gw.stop()
