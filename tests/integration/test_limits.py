"""Limits a careless client meets: what it gets, and that nothing of a refused request is stored."""

from __future__ import annotations

import asyncio
import uuid
from urllib.parse import urlsplit

import httpx

from service.security.users import add_user
from tests.conftest import start_gateway
from tests.helpers import BINARY, V2, b64, create_topic


async def end_offset(client, topic: str) -> int:
    return int((await client.get(f"/topics/{topic}/partitions/0/offsets")).json()["end_offset"])


async def test_headers_count_toward_the_record_limit(tmp_path):
    gw = await start_gateway(tmp_path / "gw", max_record_bytes=1024)
    try:
        await create_topic(gw.client, "t", 1)
        header = {"name": "h", "value": b64(b"x" * 1024)}
        r = await gw.client.post(
            "/topics/t",
            json={"records": [{"value": b64("v"), "headers": [header]}]},
            headers={"Content-Type": BINARY},
        )
        assert r.status_code == 413 and r.json()["error_code"] == 41301, r.text
        small = {"name": "h", "value": b64(b"x" * 100)}
        r = await gw.client.post(
            "/topics/t",
            json={"records": [{"value": b64("v"), "headers": [small]}]},
            headers={"Content-Type": BINARY},
        )
        assert r.status_code == 200, r.text
        assert await end_offset(gw.client, "t") == 1
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_records_per_request_and_headers_per_record_are_bounded(tmp_path):
    gw = await start_gateway(tmp_path / "gw", max_records_per_request=3, max_headers_per_record=2)
    try:
        await create_topic(gw.client, "t", 1)
        four = {"records": [{"value": b64("v")}] * 4}
        r = await gw.client.post("/topics/t", json=four, headers={"Content-Type": BINARY})
        assert r.status_code == 413 and r.json()["error_code"] == 41301 and "at most 3" in r.json()["message"]
        three_headers = [{"name": f"h{i}", "value": None} for i in range(3)]
        r = await gw.client.post(
            "/topics/t",
            json={"records": [{"value": b64("v")}, {"value": b64("w"), "headers": three_headers}]},
            headers={"Content-Type": BINARY},
        )
        assert r.status_code == 413 and "records[1]" in r.json()["message"], r.text
        assert await end_offset(gw.client, "t") == 0  # nothing of either request
        r = await gw.client.post(
            "/topics/t",
            json={"records": [{"value": b64("v"), "headers": three_headers[:2]}] * 3},
            headers={"Content-Type": BINARY},
        )
        assert r.status_code == 200, r.text
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_an_instance_timeout_has_an_upper_bound(client):
    for timeout in (10**15, 2**70, 3_600_001):
        r = await client.post(
            "/consumers/g", json={"consumer.instance.timeout.ms": timeout}, headers={"Content-Type": V2}
        )
        # 2**70 is not even an int64: the body breaks its class's constraint (422, as Confluent's
        # bean validation), the others are bad configs
        assert r.status_code == 422 and r.json()["error_code"] in (42204, 422), (timeout, r.text)
    r = await client.post(
        "/consumers/g", json={"consumer.instance.timeout.ms": 3_600_000}, headers={"Content-Type": V2}
    )
    assert r.status_code == 200, r.text


async def test_a_gateway_starts_and_serves_the_rest_when_one_topic_cannot_be_opened(tmp_path):
    gw = await start_gateway(tmp_path / "gw")
    try:
        await create_topic(gw.client, "good", 1)
        await create_topic(gw.client, "bad", 1)
    finally:
        await gw.client.aclose()
        await gw.stop()
    partition = tmp_path / "gw" / "topics" / "bad" / "0"
    for f in partition.iterdir():
        f.unlink()
    partition.rmdir()
    partition.write_bytes(b"")  # damage no restart can repair

    gw = await start_gateway(tmp_path / "gw")
    try:
        r = await gw.client.get("/readyz")
        assert r.status_code == 200 and list(r.json()["unopened_topics"]) == ["bad"], r.text
        r = await gw.client.get("/topics/bad")
        assert r.status_code == 503 and "could not be opened" in r.json()["message"], r.text
        r = await gw.client.post(
            "/topics/good", json={"records": [{"value": b64("x")}]}, headers={"Content-Type": BINARY}
        )
        assert r.status_code == 200, r.text
        cid = (await gw.client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
        assert (await gw.client.delete(f"/v3/clusters/{cid}/topics/bad")).status_code == 204
        assert "unopened_topics" not in (await gw.client.get("/readyz")).json()
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_consumer_instances_are_bounded_per_group_and_in_all(tmp_path):
    gw = await start_gateway(tmp_path / "gw", max_instances_per_group=2, max_instances=3)
    try:

        async def create(group: str):
            return await gw.client.post(f"/consumers/{group}", json={}, headers={"Content-Type": V2})

        assert [(await create("a")).status_code for _ in range(2)] == [200, 200]
        full = await create("a")
        assert full.status_code == 409 and full.json()["error_code"] == 40903, full.text
        assert "group 'a'" in full.json()["message"]
        made = await create("b")
        assert made.status_code == 200
        r = await create("c")
        assert r.status_code == 409 and "gateway holds 3" in r.json()["message"], r.text
        # deleting one makes room again
        path = urlsplit(made.json()["base_uri"]).path
        assert (await gw.client.delete(path, headers={"Content-Type": V2})).status_code == 204
        assert (await create("c")).status_code == 200
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_open_long_polls_are_bounded_with_a_confluent_503(tmp_path):
    gw = await start_gateway(tmp_path / "gw", max_open_polls=1)
    try:
        await create_topic(gw.client, "t", 1)
        waiting = asyncio.create_task(
            gw.client.get("/topics/t/partitions/0/records", params={"offset": 0, "timeout": 3000})
        )
        await asyncio.sleep(0.3)  # it is waiting now
        r = await gw.client.get("/topics/t/partitions/0/records", params={"offset": 0, "timeout": 3000})
        assert r.status_code == 503 and r.json()["error_code"] == 50301 and r.headers["Retry-After"] == "1"
        made = await gw.client.post("/consumers/g", json={}, headers={"Content-Type": V2})
        path = urlsplit(made.json()["base_uri"]).path
        r = await gw.client.get(f"{path}/records", params={"timeout": 100})
        assert r.status_code == 503, r.text  # polls and reads share the bound
        assert (await waiting).status_code == 200
        r = await gw.client.get(f"{path}/records", params={"timeout": 0})  # room again
        assert r.status_code == 200, r.text
    finally:
        await gw.client.aclose()
        await gw.stop()


async def _as(gw, user: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=gw.url, auth=(user, f"{user}-pw"), timeout=30)


async def _two_users_gateway(tmp_path, **limits):
    users = tmp_path / "users"
    for user in ("alice", "bob"):
        add_user(users, user, f"{user}-pw")
    return await start_gateway(tmp_path / "gw", auth="basic", users_file=users, **limits)


async def _create(client: httpx.AsyncClient, group: str, *, share: bool = False) -> httpx.Response:
    """A consumer instance of ``group``, or a share consumer when ``share``."""
    path = f"/share-groups/{group}/consumers" if share else f"/consumers/{group}"
    return await client.post(path, json={}, headers={"Content-Type": V2})


async def test_one_principal_at_its_share_of_instances_does_not_stop_another(tmp_path):
    gw = await _two_users_gateway(tmp_path, max_instances=10, max_instances_per_principal=3)
    alice, bob = await _as(gw, "alice"), await _as(gw, "bob")
    try:
        assert [(await _create(alice, g)).status_code for g in ("a", "b")] == [200, 200]
        assert (await _create(alice, "q", share=True)).status_code == 200  # share consumers count too
        for share in (False, True):
            r = await _create(alice, "c", share=share)
            assert r.status_code == 409 and r.json()["error_code"] == 40903, r.text
            assert "one client may hold" in r.json()["message"]
        assert [(await _create(bob, g)).status_code for g in ("a", "c", "d")] == [200, 200, 200]
        assert (await _create(bob, "e")).status_code == 409  # bob's own share, not alice's
    finally:
        await alice.aclose()
        await bob.aclose()
        await gw.client.aclose()
        await gw.stop()


async def test_a_principals_share_of_instances_is_counted_across_replicas_with_redis(tmp_path, redis_server):
    prefix = f"share-{uuid.uuid4().hex[:8]}:"
    shared = {"sessions": redis_server.url, "redis_key_prefix": prefix, "max_instances_per_principal": 2}
    users = tmp_path / "users"
    for user in ("alice", "bob"):
        add_user(users, user, f"{user}-pw")
    a = await start_gateway(tmp_path / "a", auth="basic", users_file=users, **shared)
    b = await start_gateway(tmp_path / "b", auth="basic", users_file=users, **shared)
    alice_a, alice_b, bob_b = await _as(a, "alice"), await _as(b, "alice"), await _as(b, "bob")
    try:
        made = await _create(alice_a, "g")
        assert made.status_code == 200 and (await _create(alice_b, "g")).status_code == 200
        r = await _create(alice_b, "h")  # through the other replica: her share is taken all the same
        assert r.status_code == 409 and "one client may hold" in r.json()["message"], r.text
        assert (await _create(bob_b, "h")).status_code == 200
        path = urlsplit(made.json()["base_uri"]).path
        assert (await alice_a.delete(path, headers={"Content-Type": V2})).status_code == 204
        assert (await _create(alice_b, "h")).status_code == 200  # room again, seen by the other replica
    finally:
        for client in (alice_a, alice_b, bob_b):
            await client.aclose()
        for gw in (a, b):
            await gw.client.aclose()
            await gw.stop()


async def test_one_principal_at_its_share_of_long_polls_does_not_stop_another(tmp_path):
    gw = await _two_users_gateway(tmp_path, max_open_polls=10, max_open_polls_per_principal=1)
    alice, bob = await _as(gw, "alice"), await _as(gw, "bob")
    try:
        await create_topic(alice, "t", 1)  # authentication alone: ACLs are off
        read = "/topics/t/partitions/0/records"
        waiting = asyncio.create_task(alice.get(read, params={"offset": 0, "timeout": 3000}))
        await asyncio.sleep(0.3)  # it is waiting now
        r = await alice.get(read, params={"offset": 0, "timeout": 100})
        assert r.status_code == 503 and r.json()["error_code"] == 50301 and r.headers["Retry-After"] == "1"
        assert "one client may hold" in r.json()["message"]
        r = await bob.get(read, params={"offset": 0, "timeout": 100})
        assert r.status_code == 200, r.text
        assert (await waiting).status_code == 200
    finally:
        await alice.aclose()
        await bob.aclose()
        await gw.client.aclose()
        await gw.stop()


async def test_without_authentication_a_share_is_an_address(tmp_path):
    gw = await start_gateway(tmp_path / "gw", max_open_streams=10, max_open_streams_per_principal=1)
    other = httpx.AsyncClient(
        base_url=gw.url, transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2"), timeout=30
    )
    try:
        await create_topic(gw.client, "t", 1)
        stream = "/topics/t/partitions/0/records"
        headers = {"Accept": "text/event-stream"}
        async with gw.client.stream("GET", stream, params={"offset": 0}, headers=headers) as first:
            assert first.status_code == 200
            r = await gw.client.get(stream, params={"offset": 0}, headers=headers)
            assert r.status_code == 503 and "one client may hold" in r.json()["message"], r.text
            async with other.stream("GET", stream, params={"offset": 0}, headers=headers) as second:
                assert second.status_code == 200  # another address, its own share
    finally:
        await other.aclose()
        await gw.client.aclose()
        await gw.stop()
