"""Quotas through the HTTP API on the embedded store: 429 + Retry-After, per client and per topic.

Rates are tiny and records big, so a bucket that a test empties stays in
debt for much longer than the next request takes, however slow the machine;
tests that wait for a refill wait exactly what Retry-After says.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.server.openapi import document
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import STRING, V2, consumer, poll, produce, subscribe

GatewayFactory = Callable[..., Awaitable[RunningGateway]]
BIG = "x" * 1000  # 1000 bytes as a string-format record value


@pytest.fixture
async def quota_gateway(tmp_path: Path) -> AsyncIterator[GatewayFactory]:
    started: list[RunningGateway] = []

    async def start(**settings: object) -> RunningGateway:
        gw = await start_gateway(tmp_path / f"data{len(started)}", **settings)
        started.append(gw)
        return gw

    try:
        yield start
    finally:
        for gw in started:
            await gw.client.aclose()
            await gw.stop()


async def send(
    client: httpx.AsyncClient, topic: str, value: str, *, key: str | None = None, **headers: str
) -> httpx.Response:
    """One string record; ``key`` is the X-API-Key, the other headers as given (``_`` for ``-``)."""
    sent = {"Content-Type": STRING, **{k.replace("_", "-"): v for k, v in headers.items()}}
    if key is not None:
        sent["X-API-Key"] = key
    return await client.post(f"/topics/{topic}", json={"records": [{"value": value}]}, headers=sent)


def assert_throttled(r: httpx.Response, *words: str) -> int:
    """A Confluent-shaped 429; returns its Retry-After."""
    assert r.status_code == 429, r.text
    assert r.headers["content-type"] == V2
    body = r.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == 42901
    for word in words:
        assert word in body["message"], body["message"]
    retry_after = int(r.headers["Retry-After"])
    assert retry_after >= 1
    return retry_after


async def end_offset(client: httpx.AsyncClient, topic: str) -> int:
    r = await client.get(f"/topics/{topic}/partitions/0/offsets")
    return int(r.json()["end_offset"])


async def throttled_count(client: httpx.AsyncClient, quota: str) -> float:
    for line in (await client.get("/metrics")).text.splitlines():
        if line.startswith(f'brokergate_throttled_requests_total{{quota="{quota}"}}'):
            return float(line.split()[-1])
    return 0.0


async def test_produce_over_the_quota_is_429_until_retry_after(
    quota_gateway: GatewayFactory, name: str
) -> None:
    gw = await quota_gateway(quota_client_produce_bytes_per_s=1000)
    client = gw.client
    assert (await send(client, name, "x" * 2500)).status_code == 200  # the burst lets it in: now in debt
    assert_throttled(await send(client, name, "y"), "client's produce quota", "1000 bytes/s")
    r = await client.post(
        f"/topics/{name}/partitions/0", json={"records": [{"value": "y"}]}, headers={"Content-Type": STRING}
    )
    assert_throttled(r)
    retry_after = assert_throttled(await send(client, name, "y", Idempotency_Key="k1"))
    assert await end_offset(client, name) == 1  # nothing refused was stored
    assert await throttled_count(client, "client_produce") == 3

    await asyncio.sleep(retry_after)
    r = await send(client, name, "y", Idempotency_Key="k1")  # the refused key was not used up
    assert r.status_code == 200, r.text
    assert r.headers["Idempotency-Replayed"] == "false"
    assert await end_offset(client, name) == 2


async def test_a_topic_quota_is_shared_by_every_client(quota_gateway: GatewayFactory, name: str) -> None:
    gw = await quota_gateway(quota_topic_produce_bytes_per_s=10)
    client = gw.client
    assert (await send(client, name, BIG, key="alice")).status_code == 200
    assert_throttled(await send(client, name, "y", key="bob"), f"produce quota of topic {name!r}")
    assert (await send(client, f"{name}-other", BIG, key="bob")).status_code == 200
    assert (await send(client, f"{name}-other-2", BIG, key="alice")).status_code == 200
    assert await throttled_count(client, "topic_produce") == 1


async def test_a_client_quota_follows_the_client_across_topics(
    quota_gateway: GatewayFactory, name: str
) -> None:
    gw = await quota_gateway(quota_client_produce_bytes_per_s=10)
    client = gw.client
    assert (await send(client, name, BIG, key="alice")).status_code == 200
    assert_throttled(await send(client, f"{name}-other", "y", key="alice"), "client's produce quota")
    assert (await send(client, name, BIG, key="bob")).status_code == 200  # each key its own bucket

    # Without a key a client is its address; through a trusted proxy (loopback here), the one it reports.
    assert (await send(client, name, BIG, X_Forwarded_For="192.0.2.1")).status_code == 200
    assert_throttled(await send(client, name, "y", X_Forwarded_For="192.0.2.1"))
    assert (await send(client, name, BIG, X_Forwarded_For="192.0.2.2")).status_code == 200


async def test_the_client_header_is_configurable(quota_gateway: GatewayFactory, name: str) -> None:
    gw = await quota_gateway(quota_client_produce_bytes_per_s=10, quota_client_header="X-Tenant")
    client = gw.client
    assert (await send(client, name, BIG, X_Tenant="a")).status_code == 200
    assert_throttled(await send(client, name, "y", X_Tenant="a"))
    assert (await send(client, name, BIG, X_Tenant="b")).status_code == 200
    assert (await send(client, name, BIG, key="a")).status_code == 200  # X-API-Key means nothing now


async def test_a_poll_is_refused_once_its_bytes_put_the_client_in_debt(
    quota_gateway: GatewayFactory, name: str
) -> None:
    gw = await quota_gateway(quota_client_consume_bytes_per_s=1000)
    client = gw.client
    await produce(client, name, [{"value": "a" * 2000}, {"value": "b" * 2000}])
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, name)

    first = await poll(client, base, timeout=5000, max_bytes=1)  # one record at most: 2000 bytes
    assert [r["value"][0] for r in first] == ["a"]
    r = await client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": STRING})
    retry_after = assert_throttled(r, "client's consume quota")

    await asyncio.sleep(retry_after)
    assert [r["value"][0] for r in await poll(client, base, timeout=5000)] == [
        "b"
    ]  # the refusal skipped none
    assert (await send(client, name, "produce has no quota here")).status_code == 200


async def test_a_hot_topic_throttles_its_readers_only(quota_gateway: GatewayFactory, name: str) -> None:
    hot, cold = name, f"{name}-cold"
    gw = await quota_gateway(quota_topic_consume_bytes_per_s=10)
    client = gw.client
    await produce(client, hot, [{"value": BIG}])
    await produce(client, cold, [{"value": BIG}])

    r = await client.get(f"/topics/{hot}/partitions/0/records", params={"offset": 0})
    assert r.status_code == 200 and len(r.json()["records"]) == 1
    r = await client.get(
        f"/topics/{hot}/partitions/0/records", params={"offset": 0}, headers={"X-API-Key": "b"}
    )
    assert_throttled(r, f"consume quota of topic {hot!r}")

    reader_of_hot = await consumer(client, f"g1-{name}")
    await subscribe(client, reader_of_hot, hot)
    for _ in range(20):  # refused as soon as the group has given it the hot topic's partition
        r = await client.get(f"{reader_of_hot}/records", params={"timeout": 100}, headers={"Accept": STRING})
        if r.status_code != 200:
            break
    assert_throttled(r, hot)

    reader_of_cold = await consumer(client, f"g2-{name}")
    await subscribe(client, reader_of_cold, cold)
    got: list[dict[str, Any]] = []
    for _ in range(20):
        got = await poll(client, reader_of_cold, timeout=500)
        if got:
            break
    assert [r["topic"] for r in got] == [cold]


async def test_a_request_quota_counts_produce_and_reads(quota_gateway: GatewayFactory, name: str) -> None:
    gw = await quota_gateway(quota_client_requests_per_s=0.5, quota_burst_s=2)
    client = gw.client
    statuses = [(await send(client, name, "v", key="k")).status_code for _ in range(3)]
    assert statuses[0] == 200 and 429 in statuses
    r = await client.get(f"/topics/{name}/partitions/0/records", headers={"X-API-Key": "k"})
    assert_throttled(r, "request quota", "0.5 requests/s")
    assert (await send(client, name, "v", key="other")).status_code == 200


def test_the_openapi_document_declares_the_429s() -> None:
    paths = document()["paths"]
    for path, method in (
        ("/topics/{topic}", "post"),
        ("/topics/{topic}/partitions/{partition}", "post"),
        ("/topics/{topic}/partitions/{partition}/records", "get"),
        ("/consumers/{group}/instances/{instance}/records", "get"),
    ):
        throttled = paths[path][method]["responses"]["429"]
        assert "Retry-After" in throttled["headers"], path
        assert throttled["content"][V2]["schema"]["$ref"].endswith("/ErrorBody"), path
