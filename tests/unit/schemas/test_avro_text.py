"""The texts the registry stores for an Avro schema: Avro's compact print (Confluent's
canonicalString) and, for ``?normalize=true``, the normalized one; each parses back to the same
schema."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.core.schemas.avro import AvroFormat, AvroSchema
from service.core.schemas.model import Schema, SchemaReference, SchemaType, formatted_text, normalized_text


def parse(schema: Any, references: dict[str, AvroSchema] | None = None, *refs: Any) -> AvroSchema:
    text = schema if isinstance(schema, str) else json.dumps(schema, indent=2)
    return AvroFormat().parse(Schema(SchemaType.AVRO, text, tuple(refs)), references or {})


@pytest.mark.parametrize(
    ("schema", "printed"),
    [
        ('{"type": "int", "name": "X", "doc": "d"}', '"int"'),  # reserved names are no attributes
        (
            {"type": "long", "logicalType": "timestamp-millis", "b": 1},
            '{"type":"long","logicalType":"timestamp-millis","b":1}',
        ),
        ({"items": "int", "type": "array", "name": "A"}, '{"type":"array","items":"int"}'),
        (
            {"symbols": ["A"], "type": "enum", "name": "E", "default": "A", "doc": "e"},
            '{"type":"enum","name":"E","doc":"e","symbols":["A"],"default":"A"}',
        ),
        (
            {
                "fields": [
                    {"type": {"type": "fixed", "size": 2, "name": "F"}, "name": "f"},
                    {"type": "F", "name": "g"},
                ],
                "type": "record",
                "name": "R",
                "namespace": "a.b",
            },
            '{"type":"record","name":"R","namespace":"a.b","fields":[{"name":"f","type":'
            '{"type":"fixed","name":"F","size":2}},{"name":"g","type":"F"}]}',
        ),
        (  # a type of another namespace: by full name, with its namespace where it is defined
            {
                "type": "record",
                "name": "R",
                "namespace": "a",
                "fields": [
                    {"name": "f", "type": {"type": "record", "name": "x.S", "fields": []}},
                    {"name": "g", "type": ["null", "x.S"], "default": None},
                    {"name": "h", "type": {"type": "record", "name": "T", "namespace": "", "fields": []}},
                ],
            },
            '{"type":"record","name":"R","namespace":"a","fields":[{"name":"f","type":'
            '{"type":"record","name":"S","namespace":"x","fields":[]}},{"name":"g","type":["null","x.S"],'
            '"default":null},{"name":"h","type":{"type":"record","name":"T","namespace":"","fields":[]}}]}',
        ),
    ],
)
def test_avros_compact_print(schema: Any, printed: str) -> None:
    parsed = parse(schema)
    assert formatted_text(parsed) == printed
    assert parse(printed).canonical() == parsed.canonical()


def test_normalized_sorts_attributes_the_logical_type_first() -> None:
    schema = {"type": "bytes", "z": 1, "scale": 2, "logicalType": "decimal", "precision": 4, "a": 0}
    parsed = parse(schema)
    assert (
        formatted_text(parsed)
        == '{"type":"bytes","z":1,"scale":2,"logicalType":"decimal","precision":4,"a":0}'
    )
    assert (
        normalized_text(parsed)
        == '{"type":"bytes","logicalType":"decimal","precision":4,"scale":2,"a":0,"z":1}'
    )
    assert parse(normalized_text(parsed)).canonical() == parsed.canonical()


def test_types_of_references_are_written_by_name() -> None:
    customer = parse({"type": "record", "name": "Customer", "namespace": "shop", "fields": []})
    ref = SchemaReference("shop.Customer", "customer", 1)
    order = parse(
        {
            "type": "record",
            "name": "Order",
            "namespace": "shop",
            "fields": [{"name": "c", "type": "Customer"}],
        },
        {"shop.Customer": customer},
        ref,
    )
    expected = '{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"c","type":"Customer"}]}'
    assert formatted_text(order) == expected
