"""A gateway serving consumers from Redis sessions: the v2 API unchanged, outages as 503s."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from deploy.local.redis_server import RedisServer
from service.adapters.redis import RedisSessions
from service.core.models import TopicPartition
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import BINARY, commit, consumer, create_topic, poll_until, produce, subscribe, unb64

from .conftest import CONNECT_TIMEOUT_MS, SOCKET_TIMEOUT_MS


@pytest.fixture
async def redis_gateway(tmp_path: Path, own_redis: RedisServer, prefix: str) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(
        tmp_path / "data",
        sessions=own_redis.url,
        redis_key_prefix=prefix,
        redis_connect_timeout_ms=CONNECT_TIMEOUT_MS,
        redis_socket_timeout_ms=SOCKET_TIMEOUT_MS,
    )
    try:
        yield gw
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_consumer_state_lives_in_redis(
    redis_gateway: RunningGateway, own_redis: RedisServer, prefix: str, name: str
) -> None:
    client = redis_gateway.client
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, name)
    await produce(client, name, [{"value": f"v{i}"} for i in range(3)])
    assert [r["value"] for r in await poll_until(client, base, 3)] == ["v0", "v1", "v2"]
    assert [(c["partition"], c["offset"]) for c in await commit(client, base)] == [(0, 3)]

    # Another replica (here: an adapter of the same deployment) sees the instance and its position.
    async with RedisSessions(own_redis.url, key_prefix=prefix) as replica:
        [state] = await replica.instances(f"g-{name}")
        assert state.positions == {TopicPartition(name, 0): 3}
        assert state.config.format == "string"

    assert (await client.delete(base)).status_code == 204
    assert (await client.get(f"{base}/subscription")).status_code == 404


async def test_redis_outage_is_a_503_with_retry_after(
    redis_gateway: RunningGateway, own_redis: RedisServer, name: str
) -> None:
    client = redis_gateway.client
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}", fmt="binary")
    await subscribe(client, base, name)

    own_redis.pause()
    try:
        r = await client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": BINARY})
        assert r.status_code == 503, r.text
        assert r.json()["error_code"] == 50301 and "Redis" in r.json()["message"]
        assert int(r.headers["Retry-After"]) >= 1
        assert (await client.get("/readyz")).status_code == 503
        assert (await client.get("/readyz", params={"backend": "sessions"})).status_code == 503
        # What Kubernetes asks: the replica still serves produce and reads, so it stays ready.
        assert (await client.get("/readyz", params={"backend": "log"})).status_code == 200
        assert (await client.get("/topics")).status_code == 200  # the rest keeps working
        await produce(client, name, [{"value": "during the outage"}])
    finally:
        own_redis.resume()

    # Back by itself, and the record produced while Redis was out is there to read.
    [record] = await poll_until(client, base, 1, fmt=BINARY)
    assert unb64(record["value"]) == b"during the outage"
    assert (await client.get("/readyz")).status_code == 200
