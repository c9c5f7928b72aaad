"""confluent-kafka (librdkafka and its schema-registry serializers) and the gateway, both ways.

Records confluent-kafka's Avro, JSON Schema and Protobuf serializers write — with the gateway's
``/schema-registry`` as their registry — are read as decoded JSON by a REST consumer instance;
records produced through the REST API are read back by confluent-kafka's deserializers. On
Kafka, confluent-kafka talks straight to the broker (Tansu); on the embedded log, which only
the gateway can reach, its bytes travel through the REST API's binary format.

confluent-kafka's clients are synchronous, and the gateway under test serves in this event
loop: they run in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from tests.conftest import RunningGateway
from tests.helpers import BINARY, b64, consumer, create_topic, poll_until, subscribe, unb64
from tests.stream_client import events

ORDER_AVRO = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "qty", "type": "int"},
            {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
        ],
    }
)
ORDER_JSON = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "qty": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["id", "qty"],
    }
)
ORDER_PROTO = (
    'syntax = "proto3";\npackage shop;\n'
    "message Order {\n  string id = 1;\n  int32 qty = 2;\n  repeated string tags = 3;\n}\n"
)
ORDERS = [{"id": f"o-{i}", "qty": i, "tags": ["a", "b"][: i % 3]} for i in range(5)]


def order_class() -> type[Message]:
    """The class protoc would generate from ORDER_PROTO, built from its descriptor."""
    file = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    message = file.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=9, label=1)
    message.field.add(name="qty", number=2, type=5, label=1)
    message.field.add(name="tags", number=3, type=9, label=3)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def serializer(
    fmt: str, registry: SchemaRegistryClient
) -> Callable[[dict[str, Any], SerializationContext], bytes]:
    """confluent-kafka's serializer for ``fmt``, taking the JSON of an order."""
    if fmt == "avro":
        return AvroSerializer(registry, ORDER_AVRO)  # type: ignore[no-any-return]
    if fmt == "jsonschema":
        return JSONSerializer(ORDER_JSON, registry)  # type: ignore[no-any-return]
    order = order_class()
    protobuf = ProtobufSerializer(order, registry, {"use.deprecated.format": False})
    return lambda value, ctx: protobuf(order(**value), ctx)  # type: ignore[no-any-return]


def deserializer(
    fmt: str, registry: SchemaRegistryClient
) -> Callable[[bytes, SerializationContext], dict[str, Any]]:
    """confluent-kafka's deserializer for ``fmt``, giving the JSON of an order."""
    if fmt == "avro":
        return AvroDeserializer(registry)  # type: ignore[no-any-return]
    if fmt == "jsonschema":
        return JSONDeserializer(ORDER_JSON, schema_registry_client=registry)  # type: ignore[no-any-return]
    # given the registry, it reads with the writer's schema, fetched with ?format=serialized
    protobuf = ProtobufDeserializer(order_class(), {"use.deprecated.format": False}, registry)

    def decode(data: bytes, ctx: SerializationContext) -> dict[str, Any]:
        message = protobuf(data, ctx)
        return {"id": message.id, "qty": message.qty, "tags": list(message.tags)}

    return decode


def each(
    function: Callable[[Any, SerializationContext], Any], items: list[Any], context: SerializationContext
) -> list[Any]:
    return [function(item, context) for item in items]


SCHEMAS = {"avro": ORDER_AVRO, "jsonschema": ORDER_JSON, "protobuf": ORDER_PROTO}
FORMATS = tuple(SCHEMAS)


def bootstrap(gateway: RunningGateway) -> str | None:
    """The broker confluent-kafka can reach, or None on the embedded log."""
    log = gateway.settings.log
    return log.removeprefix("kafka://") if log.startswith("kafka://") else None


def confluent_produce(servers: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": False})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(20) == 0, "confluent-kafka could not deliver every record"


def confluent_consume(servers: str, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": servers, "group.id": f"cf-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is None:
                if len(got) >= count:
                    break
                continue
            assert message.error() is None, message.error()
            got.append(message.value())
            if len(got) >= count:
                break
        return got
    finally:
        consumer.close()


async def test_what_confluent_kafka_serializes_a_rest_consumer_reads_as_json(
    gateway: RunningGateway, name: str
):
    client = gateway.client
    registry = SchemaRegistryClient({"url": f"{gateway.url}/schema-registry"})
    servers = bootstrap(gateway)
    for fmt in FORMATS:
        topic = f"{name}-{fmt}"
        await create_topic(client, topic, 1)
        serialize = serializer(fmt, registry)
        context = SerializationContext(topic, MessageField.VALUE)
        values = await asyncio.to_thread(each, serialize, ORDERS, context)
        if servers is not None:
            await asyncio.to_thread(confluent_produce, servers, topic, values)
        else:
            body = {"records": [{"value": b64(v)} for v in values]}
            r = await client.post(f"/topics/{topic}", json=body, headers={"Content-Type": BINARY})
            assert r.status_code == 200, r.text
        media_type = f"application/vnd.kafka.{fmt}.v2+json"
        base = await consumer(client, f"g-{topic}", fmt=fmt)
        await subscribe(client, base, topic)
        records = await poll_until(client, base, len(ORDERS), fmt=media_type)
        values_read = [r["value"] for r in records]
        if fmt == "protobuf":  # proto3 JSON: every field shown, empty lists too
            assert values_read == [{"id": o["id"], "qty": o["qty"], "tags": o["tags"]} for o in ORDERS]
        else:
            assert values_read == ORDERS, fmt


async def test_what_the_rest_api_produces_confluent_kafka_deserializes(gateway: RunningGateway, name: str):
    client = gateway.client
    registry = SchemaRegistryClient({"url": f"{gateway.url}/schema-registry"})
    servers = bootstrap(gateway)
    for fmt in FORMATS:
        topic = f"{name}-{fmt}"
        await create_topic(client, topic, 1)
        body = {"value_schema": SCHEMAS[fmt], "records": [{"value": order} for order in ORDERS]}
        media_type = f"application/vnd.kafka.{fmt}.v2+json"
        r = await client.post(f"/topics/{topic}", json=body, headers={"Content-Type": media_type})
        assert r.status_code == 200, r.text
        if servers is not None:
            values = await asyncio.to_thread(confluent_consume, servers, topic, len(ORDERS))
        else:
            r = await client.get(f"/topics/{topic}/partitions/0/records", headers={"Accept": BINARY})
            values = [unb64(record["value"]) or b"" for record in r.json()["records"]]
        assert len(values) == len(ORDERS)
        deserialize = deserializer(fmt, registry)
        context = SerializationContext(topic, MessageField.VALUE)
        decoded = await asyncio.to_thread(each, deserialize, values, context)
        assert decoded == ORDERS, fmt


async def test_a_registry_client_sees_the_subjects_produce_registered(gateway: RunningGateway, name: str):
    """The inline schema of a REST produce is, to confluent-kafka, the subject's latest version."""
    client = gateway.client
    body = {"value_schema": ORDER_AVRO, "records": [{"value": ORDERS[0]}]}
    r = await client.post(
        f"/topics/{name}", json=body, headers={"Content-Type": "application/vnd.kafka.avro.v2+json"}
    )
    assert r.status_code == 200, r.text
    registry = SchemaRegistryClient({"url": f"{gateway.url}/schema-registry"})
    latest = await asyncio.to_thread(registry.get_latest_version, f"{name}-value")
    assert latest.schema_id == r.json()["value_schema_id"]
    assert json.loads(latest.schema.schema_str)["name"] in ("Order", "shop.Order")


async def test_http_errors_stay_in_the_v2_shape(gateway: RunningGateway, name: str) -> None:
    """A registry error met while producing (an unknown id) is answered in the v2 error shape, as
    Confluent's proxy answers it: a serialization error quoting the registry's."""
    r = await gateway.client.post(
        f"/topics/{name}",
        json={"value_schema_id": 424242, "records": [{"value": {}}]},
        headers={"Content-Type": "application/vnd.kafka.avro.v2+json"},
    )
    assert r.status_code == 422 and r.json()["error_code"] == 42207, r.text
    assert "424242" in r.json()["message"]
    assert r.headers["content-type"] == "application/vnd.kafka.v2+json", r.headers


# A schema that is "bytes" at top level, with or without a logical type on it: Confluent's Avro
# serializers write the value's bytes alone after the header (no Avro length before them) and
# their deserializers take the rest of the message as the bytes.
BYTES_SCHEMAS = {
    "bytes": '"bytes"',
    "decimal": json.dumps({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}),
}
# The last would read as the two bytes "ab" were it taken for Avro's length-prefixed form.
BLOBS = [b"\x00\x01\xff", "h\u00e9llo".encode(), bytes(range(256)), b"\x04ab"]
AVRO = "application/vnd.kafka.avro.v2+json"


async def test_confluent_kafkas_bytes_records_read_through_the_gateway_as_their_bytes(
    gateway: RunningGateway, name: str
) -> None:
    client = gateway.client
    registry = SchemaRegistryClient({"url": f"{gateway.url}/schema-registry"})
    servers = bootstrap(gateway)
    for kind, schema in BYTES_SCHEMAS.items():
        topic = f"{name}-{kind}"
        await create_topic(client, topic, 1)
        context = SerializationContext(topic, MessageField.VALUE)
        values = await asyncio.to_thread(each, AvroSerializer(registry, schema), BLOBS, context)
        schema_id = int.from_bytes(values[0][1:5], "big")
        assert values == [b"\x00" + schema_id.to_bytes(4, "big") + blob for blob in BLOBS], kind
        if servers is not None:
            await asyncio.to_thread(confluent_produce, servers, topic, values)
        else:
            body = {"records": [{"value": b64(v)} for v in values]}
            r = await client.post(f"/topics/{topic}", json=body, headers={"Content-Type": BINARY})
            assert r.status_code == 200, r.text
        expected = [blob.decode("latin-1") for blob in BLOBS]  # Avro JSON: code points 0-255
        base = await consumer(client, f"g-{topic}", fmt="avro")
        await subscribe(client, base, topic)
        assert [r["value"] for r in await poll_until(client, base, len(BLOBS), fmt=AVRO)] == expected
        base = await consumer(client, f"s-{topic}", fmt="avro")
        await subscribe(client, base, topic)
        async with events(client, f"{base}/records") as stream:
            assert [r["value"] for r in await stream.records(len(BLOBS))] == expected, kind


async def test_the_gateways_bytes_records_confluent_kafka_deserializes(
    gateway: RunningGateway, name: str
) -> None:
    client = gateway.client
    registry = SchemaRegistryClient({"url": f"{gateway.url}/schema-registry"})
    servers = bootstrap(gateway)
    for kind, schema in BYTES_SCHEMAS.items():
        topic = f"{name}-{kind}"
        await create_topic(client, topic, 1)
        records = [{"value": blob.decode("latin-1")} for blob in BLOBS]
        r = await client.post(
            f"/topics/{topic}",
            json={"value_schema": schema, "records": records[:2]},
            headers={"Content-Type": AVRO},
        )
        assert r.status_code == 200, r.text
        schema_id = r.json()["value_schema_id"]
        by_id = {"value_schema_id": schema_id, "records": records[2:]}
        r = await client.post(f"/topics/{topic}", json=by_id, headers={"Content-Type": AVRO})
        assert r.status_code == 200, r.text
        if servers is not None:
            values = await asyncio.to_thread(confluent_consume, servers, topic, len(BLOBS))
        else:
            r = await client.get(f"/topics/{topic}/partitions/0/records", headers={"Accept": BINARY})
            values = [unb64(record["value"]) or b"" for record in r.json()["records"]]
        assert values == [b"\x00" + schema_id.to_bytes(4, "big") + blob for blob in BLOBS], kind
        context = SerializationContext(topic, MessageField.VALUE)
        assert await asyncio.to_thread(each, AvroDeserializer(registry), values, context) == BLOBS, kind
