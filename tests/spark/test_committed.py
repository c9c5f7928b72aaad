"""Reading committed offsets without a gateway: the embedded coordinator's files and ZooKeeper's znodes,
and where they are read from when the log is Kafka.

The offsets are committed by the real coordinators; the readers must see
exactly what a restarted coordinator would see, while the coordinator runs.
(Reading Kafka's group offsets beside a gateway: ``test_kafka_committed``.)
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from deploy.local.zookeeper_server import ZooKeeperServer
from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.adapters.embedded.offsets_reader import committed_offsets, read_all_committed
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.adapters.zookeeper.offsets_reader import ZooKeeperOffsetsReader
from service.core.models import TopicPartition
from service.errors import BackendUnavailable
from spark_jobs.committed import coordinator_for, open_committed, open_store

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


async def test_embedded_offsets_are_read_while_the_coordinator_commits_and_compacts(tmp_path: Path) -> None:
    assert read_all_committed(tmp_path) == {}
    coordinator = EmbeddedCoordinator(tmp_path, compact_bytes=300)  # compacts every few commits
    await coordinator.start()
    try:
        for i in range(30):
            await coordinator.commit("billing", {A0: i, A1: 2 * i})
            await coordinator.commit("ship ✈", {B0: i})
            assert read_all_committed(tmp_path) == {"billing": {A0: i, A1: 2 * i}, "ship ✈": {B0: i}}
        assert len(list((tmp_path / "coordinator").glob("offsets.snapshot"))) == 1  # it did compact
        assert committed_offsets(tmp_path, "billing") == {A0: 29, A1: 58}
        assert committed_offsets(tmp_path, "nobody") == {}
    finally:
        await coordinator.stop()
    assert read_all_committed(tmp_path) == {"billing": {A0: 29, A1: 58}, "ship ✈": {B0: 29}}


async def test_a_commit_cut_short_is_not_there_yet(tmp_path: Path) -> None:
    coordinator = EmbeddedCoordinator(tmp_path)
    await coordinator.start()
    try:
        await coordinator.commit("g", {A0: 5})
    finally:
        await coordinator.stop()
    coordinator = EmbeddedCoordinator(tmp_path)
    await coordinator.start()
    try:
        await coordinator.commit("g", {A0: 6})
        journal = max((tmp_path / "coordinator").glob("offsets-*.journal"))
        # the first bytes of a commit being written
        journal.write_bytes(journal.read_bytes() + b"\x00\x00\x00\x40\x12\x34")
        assert committed_offsets(tmp_path, "g") == {A0: 6}
    finally:
        await coordinator.stop()


async def test_zookeeper_offsets_are_read_in_kafkas_layout(zookeeper: ZooKeeperServer) -> None:
    url = f"{zookeeper.url}/t-{uuid.uuid4().hex[:12]}"
    coordinator = ZooKeeperCoordinator(url, node_id="test")
    await coordinator.start()
    try:
        await coordinator.commit("billing", {A0: 3, A1: 4})
        await coordinator.commit("a/b", {TopicPartition("odd topic", 0): 9})  # names that need encoding
    finally:
        await coordinator.stop()
    with ZooKeeperOffsetsReader(url) as reader:
        assert reader.groups() == ["a/b", "billing"]
        assert reader.committed("billing") == {A0: 3, A1: 4}
        assert reader.committed("a/b") == {TopicPartition("odd topic", 0): 9}
        assert reader.committed("nobody") == {}
    source = open_store(url)
    try:
        assert source.committed("billing") == {A0: 3, A1: 4}
    finally:
        source.close()


def test_an_unreachable_zookeeper_is_reported_in_one_line() -> None:
    from deploy.local.process import free_port

    reader = ZooKeeperOffsetsReader(f"zookeeper://127.0.0.1:{free_port()}", timeout_s=0.5)
    with pytest.raises(BackendUnavailable, match="Cannot reach ZooKeeper"):
        reader.start()


def test_where_committed_offsets_are() -> None:
    assert coordinator_for("/srv/data", None) == "/srv/data"
    assert coordinator_for("/srv/data", "embedded") == "/srv/data"
    assert coordinator_for("kafka://k:9092", "zookeeper://z:2181/bg") == "zookeeper://z:2181/bg"
    assert coordinator_for("kafka://k:9092", "/srv/data") == "/srv/data"
    # a Kafka log's groups' offsets are Kafka's: no older store unless one is named
    assert coordinator_for("kafka://k:9092", None) is None
    assert coordinator_for("kafka://k:9092", "embedded") is None


def test_an_embedded_log_reads_its_own_data_dir(tmp_path: Path) -> None:
    source = open_committed(str(tmp_path))
    try:
        assert source.groups() == [] and source.committed("g") == {}
    finally:
        source.close()
