"""Confluent's documented REST Proxy v2 curl examples, sent exactly as documented."""

from __future__ import annotations

import base64

from tests.helpers import poll_until

V2 = "application/vnd.kafka.v2+json"


async def test_binary_quickstart(client):
    r = await client.post(
        "/topics/binarytest",
        content='{"records":[{"value":"S2Fma2E="}]}',
        headers={"Content-Type": "application/vnd.kafka.binary.v2+json", "Accept": V2},
    )
    assert r.status_code == 200 and r.json()["offsets"][0]["offset"] == 0
    r = await client.post(
        "/consumers/my_binary_consumer",
        content='{"name": "my_consumer_instance", "format": "binary", "auto.offset.reset": "earliest"}',
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200
    base = "/consumers/my_binary_consumer/instances/my_consumer_instance"
    r = await client.post(
        f"{base}/subscription", content='{"topics":["binarytest"]}', headers={"Content-Type": V2}
    )
    assert r.status_code == 204
    got = await poll_until(client, base, 1, fmt="application/vnd.kafka.binary.v2+json")
    assert base64.b64decode(got[0]["value"]) == b"Kafka"
    assert got[0]["key"] is None and got[0]["partition"] == 0 and got[0]["offset"] == 0
    r = await client.delete(base, headers={"Content-Type": V2})
    assert r.status_code == 204


async def test_json_quickstart(client):
    r = await client.post(
        "/topics/jsontest",
        content='{"records":[{"value":{"foo":"bar"}}]}',
        headers={"Content-Type": "application/vnd.kafka.json.v2+json", "Accept": V2},
    )
    assert r.status_code == 200
    assert r.json() == {
        "offsets": [{"partition": 0, "offset": 0, "error_code": None, "error": None}],
        "key_schema_id": None,
        "value_schema_id": None,
    }
    r = await client.post(
        "/consumers/my_json_consumer",
        content='{"name": "my_consumer_instance", "format": "json", "auto.offset.reset": "earliest"}',
        headers={"Content-Type": V2},
    )
    base = "/consumers/my_json_consumer/instances/my_consumer_instance"
    assert r.json()["base_uri"].endswith(base)
    r = await client.post(
        f"{base}/subscription", content='{"topics":["jsontest"]}', headers={"Content-Type": V2}
    )
    assert r.status_code == 204
    got = await poll_until(client, base, 1, fmt="application/vnd.kafka.json.v2+json")
    assert got[0]["value"] == {"foo": "bar"} and got[0]["topic"] == "jsontest"
    assert (await client.delete(base, headers={"Content-Type": V2})).status_code == 204


async def test_topic_metadata_examples(client):
    await client.post(
        "/topics/test",
        json={"records": [{"value": "dGVzdA=="}]},
        headers={"Content-Type": "application/vnd.kafka.binary.v2+json"},
    )
    r = await client.get("/topics", headers={"Accept": V2})
    assert r.status_code == 200 and "test" in r.json()
    r = await client.get("/topics/test", headers={"Accept": V2})
    assert r.json()["name"] == "test"
    r = await client.get("/topics/test/partitions", headers={"Accept": V2})
    assert r.json()[0]["partition"] == 0
    r = await client.get("/brokers", headers={"Accept": V2})
    assert len(r.json()["brokers"]) == 1
