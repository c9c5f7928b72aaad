"""Metadata, v3 topic admin, health and metrics."""

from __future__ import annotations

from tests.conftest import start_gateway
from tests.helpers import assignment, cluster_id, consumer, create_topic, poll_until, produce, subscribe


async def broker_ids(client) -> list[int]:
    cid = await cluster_id(client)
    return [b["broker_id"] for b in (await client.get(f"/v3/clusters/{cid}/brokers")).json()["data"]]


async def test_root_and_brokers(client):
    assert (await client.get("/")).json() == {}
    ids = await broker_ids(client)
    assert ids and (await client.get("/brokers")).json() == {"brokers": ids}


BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"


async def test_a_browser_at_the_root_gets_a_page_pointing_to_the_console_and_the_docs(tmp_path):
    """API clients keep Confluent's ``{}``; a browser's Accept gets links to /ui, /docs and
    /openapi.json, with the console's security headers."""
    gw = await start_gateway(tmp_path / "data")
    try:
        r = await gw.client.get("/", headers={"Accept": BROWSER})
        assert r.status_code == 200 and r.headers["content-type"] == "text/html; charset=utf-8"
        for path in ("/ui", "/docs", "/openapi.json"):
            assert f'href="{path}"' in r.text, path
        assert "default-src 'none'" in r.headers["content-security-policy"]
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["vary"] == "Accept"
        assert (await gw.client.get("/", headers={"Accept": "text/html"})).text == r.text
        for accept in (
            None,
            "*/*",
            "application/vnd.kafka.v2+json",
            "application/json",
            "text/html, application/json",
        ):
            r = await gw.client.get("/", headers={"Accept": accept} if accept else {})
            assert r.status_code == 200 and r.json() == {}, accept
            assert r.headers["vary"] == "Accept"
        assert (await gw.client.get("/", headers={"Accept": "text/plain"})).status_code == 406
    finally:
        await gw.stop()
    gw = await start_gateway(tmp_path / "data", ui=False)
    try:
        r = await gw.client.get("/", headers={"Accept": BROWSER})
        assert 'href="/docs"' in r.text and 'href="/ui"' not in r.text  # no console served, none named
    finally:
        await gw.stop()


async def test_topics_and_partitions(client, name):
    await create_topic(client, name, 3, retention_ms="3600000")
    assert name in (await client.get("/topics")).json()
    topic = (await client.get(f"/topics/{name}")).json()
    assert topic["name"] == name
    assert topic["configs"]["retention.ms"] == "3600000"
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    (broker,) = await broker_ids(client)
    assert topic["partitions"][0]["replicas"] == [{"broker": broker, "leader": True, "in_sync": True}]
    parts = (await client.get(f"/topics/{name}/partitions")).json()
    assert len(parts) == 3
    one = (await client.get(f"/topics/{name}/partitions/1")).json()
    assert one["partition"] == 1 and one["leader"] == broker


async def test_grow_partition_count(client, name):
    cid = await cluster_id(client)
    await create_topic(client, name, 2)
    grown = await client.patch(f"/v3/clusters/{cid}/topics/{name}", json={"partitions_count": 5})
    assert grown.status_code == 200 and grown.json()["partitions_count"] == 5
    assert len((await client.get(f"/topics/{name}/partitions")).json()) == 5
    shrink = await client.patch(f"/v3/clusters/{cid}/topics/{name}", json={"partitions_count": 2})
    assert shrink.status_code == 422


async def test_partition_offsets(client, name):
    await create_topic(client, name, 1)
    assert (await client.get(f"/topics/{name}/partitions/0/offsets")).json() == {
        "beginning_offset": 0,
        "end_offset": 0,
    }
    await produce(client, name, [{"value": "a"}, {"value": "b"}])
    assert (await client.get(f"/topics/{name}/partitions/0/offsets")).json() == {
        "beginning_offset": 0,
        "end_offset": 2,
    }


async def test_v3_topic_lifecycle(client, name):
    cid = await cluster_id(client)
    clusters = (await client.get("/v3/clusters")).json()
    assert clusters["kind"] == "KafkaClusterList" and clusters["data"][0]["cluster_id"] == cid
    assert (await client.get(f"/v3/clusters/{cid}")).json()["cluster_id"] == cid
    created = await create_topic(client, name, 2)
    assert (
        created["topic_name"] == name
        and created["partitions_count"] == 2
        and created["replication_factor"] == 1
    )
    again = await client.post(f"/v3/clusters/{cid}/topics", json={"topic_name": name, "partitions_count": 2})
    assert again.status_code == 400 and again.json()["error_code"] == 40002
    parts = (await client.get(f"/v3/clusters/{cid}/topics/{name}/partitions")).json()["data"]
    assert [(p["partition_id"], p["beginning_offset"], p["end_offset"]) for p in parts] == [
        (0, 0, 0),
        (1, 0, 0),
    ]
    listed = (await client.get(f"/v3/clusters/{cid}/topics")).json()
    assert name in [t["topic_name"] for t in listed["data"]]
    assert (await client.delete(f"/v3/clusters/{cid}/topics/{name}")).status_code == 204
    r = await client.get(f"/topics/{name}")
    assert r.status_code == 404 and r.json()["error_code"] == 40401
    r = await client.get(f"/v3/clusters/{cid}/topics/{name}")
    assert r.status_code == 404
    r = await client.get("/v3/clusters/no-such-cluster/topics")
    assert r.status_code == 404


async def test_health_ready_metrics(client, name):
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/readyz")).json() == {"status": "ready"}
    for backends in (["log"], ["coordinator", "sessions", "log", "log"]):
        r = await client.get("/readyz", params={"backend": backends})
        assert r.json() == {"status": "ready"}
    r = await client.get("/readyz", params={"backend": ["log", "kafka"]})
    assert r.status_code == 422 and r.json()["error_code"] == 42206
    await produce(client, name, [{"value": "m"}])
    text = (await client.get("/metrics")).text
    assert "brokergate_http_requests_total" in text
    assert f'brokergate_produced_records_total{{topic="{name}"}} 1.0' in text


async def test_docs_are_served(client):
    assert (await client.get("/docs")).status_code == 200
    doc = (await client.get("/openapi.json")).json()
    assert doc["info"]["title"] == "brokergate"


async def test_an_auto_created_topic_wakes_the_metadata_worker(tmp_path):
    # With a minute between metadata refreshes, only the wake-up an auto-created topic sends
    # can rebalance the pattern's group within the poll's few seconds.
    gw = await start_gateway(tmp_path / "gw", metadata_refresh_ms=60_000)
    try:
        base = await consumer(gw.client, "g")
        await subscribe(gw.client, base, pattern="woken-.*")
        assert await assignment(gw.client, base) == []
        await produce(gw.client, "woken-1", [{"value": "new topic"}])  # auto-created
        got = await poll_until(gw.client, base, 1, deadline_s=10)
        assert [(r["topic"], r["value"]) for r in got] == [("woken-1", "new topic")]
    finally:
        await gw.client.aclose()
        await gw.stop()
