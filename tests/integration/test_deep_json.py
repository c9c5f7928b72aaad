"""JSON nested deeper than MAX_JSON_DEPTH: a Confluent-shaped 4xx on every route that takes JSON, never a 500.

Before the limit, a value nested 400 to 1,023 levels deep (which orjson parses) reached code that
walks it recursively and answered 500 with a traceback in the log.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import websockets

from service.api.access import check_rules
from service.server.app import create_app
from service.settings import Settings
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import JSON, V2, b64, consumer, create_topic

LIMIT = 64
DEPTHS = (LIMIT + 1, 500, 1000)  # past the limit; and where RecursionError used to come
SR_TYPE = "application/vnd.schemaregistry.v1+json"
BODY_METHODS = ("POST", "PUT", "PATCH")


def deep(depth: int, leaf: str = "1") -> str:
    """``depth`` arrays and objects, alternating, around ``leaf``."""
    opening = "".join('{"a":' if i % 2 else "[" for i in range(depth))
    closing = "".join("}" if i % 2 else "]" for i in reversed(range(depth)))
    return opening + leaf + closing


def bodies(depth: int) -> list[str]:
    """Deep JSON where each kind of body has it: the whole body, an ignored field, a record's value."""
    nested = deep(depth - 3)
    return [
        deep(depth),
        '{"ignored":' + deep(depth - 1) + "}",
        '{"records":[{"value":' + nested + "}]}",
        '{"records":[{"value":1}],"ignored":' + deep(depth - 1) + "}",
        '{"schema":"{}","ignored":' + deep(depth - 1) + "}",
    ]


def confluent_4xx(r: httpx.Response, what: str) -> None:
    assert 400 <= r.status_code < 500, f"{what}: {r.status_code} {r.text[:200]}"
    body = r.json()
    assert isinstance(body["error_code"], int) and isinstance(body["message"], str), what


@pytest.fixture(params=[True, False], ids=["fast-path", "routed"])
async def gw(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    running = await start_gateway(tmp_path / "data", produce_fast_path=request.param)
    try:
        yield running
    finally:
        await running.client.aclose()
        await running.stop()


async def _fill(gw: RunningGateway) -> dict[str, str]:
    """The resources the routes name: a topic, a consumer and a share consumer, a schema."""
    client = gw.client
    await create_topic(client, "t", 1)
    await consumer(client, "g", name="i")
    r = await client.post("/share-groups/sg/consumers", json={"name": "i"}, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text
    r = await client.post(
        "/schema-registry/subjects/t-value/versions",
        json={"schema": '{"type": "string"}'},
        headers={"Content-Type": SR_TYPE},
    )
    assert r.status_code == 200, r.text
    cluster = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    return {"cluster_id": cluster}


def _path(template: str, cluster: str) -> str:
    group = "sg" if template.startswith("/share-groups") or "/share-groups/" in template else "g"
    return template.format(
        topic="t",
        partition=0,
        group=group,
        instance="i",
        cluster_id=cluster,
        subject=quote("t-value", safe=""),
        version=1,
        id=1,
        asset="main.js",
        name="p",  # a push subscription's
    )


def _content_types(template: str) -> list[str]:
    if template.startswith("/schema-registry"):
        return [SR_TYPE]
    if template.startswith("/topics/"):  # produce: every embedded format
        return [f"application/vnd.kafka.{fmt}.v2+json" for fmt in ("json", "binary", "avro", "jsonschema")]
    return [V2, "application/json"]


ROUTES = [key for _, key in check_rules(create_app(Settings()).routes)]
BODY_ROUTES = [key for key in ROUTES if key.split(" ", 1)[0] in BODY_METHODS]


def test_the_routes_taking_bodies_are_found() -> None:
    assert "POST /topics/{topic}" in BODY_ROUTES and "PUT /schema-registry/config" in BODY_ROUTES
    assert len(BODY_ROUTES) >= 25


async def test_deep_json_to_every_route_is_a_4xx(gw: RunningGateway) -> None:
    names = await _fill(gw)
    for key in BODY_ROUTES:
        method, template = key.split(" ", 1)
        path = _path(template, names["cluster_id"])
        for content_type in _content_types(template):
            for depth in DEPTHS:
                for body in bodies(depth):
                    r = await gw.client.request(
                        method, path, content=body.encode(), headers={"Content-Type": content_type}
                    )
                    confluent_4xx(r, f"{key} {content_type} depth {depth} {body[:30]}")
    # the bodies at the limit still go through: a value 61 deep in a 64-deep body is stored
    value = deep(LIMIT - 3)
    r = await gw.client.post(
        "/topics/t", content=f'{{"records":[{{"value":{value}}}]}}'.encode(), headers={"Content-Type": JSON}
    )
    assert r.status_code == 200, r.text
    r = await gw.client.get("/topics/t/partitions/0/records", params={"offset": 0}, headers={"Accept": JSON})
    assert json.loads(r.content)["records"][-1]["value"] == json.loads(value)


async def test_the_routes_that_ignore_bodies_never_answer_500(gw: RunningGateway) -> None:
    names = await _fill(gw)
    for key in ROUTES:
        method, template = key.split(" ", 1)
        if method in (*BODY_METHODS, "WS"):
            continue
        for body in bodies(1000):
            path = _path(template, names["cluster_id"])
            r = await gw.client.request(method, path, content=body.encode(), headers={"Content-Type": V2})
            assert r.status_code < 500, f"{key}: {r.status_code} {r.text[:200]}"


async def test_a_deep_websocket_message_is_refused_and_the_stream_goes_on(gw: RunningGateway) -> None:
    await create_topic(gw.client, "t", 1)
    base = await consumer(gw.client, "g", name="i")
    url = gw.url.replace("http", "ws", 1) + "/consumers/g/instances/i/records"
    assert base.endswith("/consumers/g/instances/i")
    async with websockets.connect(url) as ws:
        for depth in DEPTHS:
            produce = {"type": "produce", "id": f"p{depth}", "topic": "t", "partition": 0, "format": "json"}
            text = json.dumps({**produce, "records": [{"value": 1}]})[:-1] + ',"x":' + deep(depth) + "}"
            await ws.send(text)
            answer = await _answer(ws)
            assert answer["error_code"] == 42206, answer
            assert f"{LIMIT} levels" in answer["message"]
        ok = {"type": "produce", "id": "ok", "topic": "t", "partition": 0, "format": "binary"}
        await ws.send(json.dumps({**ok, "records": [{"value": b64("v")}]}))
        answer = await _answer(ws)
        assert answer.get("error_code") is None and answer["id"] == "ok", answer


async def _answer(ws: websockets.ClientConnection) -> dict[str, Any]:
    """The next message answering one of ours (an error, or a produce's result), past the stream's own."""
    async with asyncio.timeout(20):
        while True:
            message = json.loads(await ws.recv())
            if "error_code" in message or message.get("id") is not None:
                return message


def _avro_nested(depth: int) -> str:
    """An Avro record ``depth`` records deep (three JSON levels each), written as text."""
    text = '"int"'
    for i in range(depth):
        text = f'{{"type":"record","name":"R{i}","fields":[{{"name":"a","type":{text}}}]}}'
    return text


async def test_deep_schema_texts_are_refused(gw: RunningGateway) -> None:
    """A schema is JSON too, inside a string: measured on its own, to the registry or inline."""
    await create_topic(gw.client, "t", 1)
    texts = {
        "AVRO": _avro_nested(400),
        "JSON": deep(1000, '{"type":"integer"}').replace("[", '{"items":').replace("]", "}"),
    }
    for schema_type, text in texts.items():
        r = await gw.client.post(
            "/schema-registry/subjects/deep/versions",
            json={"schema": text, "schemaType": schema_type},
            headers={"Content-Type": SR_TYPE},
        )
        confluent_4xx(r, f"register {schema_type}")
    # a .proto is no JSON, but a chain of message types is walked by recursion all the same
    chain = "".join(f"message M{i} {{ M{i + 1} a = 1; }}\n" for i in range(500))
    proto = 'syntax = "proto3";\n' + chain + "message M500 { int32 a = 1; }\n"
    for fmt, text in (("avro", texts["AVRO"]), ("jsonschema", texts["JSON"]), ("protobuf", proto)):
        r = await gw.client.post(
            "/topics/t",
            json={"value_schema": text, "records": [{"value": {"a": {"a": 1}}}]},
            headers={"Content-Type": f"application/vnd.kafka.{fmt}.v2+json"},
        )
        confluent_4xx(r, f"produce inline {fmt}")


async def test_schemas_and_values_at_the_limits_are_served(gw: RunningGateway) -> None:
    """Within the limits, the recursive codecs do their work: answers 2xx, never 500."""
    arrays = 60  # a JSON Schema of arrays of arrays: two levels of schema each, one of value
    jsonschema = '{"type":"integer"}'
    for _ in range(arrays):
        jsonschema = '{"type":"array","items":' + jsonschema + "}"
    value = "[" * arrays + "1" + "]" * arrays
    records = 40  # an Avro record within a record: three levels of schema each, one of value
    avro_value = '{"a":' * records + "1" + "}" * records
    cases = (("jsonschema", jsonschema, value), ("avro", _avro_nested(records), avro_value))
    for fmt, schema, record in cases:
        body = '{"value_schema":' + json.dumps(schema) + ',"records":[{"value":' + record + "}]}"
        headers = {"Content-Type": f"application/vnd.kafka.{fmt}.v2+json"}
        r = await gw.client.post(f"/topics/{fmt}", content=body.encode(), headers=headers)
        assert r.status_code == 200, f"{fmt}: {r.text[:300]}"


async def test_big_deep_bodies_are_refused_off_the_loop_as_well(gw: RunningGateway) -> None:
    """Past 256 KiB the measure runs in a worker thread, with the parse: the same answer."""
    await create_topic(gw.client, "t", 1)
    padded = '{"pad":"' + "x" * 300_000 + '","records":[{"value":1}],"ignored":' + deep(1000) + "}"
    for path, content_type in (
        ("/topics/t", JSON),
        ("/topics/t", "application/vnd.kafka.avro.v2+json"),
        ("/consumers/g", V2),
        ("/schema-registry/subjects/s/versions", SR_TYPE),
    ):
        r = await gw.client.post(path, content=padded.encode(), headers={"Content-Type": content_type})
        confluent_4xx(r, f"{path} {content_type}")
    await consumer(gw.client, "g", name="i")
    url = gw.url.replace("http", "ws", 1) + "/consumers/g/instances/i/records"
    async with websockets.connect(url, max_size=None) as ws:
        produce = {"type": "produce", "id": "big", "topic": "t", "partition": 0, "format": "json"}
        await ws.send(json.dumps(produce)[:-1] + padded[1:])
        answer = await _answer(ws)
        assert answer["error_code"] == 42206, answer
