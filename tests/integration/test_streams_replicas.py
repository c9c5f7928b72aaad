"""A stream resumes through another replica: two gateways sharing one Kafka log, one ZooKeeper and
one Redis, as a load balancer spreads reconnects. ``Last-Event-ID`` (and the WebSocket's
``?cursor=``) taken to the other replica resumes exactly where the client stood."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from deploy.local.kafka_broker import KafkaBroker
from deploy.local.redis_server import RedisServer
from deploy.local.zookeeper_server import ZooKeeperServer
from tests.conftest import ZOOKEEPER_TEST_SETTINGS, RunningGateway, kafka_settings, start_gateway
from tests.helpers import consumer, create_topic, produce, subscribe
from tests.stream_client import events, receive, send, socket_url


@pytest.fixture
async def replicas(
    tmp_path: Path, kafka_broker: KafkaBroker, zookeeper: ZooKeeperServer, redis_server: RedisServer
) -> AsyncIterator[tuple[RunningGateway, RunningGateway]]:
    shared = {
        **kafka_settings(kafka_broker),  # one registry topic for both replicas
        "coordinator": f"{zookeeper.url}/t-{uuid.uuid4().hex[:12]}",
        "sessions": redis_server.url,
        "redis_key_prefix": f"t-{uuid.uuid4().hex[:12]}:",
        **ZOOKEEPER_TEST_SETTINGS,
    }
    first = await start_gateway(tmp_path / "a", node_id="gw-a", **shared)
    second = await start_gateway(tmp_path / "b", node_id="gw-b", **shared)
    try:
        yield first, second
    finally:
        for gw in (first, second):
            await gw.client.aclose()
            await gw.stop()


async def test_a_stream_resumes_exactly_through_another_replica(
    replicas: tuple[RunningGateway, RunningGateway], name: str
) -> None:
    a, b = replicas
    await create_topic(a.client, name, 2)
    base = await consumer(a.client, f"g-{name}", reset="earliest")
    await subscribe(a.client, base, name)
    path = "/" + base.split("/", 3)[3]
    await produce(a.client, name, [{"value": f"v{i}", "partition": i % 2} for i in range(4)])

    async with events(a.client, f"{path}/records") as stream:
        first = await stream.records(4)
        processed = stream.last_event_id
        await produce(a.client, name, [{"value": f"w{i}", "partition": i % 2} for i in range(4)])
        await stream.records(4)  # sent through A, lost before it was processed
    await produce(b.client, name, [{"value": "last", "partition": 0}])

    async with events(b.client, f"{path}/records", last_event_id=processed) as stream:
        rest = await stream.records(5)
    assert sorted(r["value"] for r in first) == ["v0", "v1", "v2", "v3"]
    assert sorted(r["value"] for r in rest) == ["last", "w0", "w1", "w2", "w3"]  # none lost, none twice
    cursor = stream.last_event_id

    # The WebSocket takes the same cursor, through either replica.
    await produce(a.client, name, [{"value": "ws", "partition": 1}])
    async with connect(socket_url(f"{a.url}{path}", cursor=cursor)) as ws:
        await receive(ws, "hello")
        assert (await receive(ws, "rebalance"))["cursor"] == cursor
        await send(ws, "credit", records=10, bytes=1000)
        assert [r["value"] for r in (await receive(ws, "records"))["records"]] == ["ws"]
