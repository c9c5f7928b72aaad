"""The v2 API's schema formats: Avro, JSON Schema and Protobuf records through a real gateway.

Produce with a schema inline or by id, read back decoded through a consumer instance and the
stateless read, stored byte for byte in the schema-registry wire format (checked with
confluent-kafka's own deserializers), every refusal a 4xx that stores nothing. Runs on the
embedded log and on Kafka (the API suite, see ``tests/conftest.py``).
"""

from __future__ import annotations

import json
import struct
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import AsyncSchemaRegistryClient
from confluent_kafka.schema_registry.avro import AsyncAvroDeserializer
from confluent_kafka.schema_registry.json_schema import AsyncJSONDeserializer
from confluent_kafka.schema_registry.protobuf import AsyncProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.conftest import RunningGateway
from tests.helpers import BINARY, b64, consumer, create_topic, poll_until, subscribe, unb64

AVRO = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF = "application/vnd.kafka.protobuf.v2+json"

ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "string"}, {"name": "qty", "type": "int"}],
    }
)
ORDER_V2 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "qty", "type": "int"},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
)
ORDER_JSON = json.dumps(
    {
        "type": "object",
        "title": "Order",
        "properties": {"id": {"type": "string"}, "qty": {"type": "integer", "minimum": 0}},
        "required": ["id", "qty"],
        "additionalProperties": False,
    }
)
ORDER_PROTO = 'syntax = "proto3";\npackage shop;\nmessage Order {\n  string id = 1;\n  int32 qty = 2;\n}\n'


async def produce(
    client: httpx.AsyncClient, path: str, media_type: str, body: dict[str, Any]
) -> httpx.Response:
    return await client.post(path, json=body, headers={"Content-Type": media_type})


def produced(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert all(o["error_code"] is None for o in body["offsets"]), body
    return body


def refused(r: httpx.Response, status: int, code: int) -> str:
    assert (r.status_code, r.json()["error_code"]) == (status, code), r.text
    return str(r.json()["message"])


async def stored(client: httpx.AsyncClient, topic: str, offset: int = 0) -> list[dict[str, Any]]:
    """The records of partition 0 from ``offset`` as stored: their bytes, in base64."""
    r = await client.get(
        f"/topics/{topic}/partitions/0/records", params={"offset": offset}, headers={"Accept": BINARY}
    )
    assert r.status_code == 200, r.text
    records: list[dict[str, Any]] = r.json()["records"]
    return records


async def end_offset(client: httpx.AsyncClient, topic: str) -> int:
    r = await client.get(f"/topics/{topic}/partitions/0/offsets")
    return int(r.json()["end_offset"])


def registry_client(gateway: RunningGateway) -> AsyncSchemaRegistryClient:
    """confluent-kafka's registry client, asynchronous: the gateway serves in this event loop."""
    return AsyncSchemaRegistryClient({"url": f"{gateway.url}/schema-registry"})


async def test_avro_inline_schema_is_registered_and_records_round_trip(gateway: RunningGateway, name: str):
    client = gateway.client
    await create_topic(client, name, 1)
    body = {
        "key_schema": '"string"',
        "value_schema": ORDER,
        "records": [
            {"key": "o-1", "value": {"id": "o-1", "qty": 3}},
            {"key": "o-2", "value": {"id": "o-2", "qty": 5}},
        ],
    }
    first = produced(await produce(client, f"/topics/{name}", AVRO, body))
    key_id, value_id = first["key_schema_id"], first["value_schema_id"]
    assert isinstance(key_id, int) and isinstance(value_id, int) and key_id != value_id
    assert [o["offset"] for o in first["offsets"]] == [0, 1]

    # registered under TopicNameStrategy's subjects; the same schema again is the same id
    versions = (await client.get(f"/schema-registry/subjects/{name}-value/versions/latest")).json()
    assert versions["id"] == value_id and versions["version"] == 1
    again = produced(await produce(client, f"/topics/{name}/partitions/0", AVRO, body))
    assert (again["key_schema_id"], again["value_schema_id"]) == (key_id, value_id)
    # by id, nothing inline
    by_id = {"value_schema_id": value_id, "records": [{"value": {"id": "o-3", "qty": 0}}]}
    assert produced(await produce(client, f"/topics/{name}", AVRO, by_id))["value_schema_id"] == value_id

    # stored in the wire format: confluent-kafka's deserializer reads what the gateway wrote
    raw = await stored(client, name)
    value = unb64(raw[0]["value"])
    assert value is not None and value[0] == 0 and struct.unpack(">I", value[1:5])[0] == value_id
    deserialize = await AsyncAvroDeserializer(registry_client(gateway))
    context = SerializationContext(name, MessageField.VALUE)
    assert await deserialize(value, context) == {"id": "o-1", "qty": 3}

    # a consumer instance in the avro format gets the JSON back, keys too
    base = await consumer(client, f"g-{name}", fmt="avro")
    await subscribe(client, base, name)
    records = await poll_until(client, base, 5, fmt=AVRO)
    assert [(r["key"], r["value"]) for r in records] == [
        ("o-1", {"id": "o-1", "qty": 3}),
        ("o-2", {"id": "o-2", "qty": 5}),
        ("o-1", {"id": "o-1", "qty": 3}),
        ("o-2", {"id": "o-2", "qty": 5}),
        (None, {"id": "o-3", "qty": 0}),
    ]
    # and so does the stateless read
    r = await client.get(
        f"/topics/{name}/partitions/0/records", params={"offset": 4}, headers={"Accept": AVRO}
    )
    assert r.status_code == 200 and r.headers["content-type"] == AVRO, r.text
    assert r.json()["records"][0]["value"] == {"id": "o-3", "qty": 0}
    assert r.json()["next_offset"] == 5


async def test_a_new_compatible_version_is_registered_and_both_are_read(gateway: RunningGateway, name: str):
    client = gateway.client
    await create_topic(client, name, 1)
    v1 = produced(
        await produce(
            client,
            f"/topics/{name}",
            AVRO,
            {"value_schema": ORDER, "records": [{"value": {"id": "a", "qty": 1}}]},
        )
    )
    v2 = produced(
        await produce(
            client,
            f"/topics/{name}",
            AVRO,
            {
                "value_schema": ORDER_V2,
                "records": [{"value": {"id": "b", "qty": 2, "note": {"string": "gift"}}}],
            },
        )
    )
    assert v2["value_schema_id"] != v1["value_schema_id"]
    # an incompatible one is refused by the registry (BACKWARD by default): a field without default
    incompatible = json.dumps(
        {**json.loads(ORDER), "fields": [*json.loads(ORDER)["fields"], {"name": "x", "type": "int"}]}
    )
    r = await produce(
        client,
        f"/topics/{name}",
        AVRO,
        {"value_schema": incompatible, "records": [{"value": {"id": "c", "qty": 3, "x": 1}}]},
    )
    refused(r, 422, 42207)  # the registry's 409, as Confluent's proxy answers it
    assert await end_offset(client, name) == 2

    base = await consumer(client, f"g-{name}", fmt="avro")
    await subscribe(client, base, name)
    records = await poll_until(client, base, 2, fmt=AVRO)
    assert [r["value"] for r in records] == [
        {"id": "a", "qty": 1},
        {"id": "b", "qty": 2, "note": {"string": "gift"}},
    ]


async def test_json_schema_and_protobuf_round_trip(gateway: RunningGateway, name: str):
    client = gateway.client
    registry = registry_client(gateway)
    for fmt, media_type, schema, deserializer in (
        (
            "jsonschema",
            JSONSCHEMA,
            ORDER_JSON,
            await AsyncJSONDeserializer(ORDER_JSON, schema_registry_client=registry),
        ),
        ("protobuf", PROTOBUF, ORDER_PROTO, None),
    ):
        topic = f"{name}-{fmt}"
        await create_topic(client, topic, 1)
        body = {"value_schema": schema, "records": [{"value": {"id": "o-1", "qty": 7}}]}
        schema_id = produced(await produce(client, f"/topics/{topic}", media_type, body))["value_schema_id"]
        [raw] = await stored(client, topic)
        value = unb64(raw["value"])
        assert value is not None and struct.unpack(">bI", value[:5]) == (0, schema_id)
        context = SerializationContext(topic, MessageField.VALUE)
        if deserializer is not None:
            assert await deserializer(value, context) == {"id": "o-1", "qty": 7}
        else:  # Protobuf: the message index list [0] is one zero byte, then the message
            assert value[5] == 0
            assert value[6:] == b"\n\x03o-1\x10\x07"
        base = await consumer(client, f"g-{topic}", fmt=fmt)
        await subscribe(client, base, topic)
        [record] = await poll_until(client, base, 1, fmt=media_type)
        assert record["value"] == {"id": "o-1", "qty": 7}
        # a value the schema refuses: Confluent's 400, nothing stored
        bad = {"value_schema_id": schema_id, "records": [{"value": {"id": "o-2", "qty": "many"}}]}
        message = refused(await produce(client, f"/topics/{topic}", media_type, bad), 400, 400)
        assert "records[0].value" in message
        assert await end_offset(client, topic) == 1


async def test_a_json_schema_integer_beyond_64_bits_is_consumed_exactly(gateway: RunningGateway, name: str):
    client = gateway.client
    await create_topic(client, name, 1)
    integer = {"type": "integer"}
    schema = json.dumps({"type": "object", "properties": {"n": integer, "m": integer}})
    big, low = 123456789012345678901234567890, -9223372036854775809  # beyond u64, below i64
    # the body as a client writes it: the numbers as they are, never through a double
    body = f'{{"value_schema":{json.dumps(schema)},"records":[{{"value":{{"n":{big},"m":{low}}}}}]}}'
    r = await client.post(f"/topics/{name}", content=body, headers={"Content-Type": JSONSCHEMA})
    assert r.status_code == 200, r.text
    base = await consumer(client, f"g-{name}", fmt="jsonschema")
    await subscribe(client, base, name)
    [record] = await poll_until(client, base, 1, fmt=JSONSCHEMA)
    assert record["value"] == {"n": big, "m": low}  # httpx's json reads integers exactly


async def test_protobuf_decodes_with_confluents_deserializer(gateway: RunningGateway, name: str):
    """The generated class a user of confluent-kafka would have, from the same .proto, reads the record."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    client = gateway.client
    await create_topic(client, name, 1)
    body = {"value_schema": ORDER_PROTO, "records": [{"value": {"id": "o-9", "qty": 9}}]}
    produced(await produce(client, f"/topics/{name}", PROTOBUF, body))
    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3")
    message = file.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=9, label=1)  # string
    message.field.add(name="qty", number=2, type=5, label=1)  # int32
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    order = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    deserialize = await AsyncProtobufDeserializer(order, {"use.deprecated.format": False})
    [raw] = await stored(client, name)
    value = unb64(raw["value"])
    decoded = await deserialize(value, SerializationContext(name, MessageField.VALUE))
    assert (decoded.id, decoded.qty) == ("o-9", 9)


async def test_what_the_request_gets_wrong_is_a_4xx_that_stores_nothing(gateway: RunningGateway, name: str):
    client = gateway.client
    await create_topic(client, name, 1)
    value_id = produced(
        await produce(
            client,
            f"/topics/{name}",
            AVRO,
            {"value_schema": ORDER, "records": [{"value": {"id": "a", "qty": 1}}]},
        )
    )["value_schema_id"]
    one = [{"value": {"id": "a", "qty": 1}}]
    path = f"/topics/{name}"
    refused(await produce(client, path, AVRO, {"records": one}), 422, 42202)  # values, no value schema
    refused(
        await produce(
            client,
            path,
            AVRO,
            {"value_schema_id": value_id, "records": [{"key": "k", "value": one[0]["value"]}]},
        ),
        422,
        42201,
    )
    refused(
        await produce(
            client, path, AVRO, {"value_schema": ORDER, "value_schema_id": value_id, "records": one}
        ),
        400,
        400,
    )
    assert "AVRO" in refused(
        await produce(client, path, AVRO, {"value_schema": '{"type": "recrod"}', "records": one}), 422, 42205
    )
    refused(await produce(client, path, AVRO, {"value_schema": "not json", "records": one}), 422, 42205)
    refused(await produce(client, path, AVRO, {"value_schema_id": 987654, "records": one}), 422, 42207)
    refused(await produce(client, path, AVRO, {"value_schema_id": "one", "records": one}), 400, 400)
    # an Avro schema's id given to a Protobuf request
    assert "AVRO" in refused(
        await produce(client, path, PROTOBUF, {"value_schema_id": value_id, "records": one}), 422, 42205
    )
    # one bad record among good ones: the request is refused whole, naming it
    mixed = [one[0], {"value": {"id": "b"}}, one[0]]
    assert "records[1].value" in refused(
        await produce(client, path, AVRO, {"value_schema_id": value_id, "records": mixed}), 400, 400
    )
    refused(
        await produce(
            client, path, AVRO, {"value_schema_id": value_id, "records": [{"value": {"id": 5, "qty": 1}}]}
        ),
        400,
        400,
    )
    assert await end_offset(client, name) == 1


async def test_a_record_that_does_not_decode_stops_the_consumer_at_it_until_it_seeks_past(
    gateway: RunningGateway, name: str
):
    client = gateway.client
    await create_topic(client, name, 1)
    good = {"value_schema": ORDER, "records": [{"value": {"id": "a", "qty": 1}}]}
    produced(await produce(client, f"/topics/{name}", AVRO, good))
    r = await client.post(
        f"/topics/{name}", json={"records": [{"value": b64(b"not avro")}]}, headers={"Content-Type": BINARY}
    )
    assert r.status_code == 200, r.text
    produced(await produce(client, f"/topics/{name}", AVRO, good))

    base = await consumer(client, f"g-{name}", fmt="avro", **{"auto.commit.enable": "true"})
    await subscribe(client, base, name)
    [first] = await poll_until(client, base, 1, fmt=AVRO)
    assert first["offset"] == 0
    r = await client.get(f"{base}/records", params={"timeout": 200}, headers={"Accept": AVRO})
    message = refused(r, 422, 42203)
    assert "offset 1" in message and "Seek past it" in message
    # nothing was skipped: not the position, not the committed offset
    r = await client.get(f"{base}/records", params={"timeout": 200}, headers={"Accept": AVRO})
    refused(r, 422, 42203)
    r = await client.request(
        "GET",
        f"{base}/offsets",
        json={"partitions": [{"topic": name, "partition": 0}]},
        headers={"Content-Type": "application/vnd.kafka.v2+json"},
    )
    assert r.json()["offsets"][0]["offset"] == 1, r.text
    r = await client.post(
        f"{base}/positions",
        json={"offsets": [{"topic": name, "partition": 0, "offset": 2}]},
        headers={"Content-Type": "application/vnd.kafka.v2+json"},
    )
    assert r.status_code == 204, r.text
    [last] = await poll_until(client, base, 1, fmt=AVRO)
    assert (last["offset"], last["value"]) == (2, {"id": "a", "qty": 1})
    # the stateless read says the same of offset 1, and reads offset 0 up to it
    r = await client.get(
        f"/topics/{name}/partitions/0/records", params={"offset": 1}, headers={"Accept": AVRO}
    )
    refused(r, 422, 42203)
    r = await client.get(
        f"/topics/{name}/partitions/0/records", params={"offset": 0}, headers={"Accept": AVRO}
    )
    assert [x["offset"] for x in r.json()["records"]] == [0] and r.json()["next_offset"] == 1


async def test_a_schema_consumer_refuses_other_accept_types(gateway: RunningGateway, name: str):
    client = gateway.client
    base = await consumer(client, f"g-{name}", fmt="avro")
    r = await client.get(f"{base}/records", headers={"Accept": BINARY})
    refused(r, 406, 40601)


@pytest.mark.parametrize("strategy", ["record", "topic_record"])
async def test_record_name_strategies(tmp_path, strategy: str, name: str):
    from tests.conftest import start_gateway

    gw = await start_gateway(tmp_path / "data", schema_subject_strategy=strategy)
    try:
        body = {"value_schema": ORDER, "records": [{"value": {"id": "a", "qty": 1}}]}
        produced(await produce(gw.client, f"/topics/{name}", AVRO, body))
        subjects = (await gw.client.get("/schema-registry/subjects")).json()
        assert subjects == (["shop.Order"] if strategy == "record" else [f"{name}-shop.Order"])
        # a schema naming no record cannot be given a subject by record name
        r = await produce(
            gw.client, f"/topics/{name}", AVRO, {"value_schema": '"string"', "records": [{"value": "x"}]}
        )
        refused(r, 422, 42205)
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_the_registrys_topic_is_read_only_to_clients(gateway: RunningGateway, name: str):
    """Records planted in the registry's topic (_schemas unless set otherwise) would be schemas;
    deleting or growing it would lose them all."""
    client = gateway.client
    topic = gateway.settings.schema_registry_topic
    produced(
        await produce(
            client,
            f"/topics/{name}",
            AVRO,
            {"value_schema": ORDER, "records": [{"value": {"id": "a", "qty": 1}}]},
        )
    )
    planted = {"records": [{"key": b64(b'{"keytype":"SCHEMA"}'), "value": b64(b"{}")}]}
    for path in (f"/topics/{topic}", f"/topics/{topic}/partitions/0"):
        r = await client.post(path, json=planted, headers={"Content-Type": BINARY})
        assert "schema registry" in refused(r, 403, 40301)
    cluster = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    r = await client.delete(f"/v3/clusters/{cluster}/topics/{topic}")
    refused(r, 403, 40301)
    r = await client.patch(f"/v3/clusters/{cluster}/topics/{topic}", json={"partitions_count": 3})
    refused(r, 403, 40301)
    # reading it is fine (ACLs decide, when they are on), and the registry still works
    assert len(await stored(client, topic)) >= 1
    assert (await client.get(f"/schema-registry/subjects/{name}-value/versions/1")).status_code == 200
