"""The gateway on the ZooKeeper coordinator, through HTTP: groups rebalance, commits land in ZooKeeper."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from deploy.local.kafka_broker import KafkaBroker
from tests.conftest import RunningGateway, kafka_settings, start_gateway
from tests.helpers import (
    STRING,
    V2,
    assignment,
    commit,
    consumer,
    create_topic,
    poll_until,
    produce,
    subscribe,
)

from .conftest import CONNECT_TIMEOUT_MS, REQUEST_TIMEOUT_MS, SESSION_TIMEOUT_MS, raw_client


@pytest.fixture
async def gateway(tmp_path: Path, zk_url: str) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(
        tmp_path / "data",
        coordinator=zk_url,
        node_id="gw-1",
        zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS,
        zookeeper_connect_timeout_ms=CONNECT_TIMEOUT_MS,
        zookeeper_request_timeout_ms=REQUEST_TIMEOUT_MS,
    )
    try:
        yield gw
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_group_shares_partitions_and_commits_into_zookeeper(
    gateway: RunningGateway, zk_url: str, name: str
) -> None:
    client = gateway.client
    await create_topic(client, name, partitions=2)
    first = await consumer(client, "shipping", name="one")
    second = await consumer(client, "shipping", name="two")
    await subscribe(client, first, name)
    await subscribe(client, second, name)
    owned = [await assignment(client, first), await assignment(client, second)]
    assert sorted(tp for tps in owned for tp in tps) == [(name, 0), (name, 1)]
    assert all(len(tps) == 1 for tps in owned)

    await produce(client, name, [{"value": "a"}], partition=0)
    await produce(client, name, [{"value": "b"}, {"value": "c"}], partition=1)
    base = first if owned[0] == [(name, 0)] else second
    records = await poll_until(client, base, 1)
    assert [r["value"] for r in records] == ["a"]
    assert await commit(client, base) == [{"topic": name, "partition": 0, "offset": 1}]

    raw = raw_client(zk_url)
    try:
        assert raw.get(f"/consumers/shipping/offsets/{name}/0")[0] == b"1"
        assert sorted(raw.get_children("/brokergate/groups/shipping/members")) == ["one", "two"]
        assert raw.get_children("/brokergate/nodes") == ["gw-1"]
    finally:
        raw.stop()
        raw.close()

    # One member leaves: the other gets both partitions in a new generation, and resumes from the commit.
    r = await client.delete(base, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    other = second if base == first else first
    assert sorted(await assignment(client, other)) == [(name, 0), (name, 1)]
    got = await poll_until(client, other, 2)
    assert sorted(r["value"] for r in got) == ["b", "c"]


async def test_group_listing_and_lag_read_zookeeper(gateway: RunningGateway, name: str) -> None:
    client: httpx.AsyncClient = gateway.client
    await create_topic(client, name, partitions=1)
    await produce(client, name, [{"value": "x"}, {"value": "y"}])
    base = await consumer(client, "billing", name="c")
    await subscribe(client, base, name)
    await poll_until(client, base, 2)
    await commit(client, base, [{"topic": name, "partition": 0, "offset": 0}])
    cluster = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    r = await client.get(f"/v3/clusters/{cluster}/consumer-groups")
    assert r.status_code == 200, r.text
    assert "billing" in [g["consumer_group_id"] for g in r.json()["data"]]
    r = await client.get(f"/v3/clusters/{cluster}/consumer-groups/billing/lags")
    assert r.status_code == 200, r.text
    [lag] = r.json()["data"]
    assert (lag["current_offset"], lag["log_end_offset"], lag["lag"]) == (1, 2, 1)


async def test_a_long_poll_through_one_replica_wakes_at_a_rebalance_made_through_another(
    tmp_path: Path, zk_url: str, kafka_broker: KafkaBroker, name: str
) -> None:
    """A member with no partition long-polls through B; the member owning the partition leaves
    through A. B learns of A's generation from ZooKeeper at once, not at its poll's deadline, so
    the poll answers the record produced meanwhile before its timeout."""
    common = {
        **kafka_settings(kafka_broker),  # one registry topic for both replicas
        "coordinator": zk_url,
        "zookeeper_session_timeout_ms": SESSION_TIMEOUT_MS,
        "zookeeper_connect_timeout_ms": CONNECT_TIMEOUT_MS,
        "zookeeper_request_timeout_ms": REQUEST_TIMEOUT_MS,
    }
    a = await start_gateway(tmp_path / "a", node_id="gw-a", **common)
    b = await start_gateway(tmp_path / "b", node_id="gw-b", **common)
    try:
        await create_topic(a.client, name, partitions=1)
        owner = await consumer(a.client, "relay", name="owner")
        await subscribe(a.client, owner, name)
        waiter = await consumer(b.client, "relay", name="waiter")
        await subscribe(b.client, waiter, name)
        assert await assignment(b.client, waiter) == []
        timeout_s = 30
        polling = asyncio.create_task(
            b.client.get(
                f"{waiter}/records",
                params={"timeout": timeout_s * 1000},
                headers={"Accept": STRING},
                timeout=timeout_s + 10,
            )
        )
        await asyncio.sleep(1.0)  # the poll is waiting, with nothing to read
        assert not polling.done()
        r = await a.client.delete(owner, headers={"Content-Type": V2})
        assert r.status_code == 204, r.text
        await produce(a.client, name, [{"value": "handed over"}], partition=0)
        r = await asyncio.wait_for(polling, timeout_s - 5)  # answered before its timeout
        assert r.status_code == 200, r.text
        assert [rec["value"] for rec in r.json()] == ["handed over"]
    finally:
        for gw in (b, a):
            await gw.client.aclose()
            await gw.stop()
