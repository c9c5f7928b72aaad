"""Protobuf in the schema registry as Confluent's serves it, spoken to over HTTP.

``?format=serialized`` (the base64 ``FileDescriptorProto`` Confluent's Protobuf deserializers
ask for) on every route that answers a schema, proven with confluent-kafka's
``ProtobufSerializer`` and ``ProtobufDeserializer`` pointed at the gateway's registry both ways; a
schema registered as a descriptor answered as ``.proto`` text; Confluent's built-in imports
(``google/type/*``, ``confluent/*``) resolved without references; custom options no file
defines accepted. Each test starts its own gateway (``gateway`` fixture, embedded log).
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import httpx
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from tests.conftest import RunningGateway
from tests.helpers import BINARY, b64, create_topic, unb64

SR = "/schema-registry"
PROTOBUF_V2 = "application/vnd.kafka.protobuf.v2+json"

MONEY = 'syntax = "proto3";\npackage shop;\n\nmessage Money {\n  int64 cents = 1;\n}\n'
ORDER = (
    'syntax = "proto3";\npackage shop;\n\nimport "money.proto";\n\n'
    "message Order {\n  string id = 1;\n  shop.Money price = 2;\n  repeated string tags = 3;\n}\n"
)
MONEY_REF = {"name": "money.proto", "subject": "money", "version": 1}


async def register(
    client: httpx.AsyncClient, subject: str, schema: str, *, params: dict[str, str] | None = None, **body: Any
) -> int:
    r = await client.post(
        f"{SR}/subjects/{subject}/versions",
        params=params,
        json={"schema": schema, "schemaType": "PROTOBUF", **body},
    )
    assert r.status_code == 200, r.text
    return int(r.json()["id"])


def descriptor(text: str) -> descriptor_pb2.FileDescriptorProto:
    return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True))


def order_class() -> type[Message]:
    """The classes protoc would generate for MONEY and ORDER (as money.proto and order.proto)."""
    pool = descriptor_pool.DescriptorPool()
    money = descriptor_pb2.FileDescriptorProto(name="money.proto", package="shop", syntax="proto3")
    money.message_type.add(name="Money").field.add(name="cents", number=1, type=3, label=1)
    order = descriptor_pb2.FileDescriptorProto(
        name="order.proto", package="shop", syntax="proto3", dependency=["money.proto"]
    )
    message = order.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=9, label=1)
    message.field.add(name="price", number=2, type=11, label=1, type_name=".shop.Money")
    message.field.add(name="tags", number=3, type=9, label=3)
    pool.Add(money)
    pool.Add(order)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


# --- ?format= ------------------------------------------------------------------------------


async def test_format_serialized_answers_the_descriptor_on_every_route(gateway: RunningGateway) -> None:
    client = gateway.client
    money = await register(client, "money", MONEY)
    order = await register(client, "orders-value", ORDER, references=[MONEY_REF])
    answers = {
        "by id": (await client.get(f"{SR}/schemas/ids/{order}", params={"format": "serialized"})).json(),
        "by id in a subject": (
            await client.get(
                f"{SR}/schemas/ids/{order}", params={"subject": "orders-value", "format": "serialized"}
            )
        ).json(),
        "version": (
            await client.get(f"{SR}/subjects/orders-value/versions/1", params={"format": "serialized"})
        ).json(),
        "latest, any case": (
            await client.get(f"{SR}/subjects/orders-value/versions/latest", params={"format": "SERIALIZED"})
        ).json(),
        "lookup": (
            await client.post(
                f"{SR}/subjects/orders-value",
                params={"format": "serialized"},
                json={"schema": ORDER, "schemaType": "PROTOBUF", "references": [MONEY_REF]},
            )
        ).json(),
    }
    texts = {
        "text by id": (
            await client.get(f"{SR}/schemas/ids/{order}/schema", params={"format": "serialized"})
        ).text,
        "text of a version": (
            await client.get(f"{SR}/subjects/orders-value/versions/1/schema", params={"format": "serialized"})
        ).text,
    }
    for where, answer in answers.items():
        assert answer["schemaType"] == "PROTOBUF" and answer["references"] == [MONEY_REF], where
        texts[where] = answer["schema"]
    assert answers["by id in a subject"]["version"] == 1
    for where, text in texts.items():
        file = descriptor(text)
        assert (file.package, [m.name for m in file.message_type]) == ("shop", ["Order"]), where
        assert list(file.dependency) == ["money.proto"], where
        assert file.message_type[0].field[1].type_name == ".shop.Money", where
    dependency = (await client.get(f"{SR}/schemas/ids/{money}", params={"format": "serialized"})).json()
    assert descriptor(dependency["schema"]).message_type[0].name == "Money"


async def test_other_formats_answer_the_text_as_confluent_does(gateway: RunningGateway) -> None:
    """Confluent refuses no format name (formats to come): one its type does not have answers
    the schema's text; an empty one is no format."""
    client = gateway.client
    await register(client, "money", MONEY)
    for name in ("", "default", "ignore_extensions", "no-such-format"):
        r = await client.get(f"{SR}/schemas/ids/1", params={"format": name})
        assert (r.status_code, r.json()["schema"]) == (200, MONEY), name
    extended = 'syntax = "proto2";\n\nmessage M {\n  optional int32 a = 1;\n\n  extensions 100 to max;\n}\n'
    extended += "\nextend M {\n  optional int32 b = 100;\n}\n"
    schema_id = await register(client, "extended", extended)
    assert (await client.get(f"{SR}/schemas/ids/{schema_id}")).json()["schema"] == extended
    r = await client.get(f"{SR}/schemas/ids/{schema_id}/schema", params={"format": "ignore_extensions"})
    assert r.text == 'syntax = "proto2";\n\nmessage M {\n  optional int32 a = 1;\n}\n'
    avro = '{"type":"record","name":"A","fields":[{"name":"x","type":"int"}]}'
    r = await client.post(f"{SR}/subjects/a-value/versions", json={"schema": avro})
    assert r.status_code == 200, r.text
    r = await client.get(f"{SR}/subjects/a-value/versions/1", params={"format": "serialized"})
    assert r.status_code == 200 and r.json()["schema"] == avro, r.text


# --- confluent-kafka's serializers, both ways ------------------------------------------------


def serialize_and_deserialize(url: str, topic: str, value: Message) -> tuple[bytes, Message]:
    """confluent-kafka's serializer registers and writes ``value``; its deserializer, given the
    registry, reads it back with the writer's schema it fetches (``format=serialized``)."""
    registry = SchemaRegistryClient({"url": url})
    context = SerializationContext(topic, MessageField.VALUE)
    serializer = ProtobufSerializer(type(value), registry, {"use.deprecated.format": False})
    data = serializer(value, context)
    reader = ProtobufDeserializer(type(value), {"use.deprecated.format": False}, registry)
    return data, reader(data, context)


def deserialize(url: str, topic: str, cls: type[Message], data: list[bytes]) -> list[Message]:
    registry = SchemaRegistryClient({"url": url})
    reader = ProtobufDeserializer(cls, {"use.deprecated.format": False}, registry)
    return [reader(item, SerializationContext(topic, MessageField.VALUE)) for item in data]


async def test_confluent_kafka_protobuf_serdes_with_the_gateway_registry(
    gateway: RunningGateway, name: str
) -> None:
    client = gateway.client
    url = f"{gateway.url}{SR}"
    order = order_class()
    await create_topic(client, name, 1)
    # confluent-kafka writes (registering descriptors) and reads back through the registry
    value = order(id="o-1", price={"cents": 250}, tags=["a"])
    data, read = await asyncio.to_thread(serialize_and_deserialize, url, name, value)
    assert read == value
    r = await client.post(
        f"/topics/{name}", json={"records": [{"value": b64(data)}]}, headers={"Content-Type": BINARY}
    )
    assert r.status_code == 200, r.text
    # the gateway produces with a .proto text it registers; confluent-kafka reads through the registry
    body = {
        "value_schema": ORDER.replace('import "money.proto";\n\n', "").replace("shop.Money price = 2;\n", ""),
        "records": [{"value": {"id": "o-2", "tags": ["b", "c"]}}],
    }
    r = await client.post(f"/topics/{name}-rest", json=body, headers={"Content-Type": PROTOBUF_V2})
    assert r.status_code == 200, r.text
    r = await client.get(f"/topics/{name}-rest/partitions/0/records", headers={"Accept": BINARY})
    written = [unb64(record["value"]) or b"" for record in r.json()["records"]]
    (read_back,) = await asyncio.to_thread(deserialize, url, f"{name}-rest", order, written)
    assert (read_back.id, list(read_back.tags)) == ("o-2", ["b", "c"])
    # and the gateway reads what confluent-kafka wrote
    r = await client.get(f"/topics/{name}/partitions/0/records", headers={"Accept": PROTOBUF_V2})
    assert r.status_code == 200, r.text
    assert r.json()["records"][0]["value"] == {"id": "o-1", "price": {"cents": "250"}, "tags": ["a"]}


# --- a descriptor registered is answered as .proto text -----------------------------------------

ORDER_AS_TEXT = """syntax = "proto3";
package shop;

import "money.proto";

message Order {
  string id = 1;
  .shop.Money price = 2;
  repeated string tags = 3;
}
"""


async def test_a_schema_registered_as_a_descriptor_is_answered_as_proto_text(gateway: RunningGateway) -> None:
    client = gateway.client
    await register(client, "money", MONEY)
    file = order_class().DESCRIPTOR.file
    serialized = base64.b64encode(file.serialized_pb).decode()
    schema_id = await register(client, "orders-value", serialized, references=[MONEY_REF])
    assert (await client.get(f"{SR}/schemas/ids/{schema_id}")).json()["schema"] == ORDER_AS_TEXT
    assert (await client.get(f"{SR}/schemas/ids/{schema_id}/schema")).text == ORDER_AS_TEXT
    version = (await client.get(f"{SR}/subjects/orders-value/versions/1")).json()
    assert version["schema"] == ORDER_AS_TEXT
    # the text and the descriptor are one schema: the same id, the same version
    assert await register(client, "orders-value", ORDER_AS_TEXT, references=[MONEY_REF]) == schema_id
    assert await register(client, "orders-value", ORDER, references=[MONEY_REF]) == schema_id
    assert (await client.get(f"{SR}/subjects/orders-value/versions")).json() == [1]
    r = await client.get(f"{SR}/schemas/ids/{schema_id}", params={"format": "serialized"})
    assert [f.name for f in descriptor(r.json()["schema"]).message_type[0].field] == ["id", "price", "tags"]


async def test_a_proto_text_is_answered_as_confluent_prints_it(gateway: RunningGateway) -> None:
    """Confluent stores its print of a parsed .proto: its layout, no comments, names as spelled."""
    client = gateway.client
    sent = '// money, in cents\nsyntax = "proto3"; package shop;\nmessage Money { int64 cents = 1; }'
    schema_id = await register(client, "money", sent)
    assert (await client.get(f"{SR}/schemas/ids/{schema_id}")).json()["schema"] == MONEY
    assert (await client.get(f"{SR}/subjects/money/versions/1/schema")).text == MONEY
    assert await register(client, "money", MONEY) == schema_id
    await register(client, "orders-value", ORDER.replace("\n\n", "\n"), references=[MONEY_REF])
    assert (await client.get(f"{SR}/subjects/orders-value/versions/1")).json()["schema"] == ORDER


# --- built-in imports, undefined custom options ---------------------------------------------------

BUILTINS = """syntax = "proto3";
package people;

import "google/type/postal_address.proto";
import "google/type/color.proto";
import "google/type/money.proto";
import "confluent/meta.proto";
import "confluent/type/decimal.proto";

message Person {
  option (confluent.message_meta) = { doc: "a person" };
  google.type.PostalAddress address = 1;
  google.type.Color eyes = 2;
  google.type.Money salary = 3;
  confluent.type.Decimal height = 4 [(confluent.field_meta).params = { key: "precision" value: "5" }];
}
"""


async def test_confluents_built_in_imports_need_no_reference(gateway: RunningGateway, name: str) -> None:
    client = gateway.client
    schema_id = await register(client, f"{name}-value", BUILTINS)
    assert (await client.get(f"{SR}/schemas/ids/{schema_id}")).json()["schema"] == BUILTINS
    value = {"address": {"regionCode": "CH", "locality": "Bern"}, "eyes": {"blue": 0.5}}
    r = await client.post(
        f"/topics/{name}",
        json={"value_schema_id": schema_id, "records": [{"value": value}]},
        headers={"Content-Type": PROTOBUF_V2},
    )
    assert r.status_code == 200, r.text
    r = await client.get(f"/topics/{name}/partitions/0/records", headers={"Accept": PROTOBUF_V2})
    got = r.json()["records"][0]["value"]
    assert got["address"]["locality"] == "Bern" and got["eyes"]["blue"] == 0.5, got
    r = await client.get(f"{SR}/schemas/ids/{schema_id}", params={"format": "serialized"})
    assert "google/type/postal_address.proto" in descriptor(r.json()["schema"]).dependency


UNDEFINED_OPTIONS = """syntax = "proto3";
package opts;

message Payment {
  string id = 1 [(my_field_option) = "x", deprecated = true];
  oneof p {
    option (my_option) = true;
    string card = 2;
    string iban = 3 [(only) = { a: 1 b: "s;]" }];
  }
}

enum Kind {
  option (my_enum_option) = 5;
  K0 = 0 [(my_value_option) = 1.5];
}
"""


async def test_custom_options_no_file_defines_are_accepted(gateway: RunningGateway, name: str) -> None:
    client = gateway.client
    schema_id = await register(client, f"{name}-value", UNDEFINED_OPTIONS)
    assert (await client.get(f"{SR}/schemas/ids/{schema_id}")).json()["schema"] == UNDEFINED_OPTIONS
    r = await client.post(
        f"/topics/{name}",
        json={"value_schema_id": schema_id, "records": [{"value": {"id": "1", "iban": "CH"}}]},
        headers={"Content-Type": PROTOBUF_V2},
    )
    assert r.status_code == 200, r.text
    # a real error beside an undefined option is still reported, where it is
    broken = UNDEFINED_OPTIONS.replace("string card = 2;", "strin card = 2;")
    r = await client.post(
        f"{SR}/subjects/{name}-value/versions", json={"schema": broken, "schemaType": "PROTOBUF"}
    )
    assert (r.status_code, r.json()["error_code"]) == (422, 42201), r.text
    assert "schema:8:" in r.json()["message"] and "strin" in r.json()["message"]


# --- ?normalize=true ---------------------------------------------------------------------------

UNSORTED = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
option java_package = "com.shop";
option java_multiple_files = true;
message Order {
  option deprecated = true;
  string id = 1 [json_name = "ident", deprecated = true];
  google.protobuf.Timestamp at = 3;
  google.protobuf.Duration wait = 2;
}
"""

NORMALIZED = """syntax = "proto3";
package shop;

import "google/protobuf/duration.proto";
import "google/protobuf/timestamp.proto";

option java_multiple_files = true;
option java_package = "com.shop";

message Order {
  option deprecated = true;

  string id = 1 [
    deprecated = true,
    json_name = "ident"
  ];
  .google.protobuf.Duration wait = 2;
  .google.protobuf.Timestamp at = 3;
}
"""


async def test_normalize_stores_confluents_normalized_print(gateway: RunningGateway) -> None:
    """Options by name (a field's too), fields by tag, imports sorted, names fully qualified: the
    text stored and answered; the same schema spelled in other orders is found at its id, by a
    lookup and by a registration, normalized; without ``normalize`` the print keeps the order."""
    client = gateway.client
    schema_id = await register(client, "normal-value", UNSORTED, params={"normalize": "true"})
    assert (await client.get(f"{SR}/schemas/ids/{schema_id}/schema")).text == NORMALIZED
    stored = (await client.get(f"{SR}/subjects/normal-value/versions/1")).json()
    assert stored["schema"] == NORMALIZED
    other_order = (
        UNSORTED.replace('option java_package = "com.shop";\n', "")
        .replace(
            "option java_multiple_files = true;\n",
            'option java_multiple_files = true;\noption java_package = "com.shop";\n',
        )
        .replace('[json_name = "ident", deprecated = true]', '[deprecated = true, json_name = "ident"]')
    )
    for text in (other_order, NORMALIZED):
        r = await client.post(
            f"{SR}/subjects/normal-value",
            params={"normalize": "true"},
            json={"schema": text, "schemaType": "PROTOBUF"},
        )
        assert r.status_code == 200, r.text
        assert (r.json()["id"], r.json()["version"], r.json()["schema"]) == (schema_id, 1, NORMALIZED)
    again = await register(client, "normal-value", other_order, params={"normalize": "true"})
    assert again == schema_id
    versions = (await client.get(f"{SR}/subjects/normal-value/versions")).json()
    assert versions == [1]
    plain = await register(client, "plain-value", UNSORTED)
    text = (await client.get(f"{SR}/schemas/ids/{plain}/schema")).text
    assert text.index("at = 3") < text.index("wait = 2")  # as given
