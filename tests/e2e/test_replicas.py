"""Two gateway processes sharing one Kafka log, one ZooKeeper and one Redis.

Any replica serves any request of any consumer instance; members created through
both see one assignment; commits through one are visible through the other; and
when the coordinating replica dies (kill -9), leadership moves and an expired
instance is still removed and its partitions rebalanced.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from deploy.local.kafka_broker import KafkaBroker
from deploy.local.zookeeper_server import ZooKeeperServer
from service.client import Consumer, GatewayClient
from tests.e2e.gateway_process import GatewayProcess, two_replicas
from tests.helpers import wait_for


@pytest.fixture
def cluster(
    tmp_path: Path, kafka_broker: KafkaBroker
) -> Iterator[tuple[GatewayProcess, GatewayProcess, ZooKeeperServer, str]]:
    with two_replicas(tmp_path, kafka_broker) as r:
        yield r.first, r.second, r.zookeeper, r.chroot


def leader(zookeeper: ZooKeeperServer, chroot: str) -> str:
    zk = KazooClient(hosts=zookeeper.hosts)
    zk.start(timeout=10)
    try:
        path = f"{chroot}/brokergate/election"
        candidates = sorted(zk.get_children(path), key=lambda c: c.rsplit("__", 1)[-1])
        return zk.get(f"{path}/{candidates[0]}")[0].decode() if candidates else ""
    finally:
        zk.stop()
        zk.close()


def test_any_replica_serves_any_instance_and_the_group_survives_a_replica(cluster):
    first, second, zookeeper, chroot = cluster
    # names of the test's own: the broker is the session's
    shared, payments, g = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("shared", "payments", "g"))
    with GatewayClient(first.url) as a, GatewayClient(second.url) as b:
        a.create_topic(shared, 4)
        a.produce(shared, [{"value": f"v{i}", "partition": i % 4} for i in range(40)])

        # An Idempotency-Key retried through the other replica stores its records once.
        body = {"records": [{"value": "once"}]}
        headers = {"Content-Type": "application/vnd.kafka.string.v2+json", "Idempotency-Key": "pay-1"}
        a.create_topic(payments, 1)
        first_answer = a.request("POST", f"/topics/{payments}", json=body, headers=headers)
        assert b.request("POST", f"/topics/{payments}", json=body, headers=headers) == first_answer
        assert first_answer["offsets"][0]["offset"] == 0
        assert (
            b.request("GET", f"/topics/{payments}/partitions/0/records", params={"offset": 1})["records"]
            == []
        )

        short = a.consumer(
            g,
            name="short",
            format="string",
            auto_offset_reset="earliest",
            consumer_instance_timeout_ms=2000,
        )
        stay = b.consumer(g, name="stay", format="string", auto_offset_reset="earliest")
        short.subscribe(shared)
        stay.subscribe(shared)

        # One assignment, whichever replica is asked: disjoint halves covering every partition.
        via_b = Consumer(b, g, "short", "string")  # the instance created through A, used through B
        mine, theirs = set(via_b.assignment()), set(stay.assignment())
        assert set(short.assignment()) == mine
        assert len(mine) == 2 and len(theirs) == 2 and not mine & theirs

        # Poll through B, commit through A: one instance, two replicas.
        got = []
        for _ in range(20):
            got += via_b.poll(timeout_ms=500)
            if len(got) >= 20:
                break
        assert len(got) == 20 and {(r.topic, r.partition) for r in got} == mine
        short.commit()
        committed = {
            (o["topic"], o["partition"]): o["offset"]
            for o in b.request(
                "GET",
                f"/consumers/{g}/instances/stay/offsets",
                json={"partitions": [{"topic": t, "partition": p} for t, p in sorted(mine)]},
                headers={"Content-Type": "application/vnd.kafka.v2+json"},
            )["offsets"]
        }
        assert committed == dict.fromkeys(mine, 10)

        # kill -9 the leader: leadership moves; `short` stops renewing its lease and expires;
        # the survivor takes over all four partitions.
        assert leader(zookeeper, chroot) == "gw-a"
        first.kill()
        wait_for(lambda: leader(zookeeper, chroot) == "gw-b")
        wait_for(lambda: len(stay.assignment()) == 4)
        # ... and resumes the dead member's partitions at their committed offsets: nothing again
        a_new = b.produce(shared, [{"value": "after", "partition": p} for _, p in sorted(mine)])
        resumed = []
        for _ in range(20):
            resumed += stay.poll(timeout_ms=500)
            if len(resumed) >= 22:
                break
        from_mine = sorted((r.partition, r.offset) for r in resumed if (r.topic, r.partition) in mine)
        assert from_mine == sorted((o.partition, o.offset) for o in a_new)
        assert all(offset == 10 for _, offset in from_mine)


def test_in_process_sessions_members_leave_with_their_replica(tmp_path, kafka_broker):
    """With ZooKeeper but in-process sessions, a replica's members are ephemeral: kill -9 of the
    replica removes them, and the group rebalances onto the members of the living replica."""
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    eph, g = f"eph-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with ZooKeeperServer(tmp_path / "zookeeper") as zookeeper:
        env = {
            "BROKERGATE_LOG": kafka_broker.url,
            "BROKERGATE_COORDINATOR": zookeeper.url + chroot,
            "BROKERGATE_ZOOKEEPER_SESSION_TIMEOUT_MS": "1500",
            "BROKERGATE_METADATA_REFRESH_MS": "200",
        }
        first = GatewayProcess(tmp_path / "a", env={**env, "BROKERGATE_NODE_ID": "gw-a"}).start()
        second = GatewayProcess(tmp_path / "b", env={**env, "BROKERGATE_NODE_ID": "gw-b"}).start()
        try:
            with GatewayClient(first.url) as a, GatewayClient(second.url) as b:
                a.create_topic(eph, 4)
                gone = a.consumer(g, name="gone")
                stay = b.consumer(g, name="stay")
                gone.subscribe(eph)
                stay.subscribe(eph)
                assert len(stay.assignment()) == 2
                first.kill()
                wait_for(lambda: len(stay.assignment()) == 4)
                group = b.group(g)
                assert [m["consumer_id"] for m in group["consumers"]] == ["stay"]
        finally:
            first.stop()
            second.stop()
