"""Quotas in Redis: one set of buckets for every replica, idle buckets expire, an outage fails open."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from deploy.local.redis_server import RedisServer
from service.adapters.redis.quotas import TTL_MARGIN_MS, RedisQuotas
from service.core.buckets import Charge, Limit, admits
from service.core.quotas import client_id
from service.errors import BackendUnavailable
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import STRING
from tests.integration.test_quotas import assert_throttled

from .conftest import CONNECT_TIMEOUT_MS, SOCKET_TIMEOUT_MS

BIG = "x" * 1000


@pytest.fixture
async def quotas(redis_server: RedisServer, prefix: str) -> AsyncIterator[tuple[RedisQuotas, RedisQuotas]]:
    """Two replicas' stores on one Redis, one deployment (same prefix)."""
    a, b = RedisQuotas(redis_server.url, key_prefix=prefix), RedisQuotas(redis_server.url, key_prefix=prefix)
    async with a, b:
        yield a, b


async def test_replicas_draw_on_the_same_buckets(quotas: tuple[RedisQuotas, RedisQuotas]) -> None:
    a, b = quotas
    client = Charge("client/ip:192.0.2.1/produce", Limit(100, 1), 250)
    # 10,000 units of burst refilled at 10/s: the refill between the takes (ms, or a second on a busy
    # machine) stays far below the 250 a second charge would take
    topic = Charge("topic/t/produce", Limit(10, 1000), 250)
    assert await a.take([client, topic]) == [100, 10_000]
    levels = await b.take([client, topic])
    assert not admits(levels) and levels[0] < -100  # in debt through a, refused through b
    [topic_level] = await b.take([Charge(topic.bucket, topic.limit, 0)])
    assert 9_750 <= topic_level < 9_800  # the refused take charged the topic nothing

    await b.debit([Charge("topic/t/consume", Limit(10, 1), 500)])
    assert not admits(await a.take([Charge("topic/t/consume", Limit(10, 1), 0)]))


async def test_buckets_expire_once_full_and_never_name_an_api_key(
    quotas: tuple[RedisQuotas, RedisQuotas], redis_server: RedisServer, prefix: str
) -> None:
    a, _ = quotas
    api_key = "sk-secret-4f9a"
    bucket = f"client/{client_id(api_key, None)}/produce"
    limit = Limit(1000, 1)
    await a.take([Charge(bucket, limit, 3000)])
    await a.take([Charge("client/ip:192.0.2.9/consume", limit, 0)])  # a charge of 0 writes nothing

    inspect = redis_server.client()
    try:
        names = [k.decode() for k in inspect.scan_iter(match=f"{prefix}quota:*")]
        assert names == [f"{prefix}quota:{bucket}"]
        assert api_key not in names[0]
        # Full again after (1000 - -2000) / 1000 per s = 3 s; then it is forgotten.
        assert 0 < inspect.pttl(names[0]) <= 3000 + TTL_MARGIN_MS
    finally:
        inspect.close()


def script_calls(server: RedisServer) -> int:
    """How many EVALSHA calls the server has run so far."""
    client = server.client()
    try:
        return int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    finally:
        client.close()


async def test_concurrent_calls_share_script_calls_and_each_stays_all_or_nothing(
    quotas: tuple[RedisQuotas, RedisQuotas], redis_server: RedisServer
) -> None:
    a, _ = quotas
    # Refilled too slowly to matter here: 10 tokens shared, 1000 in each call's own bucket.
    shared, own = Limit(1e-6, 10e6), Limit(1e-6, 1e9)
    # Each call charges the shared bucket and one of its own: 1 token from each.
    calls = [[Charge("client/shared", shared, 1), Charge(f"topic/t{i}", own, 1)] for i in range(60)]
    before = script_calls(redis_server)
    answers = await asyncio.gather(*(a.take(c) for c in calls), a.debit([Charge("client/other", own, 5)]))
    assert script_calls(redis_server) - before <= 2  # one, or two if a call came after the first left
    takes = answers[:-1]
    admitted = [i for i, levels in enumerate(takes) if admits(levels)]
    # In arrival order, each saw what the ones before it took: 10, 9, ... then refusals, except
    # one more admitted if the refill made the empty bucket a hair above zero between two script calls.
    assert admitted == list(range(len(admitted))) and len(admitted) in (10, 11)
    assert [round(levels[0]) for levels in takes[:10]] == list(range(10, 0, -1))
    # A refused call took nothing, not even from its own bucket.
    for i, charge in enumerate(calls):
        [level] = await a.take([Charge(charge[1].bucket, own, 0)])
        assert level == pytest.approx(999 if i in admitted else 1000, abs=1)
    [level] = await a.take([Charge("client/other", own, 0)])
    assert level == pytest.approx(995, abs=1)


async def test_stopping_fails_the_waiting_calls_instead_of_leaving_them_hanging(
    redis_server: RedisServer, prefix: str
) -> None:
    store = RedisQuotas(redis_server.url, key_prefix=prefix)
    await store.start()
    pending = [asyncio.create_task(store.take([Charge(f"client/c{i}", Limit(10, 1), 1)])) for i in range(5)]
    await asyncio.sleep(0)  # all of them are waiting now
    await store.stop()
    for task in pending:
        try:
            levels = await asyncio.wait_for(task, 5)
        except BackendUnavailable:
            continue  # failed: Quotas lets its request through unchecked
        assert levels == [10]  # or answered, if its script call had gone out


@pytest.fixture
async def replicas(
    tmp_path: Path, redis_server: RedisServer, prefix: str
) -> AsyncIterator[list[RunningGateway]]:
    """Two gateways of one deployment (same Redis, same prefix), each with its own embedded log."""
    started: list[RunningGateway] = []
    try:
        for n in range(2):
            started.append(
                await start_gateway(
                    tmp_path / f"data{n}",
                    sessions=redis_server.url,
                    redis_key_prefix=prefix,
                    quota_client_produce_bytes_per_s=10,
                    quota_topic_consume_bytes_per_s=10,
                )
            )
        yield started
    finally:
        for gw in started:
            await gw.client.aclose()
            await gw.stop()


async def send(client: httpx.AsyncClient, topic: str, value: str, key: str) -> httpx.Response:
    return await client.post(
        f"/topics/{topic}",
        json={"records": [{"value": value}]},
        headers={"Content-Type": STRING, "X-API-Key": key},
    )


async def test_a_quota_used_up_through_one_replica_throttles_through_another(
    replicas: list[RunningGateway], name: str
) -> None:
    a, b = (gw.client for gw in replicas)
    assert (await send(a, name, BIG, "alice")).status_code == 200
    assert_throttled(await send(b, name, "y", "alice"), "client's produce quota")
    assert (await send(b, name, BIG, "bob")).status_code == 200

    r = await b.get(f"/topics/{name}/partitions/0/records")  # b's own log holds bob's record
    assert r.status_code == 200 and len(r.json()["records"]) == 1
    assert_throttled(await a.get(f"/topics/{name}/partitions/0/records"), f"topic {name!r}")


async def metric(client: httpx.AsyncClient, name: str) -> float:
    for line in (await client.get("/metrics")).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.parametrize("outage", ["stopped", "hung"])
async def test_without_redis_quotas_fail_open_and_come_back(
    tmp_path: Path, own_redis: RedisServer, prefix: str, name: str, outage: str
) -> None:
    gw = await start_gateway(
        tmp_path / "data",
        sessions=own_redis.url,
        redis_key_prefix=prefix,
        redis_connect_timeout_ms=CONNECT_TIMEOUT_MS,
        redis_socket_timeout_ms=SOCKET_TIMEOUT_MS,
        quota_client_produce_bytes_per_s=10,
    )
    client = gw.client
    try:
        assert (await send(client, name, BIG, "alice")).status_code == 200
        assert_throttled(await send(client, name, "y", "alice"))

        if outage == "stopped":
            own_redis.stop()
        else:
            own_redis.pause()
        try:
            for _ in range(3):  # produce without Idempotency-Key needs no Redis: the quota lets it pass
                assert (await send(client, name, BIG, "alice")).status_code == 200
        finally:
            if outage == "stopped":
                own_redis.start()  # back empty: every bucket is full again
            else:
                own_redis.resume()  # back as it was: alice still in debt
        assert await metric(client, "brokergate_quota_unchecked_requests_total") == 3

        statuses = []
        for _ in range(50):  # the quota is checked again within about a second
            statuses.append((await send(client, name, BIG, "alice")).status_code)
            if statuses[-1] == 429:
                break
            await asyncio.sleep(0.1)
        assert statuses[-1] == 429, statuses
    finally:
        await client.aclose()
        await gw.stop()
