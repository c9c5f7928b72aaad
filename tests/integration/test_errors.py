"""Bad input: every case gets a 4xx in Confluent's error shape, and nothing is stored."""

from __future__ import annotations

import json

import pytest

from tests.helpers import BINARY, JSON, STRING, V2, b64, cluster_id, consumer, create_topic, produce


def assert_error(r, status: int, code: int | None = None) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error_code", "message"} and body["message"]
    if code is not None:
        assert body["error_code"] == code, body


async def end_offset(client, topic: str, partition: int = 0) -> int:
    return (await client.get(f"/topics/{topic}/partitions/{partition}/offsets")).json()["end_offset"]


@pytest.mark.parametrize(
    ("body", "content_type", "code"),
    [
        # what Confluent's JSON binding and record serializer refuse is its 400 (error_code 400)
        (b"{not json", BINARY, 400),
        (b'{"records": {"value": "x"}}', BINARY, 400),
        (b'{"records": []}', BINARY, 42206),
        (b'["records"]', BINARY, 400),
        (b'{"records": [{"value": "!!!not base64"}]}', BINARY, 400),
        (b'{"records": [{"value": 12}]}', BINARY, 400),
        (b'{"records": [{"value": 12}]}', STRING, 400),
        (b'{"records": [{"value": "a", "partition": -1}]}', BINARY, 42206),
        (b'{"records": [{"value": "a", "partition": "zero"}]}', BINARY, 400),
        (b'{"records": [{"value": "YQ==", "bogus": 1}]}', BINARY, 42206),
        (b'{"records": [{"value": "YQ==", "timestamp": "yesterday"}]}', BINARY, 42206),
        (b'{"records": [{"value": "YQ==", "timestamp": -5}]}', BINARY, 42206),
        (b'{"records": [{"value": "YQ==", "headers": [{"value": "YQ=="}]}]}', BINARY, 42203),
        (b'{"records": [{"value": "YQ==", "headers": "h"}]}', BINARY, 42203),
        (b'{"records": [{"value": 1e400}]}', JSON, 400),
    ],
)
async def test_bad_produce_bodies_are_4xx_and_store_nothing(client, name, body, content_type, code):
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": "good"}])
    r = await client.post(f"/topics/{name}", content=body, headers={"Content-Type": content_type})
    assert_error(r, 400 if code == 400 else 422, code)
    assert await end_offset(client, name) == 1


async def test_one_bad_record_rejects_the_whole_batch(client, name):
    await create_topic(client, name, 1)
    r = await client.post(
        f"/topics/{name}",
        json={"records": [{"value": b64("ok")}, {"value": "%%%"}]},
        headers={"Content-Type": BINARY},
    )
    assert_error(r, 400, 400)
    assert "records[1]" in r.json()["message"]
    assert await end_offset(client, name) == 0


async def test_unknown_partition_in_batch_stores_nothing(client, name):
    await create_topic(client, name, 2)
    r = await client.post(
        f"/topics/{name}",
        json={"records": [{"value": "a", "partition": 0}, {"value": "b", "partition": 7}]},
        headers={"Content-Type": STRING},
    )
    assert_error(r, 404, 40402)
    assert await end_offset(client, name, 0) == 0


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/xml",
        "application/vnd.kafka.thrift.v2+json",
    ],
)
async def test_wrong_content_type_is_415(client, name, content_type):
    r = await client.post(
        f"/topics/{name}", content=b'{"records": []}', headers={"Content-Type": content_type}
    )
    assert_error(r, 415, 415)  # Jersey's NotSupportedException: the status as the code
    # Jersey's words, then which types the route reads, as the 406 says which it answers in
    message = r.json()["message"]
    assert message.startswith("HTTP 415 Unsupported Media Type: this route reads "), message
    assert f"{BINARY}, {JSON}, {STRING}," in message and "or application/json (read as binary)" in message
    assert f"(read as binary), not {content_type!r}" in message, message


FORM = "application/x-www-form-urlencoded"


async def test_curl_without_a_content_type_is_told_what_to_send(client, name):
    """``curl -d`` sends a form's Content-Type unless told otherwise: the 415 names that mistake."""
    r = await client.post(
        f"/topics/{name}", content=b'{"records": [{"value": {"a": 1}}]}', headers={"Content-Type": FORM}
    )
    assert_error(r, 415, 415)
    assert r.json()["message"].endswith(f"not {FORM!r} (what curl -d sends without -H 'Content-Type: …')."), (
        r.text
    )
    r = await client.post("/consumers/g", content=b'{"name": "c"}', headers={"Content-Type": FORM})
    assert_error(r, 415, 415)
    assert r.json()["message"] == (
        f"HTTP 415 Unsupported Media Type: this route reads {V2} or application/json, not {FORM!r} "
        "(what curl -d sends without -H 'Content-Type: …')."
    )


@pytest.mark.parametrize("content_type", ["application/json", V2, None])
@pytest.mark.parametrize(
    ("value", "refusal"),
    [
        ({"a": 1}, 'data={"a":1} is not a base64 string.'),
        ("hello", 'data="hello" is not a valid base64 string.'),
    ],
)
async def test_json_values_sent_as_plain_json_are_told_it_means_binary(
    client, name, content_type, value, refusal
):
    """Plain ``application/json`` (or the v2 type, or none) is the binary format, as Confluent reads
    it: a value that is no base64 is refused in Confluent's words, then told why and what to send."""
    await create_topic(client, name, 1)
    body = json.dumps({"records": [{"value": value}]}).encode()  # content=: no Content-Type of httpx's
    headers = {} if content_type is None else {"Content-Type": content_type}
    r = await client.post(f"/topics/{name}", content=body, headers=headers)
    assert ("content-type" in r.request.headers) == (content_type is not None)
    assert_error(r, 400, 400)
    said = "A request without a Content-Type" if content_type is None else f"Content-Type {content_type}"
    assert r.json()["message"] == (
        f"Bad Request: {refusal} (records[0].value) {said} is read as the binary format, whose keys "
        f"and values are base64: JSON keys and values need Content-Type {JSON}."
    )
    r = await client.post(
        f"/topics/{name}", json={"records": [{"value": value}]}, headers={"Content-Type": BINARY}
    )
    assert r.json() == {"error_code": 400, "message": f"Bad Request: {refusal} (records[0].value)"}
    r = await client.post(
        f"/topics/{name}", json={"records": [{"value": value}]}, headers={"Content-Type": JSON}
    )
    assert r.status_code == 200, r.text
    assert await end_offset(client, name) == 1


async def test_body_over_the_limit_is_413(tmp_path):
    from tests.conftest import start_gateway

    gw = await start_gateway(tmp_path / "d", max_request_bytes=2048)
    try:
        r = await gw.client.post(
            "/topics/big",
            content=b'{"records":[{"value":"' + b"A" * 4096 + b'"}]}',
            headers={"Content-Type": BINARY},
        )
        assert_error(r, 413, 41301)
    finally:
        await gw.client.aclose()
        await gw.stop()


@pytest.mark.parametrize(
    "topic",
    # "." and ".." never reach a topic route: HTTP clients resolve them as dot segments.
    ["a" * 250, "bad name", "semi;colon", "ünïcode", "%2e%2e", "a%2Fb"],
)
async def test_bad_topic_names_are_rejected(client, topic):
    r = await client.post(
        f"/topics/{topic}", json={"records": [{"value": "x"}]}, headers={"Content-Type": STRING}
    )
    assert r.status_code in (404, 422), r.text
    assert r.json()["error_code"] in (42207, 404, 40401)


async def test_path_traversal_topic_names_never_touch_the_disk(client, gateway):
    cid = await cluster_id(client)
    for evil in ["../../etc", "..", ".", "a/../../b", "/abs", "x\x00y"]:
        r = await client.post(f"/v3/clusters/{cid}/topics", json={"topic_name": evil, "partitions_count": 1})
        assert_error(r, 422, 42207)
    data_dir = gateway.settings.data_dir.resolve()
    for path in data_dir.parent.rglob("*"):
        assert path.resolve().is_relative_to(data_dir.parent)


async def test_unknown_topic_and_partition(client, name):
    assert_error(await client.get(f"/topics/{name}"), 404, 40401)
    await create_topic(client, name, 1)
    assert_error(await client.get(f"/topics/{name}/partitions/3"), 404, 40402)
    assert_error(await client.get(f"/topics/{name}/partitions/3/offsets"), 404, 40402)
    assert_error(await client.get(f"/topics/{name}/partitions/abc"), 404)
    r = await client.post(
        f"/topics/{name}/partitions/9", json={"records": [{"value": "x"}]}, headers={"Content-Type": STRING}
    )
    assert_error(r, 404, 40402)


async def test_auto_create_off_gives_40401(tmp_path):
    from tests.conftest import start_gateway

    gw = await start_gateway(tmp_path / "d", auto_create_topics_enable=False)
    try:
        r = await gw.client.post(
            "/topics/nope", json={"records": [{"value": "x"}]}, headers={"Content-Type": STRING}
        )
        assert_error(r, 404, 40401)
    finally:
        await gw.client.aclose()
        await gw.stop()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        # Confluent's: its request class's 422 for a format, Kafka's consumer's config errors
        # (test_proxy_conformance::test_consumer_configs_confluent_refuses has its 400s)
        ({"format": "thrift"}, 422),
        ({"format": "xml"}, 422),
        ({"auto.offset.reset": "smallest"}, 42204),
        ({"auto.commit.enable": "maybe"}, 42204),
        ({"fetch.min.bytes": -2}, 40001),
        ({"name": "a/b"}, 42204),  # an instance name is one path segment
        ({"name": "../x"}, 42204),
        ({"partition.assignment.strategy": "fastest"}, 42204),
        ({"consumer.instance.timeout.ms": 5}, 42204),
    ],
)
async def test_bad_consumer_configs(client, name, body, code):
    r = await client.post(f"/consumers/{name}", json=body, headers={"Content-Type": V2})
    assert_error(r, 422, code)


async def test_bad_subscriptions(client, name):
    base = await consumer(client, name)
    # {}, {"topics": []} and topics with a pattern are Confluent's no-op, unsubscribe and topics
    # (test_proxy_conformance)
    for body in [
        {"topic_pattern": "("},
        {"topics": ["bad name"]},
    ]:
        r = await client.post(f"{base}/subscription", json=body, headers={"Content-Type": V2})
        assert r.status_code == 422, (body, r.text)
    # what Confluent's JSON binding refuses is its 400 (test_proxy_conformance has each)
    r = await client.post(f"{base}/subscription", json={"topics": "a"}, headers={"Content-Type": V2})
    assert_error(r, 400, 400)
    r = await client.post(f"{base}/subscription", content=b"[", headers={"Content-Type": V2})
    assert_error(r, 400, 400)


async def test_bad_seeks_and_commits(client, name):
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}")
    r = await client.post(
        f"{base}/positions",
        json={"offsets": [{"topic": name, "partition": 0, "offset": -3}]},
        headers={"Content-Type": V2},
    )
    assert_error(r, 422)
    r = await client.post(f"{base}/positions", json={}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text  # nothing to seek: Confluent's KafkaConsumerState.seek
    r = await client.post(f"{base}/positions", headers={"Content-Type": V2})
    assert_error(r, 422)  # no body: its @NotNull
    r = await client.post(
        f"{base}/offsets",
        json={"offsets": [{"topic": name, "partition": 5, "offset": 1}]},
        headers={"Content-Type": V2},
    )
    assert_error(r, 404, 40402)
    r = await client.post(
        f"{base}/assignments",
        json={"partitions": [{"topic": "missing-topic", "partition": 0}]},
        headers={"Content-Type": V2},
    )
    assert_error(r, 404, 40401)


async def test_unknown_instance_everywhere(client, name):
    base = f"/consumers/{name}/instances/ghost"
    for method, path in [
        ("GET", "/records"),
        ("GET", "/subscription"),
        ("DELETE", ""),
        ("GET", "/assignments"),
        ("POST", "/offsets"),
        ("GET", "/offsets"),
    ]:
        r = await client.request(method, base + path, headers={"Content-Type": V2})
        assert_error(r, 404, 40403)


async def test_bad_query_parameters(client, name):
    await create_topic(client, name, 1)
    r = await client.get(f"/topics/{name}/partitions/0/records", params={"offset": -1})
    assert_error(r, 422)
    r = await client.get(f"/topics/{name}/partitions/0/records", params={"timeout": "soon"})
    assert_error(r, 422)


async def test_unknown_route_and_method(client):
    assert_error(await client.get("/no/such/thing"), 404)
    assert_error(await client.put("/topics"), 405)


@pytest.mark.parametrize(
    "body",
    [
        {"topic_name": "ok", "partitions_count": 0},
        {"topic_name": "ok", "partitions_count": -2},
        {
            "topic_name": "ok",
            "partitions_count": 1,
            "configs": [{"name": "retention.ms", "value": "soon"}],
        },
        {
            "topic_name": "ok",
            "partitions_count": 1,
            "configs": [{"name": "no.such.config", "value": "1"}],
        },
        {"topic_name": "ok", "partitions_count": 1, "replication_factor": 3},
        {"partitions_count": 1},
    ],
)
async def test_bad_topic_creation(client, body):
    cid = await cluster_id(client)
    r = await client.post(f"/v3/clusters/{cid}/topics", json=body)
    # no topic_name: CreateTopicRequest's builder throws, Jackson's 400
    assert_error(r, 422 if "topic_name" in body else 400)
    assert (await client.get("/topics/ok")).status_code == 404


async def test_unknown_consumer_group(client, name):
    cid = await cluster_id(client)
    for suffix in ("", "/lags", "/lag-summary"):
        r = await client.get(f"/v3/clusters/{cid}/consumer-groups/{name}{suffix}")
        assert_error(r, 404, 40405)
