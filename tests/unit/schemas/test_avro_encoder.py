"""The Avro encoder, compiled per schema, writes Confluent's bytes and refuses what it refused.

Values of a schema holding every kind of Avro type (``avro_values``) are encoded by the codec from
their Avro JSON and by confluent-kafka's ``AvroSerializer`` from the same values as Python data:
the framed bytes are the same. Values that do not fit are refused with a ``ConversionError`` naming
where, whichever way through a record the encoder takes (every field given, or not).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import given, settings
from hypothesis import strategies as st

from service.core.schemas.model import ConversionError
from service.core.schemas.wire import frame
from tests.unit.schemas.avro_values import EVERY_TYPE_TEXT, Values, every_type
from tests.unit.schemas.test_avro import parse, record

CONTEXT = SerializationContext("every", MessageField.VALUE)
_REGISTRY = MockSchemaRegistryClient({"url": "mock://avro-encoder"})
_CONFLUENT = AvroSerializer(_REGISTRY, EVERY_TYPE_TEXT)
_SCHEMA = every_type()


def confluents(datum: Any) -> bytes:
    return bytes(_CONFLUENT(datum, CONTEXT))


def schema_id() -> int:
    return int(_REGISTRY.get_latest_version("every-value").schema_id)


@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False))
def test_every_type_encodes_to_the_bytes_confluents_serializer_writes(rnd: random.Random) -> None:
    as_json, datum = Values(_SCHEMA, rnd).value()
    theirs = confluents(datum)
    assert frame(schema_id(), _SCHEMA.codec().encode(as_json)) == theirs


def test_fields_left_out_are_written_with_their_defaults_as_confluents_serializer_writes_them() -> None:
    # the record default of d_inner leaves out Inner's own defaulted fields
    values = Values(_SCHEMA, random.Random(7))
    as_json, datum = values.value()
    defaulted = [f for f in _SCHEMA.root["fields"] if "default" in f]
    for field in defaulted:
        as_json.pop(field["name"], None)
        datum[field["name"]] = values.default(field["default"], field["type"])
    assert frame(schema_id(), _SCHEMA.codec().encode(as_json)) == confluents(datum)


NODE = record(
    "Node",
    {"name": "label", "type": "string"},
    {"name": "weight", "type": "int", "default": 1},
    {"name": "next", "type": ["null", "Node"]},
)


def chain(depth: int, last: Any) -> Any:
    """``depth`` nodes, each given every field, the last one's ``next`` being ``last``."""
    value = last
    for _ in range(depth):
        value = {"Node": {"label": "n", "weight": 2, "next": value}}
    return value["Node"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        # every field given: the unrolled path; something else: the careful loop
        ({"label": 1, "weight": 2, "next": None}, r"^\$\.label: expected a string, got the number 1$"),
        ({"label": "a", "weight": "2", "next": None}, r"^\$\.weight: expected an int"),
        ({"label": "a", "weight": 2, "nxt": None}, r"^\$\.next: missing field without a default$"),
        ({"label": "a", "next": None, "other": 1}, r"^\$: record 'Node' has no field 'other'$"),
        ({"label": "a", "next": None, "weight": 2, "x": 1}, r"^\$: record 'Node' has no field 'x'$"),
        ({"label": 1, "next": None}, r"^\$\.label: expected a string"),
        (
            {"label": "a", "next": {"Node": {"label": "b", "weight": 1, "next": 5}}},
            r"^\$\.next\.Node\.next: a union value",
        ),
        (
            chain(3, {"Node": {"label": "b", "weight": None, "next": None}}),
            r"^\$(\.next\.Node){3}\.weight: expected an int",
        ),
        ("x", r"^\$: expected an object \(record 'Node'\), got a string$"),
    ],
)
def test_a_value_that_does_not_fit_is_refused_where_it_does_not(value: Any, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        parse(NODE).codec().encode(value)


def test_a_deep_value_is_refused_at_its_depth_having_been_walked_once() -> None:
    # Were a record to encode again what failed below it, this would take 2**150 steps.
    codec = parse(NODE).codec()
    bad = chain(150, {"Node": {"label": "end", "weight": 1, "next": "x"}})
    with pytest.raises(ConversionError, match=r"^\$(\.next\.Node){150}\.next: a union value"):
        codec.encode(bad)
    missing = chain(150, {"Node": {"label": "end", "next": None}})  # defaults met deep down
    assert codec.decode(codec.encode(missing)) == chain(
        150, {"Node": {"label": "end", "weight": 1, "next": None}}
    )


def test_a_record_default_holding_defaults_of_its_own_encodes() -> None:
    schema = record(
        "R",
        {
            "name": "a",
            "type": record("In", {"name": "x", "type": "int"}, {"name": "z", "type": "int", "default": 5}),
        },
        {"name": "d", "type": "In", "default": {"x": 1}},
    )
    codec = parse(schema).codec()
    assert codec.encode({"a": {"x": 2}}) == b"\x04\x0a\x02\x0a"


# A top-level "bytes" schema, with or without a logical type: Confluent's serializers write the
# bytes alone (no Avro length before them) and their deserializers read the rest as the bytes.
BARE_BYTES = [
    '"bytes"',
    {"type": "bytes"},
    {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
]
BLOBS = [b"", b"\x00\x01\xff", "h\u00e9llo".encode(), bytes(range(256)), b"\x04ab"]


@pytest.mark.parametrize("schema", BARE_BYTES, ids=["primitive", "object", "decimal"])
def test_a_top_level_bytes_value_is_its_bytes_alone_both_ways_as_confluents_serde_has_it(schema: Any) -> None:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    registry = MockSchemaRegistryClient({"url": "mock://avro-bare-bytes"})
    context = SerializationContext(f"bare-{len(text)}", MessageField.VALUE)
    theirs = AvroSerializer(registry, text)
    reader = AvroDeserializer(registry)
    codec = parse(schema).codec()
    for blob in BLOBS:
        written = bytes(theirs(blob, context))
        assert written[5:] == blob == codec.encode(blob.decode("latin-1"))
        if blob:  # confluent-kafka's deserializer wants a byte after the header
            assert (
                reader(
                    frame(int.from_bytes(written[1:5], "big"), codec.encode(blob.decode("latin-1"))), context
                )
                == blob
            )
        assert codec.decode(blob) == blob.decode("latin-1")
    with pytest.raises(ConversionError, match=r"^\$: expected a string of bytes"):
        codec.encode(1)


def test_bytes_below_the_top_and_fixed_keep_avros_encoding() -> None:
    assert parse(record("R", {"name": "b", "type": "bytes"})).codec().encode({"b": "ab"}) == b"\x04ab"
    assert parse(["null", "bytes"]).codec().encode({"bytes": "ab"}) == b"\x02\x04ab"
    fixed = parse({"type": "fixed", "name": "F", "size": 2}).codec()
    assert fixed.encode("ab") == b"ab" and fixed.decode(b"ab") == "ab"
    assert parse({"type": "array", "items": "bytes"}).codec().decode(b"\x02\x04ab\x00") == ["ab"]


def test_a_bytes_record_an_older_gateway_wrote_with_avros_length_reads_as_confluent_reads_it() -> None:
    # No marker tells the two forms apart: the length is read as one of the bytes (docs/schemas.md).
    assert parse('"bytes"').codec().decode(b"\x04ab") == "\x04ab"
