"""Limits a careless client meets: what it gets, and that nothing of a refused request is stored."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

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
        # 2**70 is not even an int64: the body itself is refused (42206), the others are bad configs
        assert r.status_code == 422 and r.json()["error_code"] in (42204, 42206), (timeout, r.text)
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
