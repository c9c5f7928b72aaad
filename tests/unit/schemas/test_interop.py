"""Byte for byte what Confluent's serializers write, and read by Confluent's deserializers.

confluent-kafka's schema-registry serializers (the reference for every Kafka tool) are fed by its
in-memory mock registry, only so that they have an id to write; the same schema text parsed here
and framed with that id must give the very same bytes, and each side must read the other's.
"""

from __future__ import annotations

import base64
import json
import struct
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema as ConfluentSchema
from confluent_kafka.schema_registry import SchemaReference as ConfluentReference
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from service.core.schemas.formats import parse
from service.core.schemas.model import Schema, SchemaReference, SchemaType
from service.core.schemas.protobuf import ProtobufSchema, write_message_indexes
from service.core.schemas.wire import frame, unframe

CONTEXT = SerializationContext("orders", MessageField.VALUE)
SUBJECT = "orders-value"


def new_registry() -> MockSchemaRegistryClient:
    return MockSchemaRegistryClient({"url": "mock://interop"})


@pytest.fixture
def registry() -> MockSchemaRegistryClient:
    return new_registry()


def registered_id(registry: MockSchemaRegistryClient, subject: str = SUBJECT) -> int:
    return int(registry.get_latest_version(subject).schema_id)


# --- Avro -----------------------------------------------------------------------------------------

AVRO_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "com.acme",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "qty", "type": "int"},
            {"name": "price", "type": "double"},
            {"name": "ratio", "type": "float"},
            {"name": "paid", "type": "boolean"},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "raw", "type": "bytes"},
            {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
            {
                "name": "status",
                "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SENT"]},
            },
            {
                "name": "lines",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "Line",
                        "fields": [{"name": "sku", "type": "string"}, {"name": "n", "type": "int"}],
                    },
                },
            },
            {"name": "attrs", "type": {"type": "map", "values": "string"}},
            {"name": "ship", "type": ["null", "Line", "Status"]},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {
                "name": "amount",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2},
            },
        ],
    }
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _decimal_bytes(unscaled: int) -> str:
    """An unscaled decimal as Java's BigInteger writes it (minimal two's complement), as Avro JSON."""
    length = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True).decode("latin-1")


@st.composite
def avro_orders(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same order twice: as Avro JSON (the REST client's) and as fastavro's in-memory datum."""
    raw = draw(st.binary(max_size=8))
    digest = draw(st.binary(min_size=4, max_size=4))
    lines = draw(st.lists(st.tuples(st.text(max_size=5), st.integers(0, 99)), max_size=3))
    note = draw(st.none() | st.text(max_size=8))
    ship = draw(st.sampled_from(["none", "line", "status"]))
    millis = draw(st.integers(0, 2**42))
    unscaled = draw(st.integers(-(10**8) + 1, 10**8 - 1))
    common = {
        "id": draw(st.integers(-(2**63), 2**63 - 1)),
        "qty": draw(st.integers(-(2**31), 2**31 - 1)),
        "price": draw(st.floats(allow_nan=False, allow_infinity=False)),
        "ratio": draw(st.floats(width=32, allow_nan=False, allow_infinity=False)),
        "paid": draw(st.booleans()),
        "status": draw(st.sampled_from(["NEW", "PAID", "SENT"])),
        "attrs": draw(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3)),
    }
    line_values = [{"sku": s, "n": n} for s, n in lines]
    avro_json = {
        **common,
        "note": None if note is None else {"string": note},
        "raw": raw.decode("latin-1"),
        "hash": digest.decode("latin-1"),
        "lines": line_values,
        "ship": {
            "none": None,
            "line": {"com.acme.Line": {"sku": "x", "n": 1}},
            "status": {"com.acme.Status": "SENT"},
        }[ship],
        "at": millis,
        "amount": _decimal_bytes(unscaled),
    }
    datum = {
        **common,
        "note": note,
        "raw": raw,
        "hash": digest,
        "lines": line_values,
        "ship": {"none": None, "line": {"sku": "x", "n": 1}, "status": "SENT"}[ship],
        "at": _EPOCH + timedelta(milliseconds=millis),
        "amount": Decimal(unscaled).scaleb(-2),
    }
    return avro_json, datum


@settings(max_examples=60)
@given(avro_orders())
def test_avro_payloads_equal_confluents(order: tuple[dict[str, Any], dict[str, Any]]) -> None:
    avro_json, datum = order
    registry = new_registry()
    theirs = AvroSerializer(registry, AVRO_SCHEMA)(datum, CONTEXT)
    codec = parse(Schema(SchemaType.AVRO, AVRO_SCHEMA), {}).codec()
    mine = frame(registered_id(registry), codec.encode(avro_json))
    assert mine == theirs
    assert AvroDeserializer(registry)(mine, CONTEXT) == datum
    decoded = codec.decode(unframe(theirs)[1])
    # a float comes back as its shortest decimal (as Java prints it): the same float
    assert {**decoded, "ratio": None} == {**avro_json, "ratio": None}
    assert struct.unpack("<f", struct.pack("<f", decoded["ratio"]))[0] == avro_json["ratio"]


def test_avro_references_are_named_types_of_other_subjects(registry: MockSchemaRegistryClient) -> None:
    line = json.dumps(
        {
            "type": "record",
            "name": "Line",
            "namespace": "com.acme",
            "fields": [{"name": "sku", "type": "string"}],
        }
    )
    order = json.dumps(
        {
            "type": "record",
            "name": "Order",
            "namespace": "com.acme",
            "fields": [{"name": "line", "type": "com.acme.Line"}],
        }
    )
    registry.register_schema("line", ConfluentSchema(line, "AVRO"))
    registry.register_schema(
        SUBJECT, ConfluentSchema(order, "AVRO", [ConfluentReference("com.acme.Line", "line", 1)])
    )
    theirs = AvroSerializer(
        registry, None, conf={"auto.register.schemas": False, "use.latest.version": True}
    )({"line": {"sku": "a"}}, CONTEXT)
    parsed_line = parse(Schema(SchemaType.AVRO, line), {})
    parsed = parse(
        Schema(SchemaType.AVRO, order, (SchemaReference("com.acme.Line", "line", 1),)),
        {"com.acme.Line": parsed_line},
    )
    assert frame(registered_id(registry), parsed.codec().encode({"line": {"sku": "a"}})) == theirs


# --- JSON Schema ----------------------------------------------------------------------------------

JSON_SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "price": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object", "additionalProperties": {"type": ["string", "null", "boolean"]}},
        },
        "required": ["id", "name"],
    }
)

json_orders = st.fixed_dictionaries(
    {"id": st.integers(-(2**63), 2**63 - 1), "name": st.text(max_size=10)},
    optional={
        "price": st.floats(allow_nan=False, allow_infinity=False) | st.integers(-1000, 1000),
        "tags": st.lists(st.text(max_size=5), max_size=3),
        "meta": st.dictionaries(
            st.text(max_size=4), st.none() | st.booleans() | st.text(max_size=4), max_size=3
        ),
    },
)


@settings(max_examples=60)
@given(json_orders)
def test_json_schema_payloads_equal_confluents(value: dict[str, Any]) -> None:
    registry = new_registry()
    theirs = JSONSerializer(JSON_SCHEMA, registry)(value, CONTEXT)
    codec = parse(Schema(SchemaType.JSON, JSON_SCHEMA), {}).codec()
    mine = frame(registered_id(registry), codec.encode(value))
    assert mine == theirs
    assert JSONDeserializer(JSON_SCHEMA)(mine, CONTEXT) == value
    assert codec.decode(unframe(theirs)[1]) == value


# --- Protobuf -------------------------------------------------------------------------------------

MONEY = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; string currency = 2; }\n'
ORDER = """syntax = "proto3";
package shop;
import "common/money.proto";
import "google/protobuf/timestamp.proto";

message Order {
  string id = 1;
  common.Money total = 2;
  repeated Line lines = 3;
  google.protobuf.Timestamp at = 4;
  Status status = 5;
  oneof payment { string card = 6; string iban = 7; }
  optional sint64 delta = 8;
  bytes blob = 9;
  double weight = 10;
  message Line { string sku = 1; uint32 n = 2; }
}
enum Status { STATUS_NEW = 0; STATUS_PAID = 1; }
"""
MONEY_REF = SchemaReference("common/money.proto", "common/money.proto", 1)


def _order_schema() -> ProtobufSchema:
    money = parse(Schema(SchemaType.PROTOBUF, MONEY), {})
    order = parse(Schema(SchemaType.PROTOBUF, ORDER, (MONEY_REF,)), {"common/money.proto": money})
    assert isinstance(order, ProtobufSchema)
    return order


proto_orders = st.fixed_dictionaries(
    {
        "id": st.text(max_size=6),
        "total": st.fixed_dictionaries(
            {"cents": st.integers(-(2**63), 2**63 - 1).map(str), "currency": st.sampled_from(["EUR", "USD"])}
        ),
        "lines": st.lists(
            st.fixed_dictionaries({"sku": st.text(max_size=4), "n": st.integers(0, 2**32 - 1)}), max_size=3
        ),
        "at": st.integers(0, 2**34).map(
            lambda s: datetime.fromtimestamp(s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ),
        "status": st.sampled_from(["STATUS_NEW", "STATUS_PAID"]),
        "weight": st.floats(allow_nan=False, allow_infinity=False),
    },
    optional={
        "card": st.text(max_size=4),
        "delta": st.integers(-(2**63), 2**63 - 1).map(str),
        "blob": st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode()),
    },
)


@settings(max_examples=40)
@given(proto_orders)
def test_protobuf_payloads_equal_confluents(value: dict[str, Any]) -> None:
    registry = new_registry()
    order = _order_schema()
    codec = order.codec()
    message_class = codec.message_class()
    message = json_format.ParseDict(value, message_class())
    theirs = ProtobufSerializer(message_class, registry, {"use.deprecated.format": False})(message, CONTEXT)
    mine = frame(registered_id(registry), codec.encode(value))
    assert mine == theirs
    assert ProtobufDeserializer(message_class, {"use.deprecated.format": False})(mine, CONTEXT) == message
    assert json_format.ParseDict(codec.decode(unframe(theirs)[1]), message_class()) == message


def test_protobuf_schemas_confluent_registers_parse_to_the_same_schema(
    registry: MockSchemaRegistryClient,
) -> None:
    """Confluent's serializer registers the file and its import as base64 descriptors."""
    order = _order_schema()
    message_class = order.codec().message_class()
    ProtobufSerializer(message_class, registry, {"use.deprecated.format": False})(
        message_class(id="x"), CONTEXT
    )
    root = registry.get_latest_version(SUBJECT).schema
    dependency = registry.get_latest_version("common/money.proto").schema
    assert [(r.name, r.subject) for r in root.references] == [("common/money.proto", "common/money.proto")]
    money = parse(Schema(SchemaType.PROTOBUF, dependency.schema_str), {})
    registered = parse(
        Schema(SchemaType.PROTOBUF, root.schema_str, (MONEY_REF,)), {"common/money.proto": money}
    )
    assert registered.canonical() == order.canonical()
    assert registered.codec().encode({"id": "x"}) == order.codec().encode({"id": "x"})


def test_protobuf_nested_messages_are_named_by_confluents_index_list(
    registry: MockSchemaRegistryClient,
) -> None:
    order = _order_schema()
    line_class = order.codec().message_class([0, 0])
    theirs = ProtobufSerializer(line_class, registry, {"use.deprecated.format": False})(
        line_class(sku="a", n=2), CONTEXT
    )
    payload = unframe(theirs)[1]
    assert payload.startswith(write_message_indexes([0, 0]))
    assert order.codec().decode(payload) == {"sku": "a", "n": 2}
