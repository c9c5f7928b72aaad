"""Avro: what parses and why not, one canonical text per schema, Avro's resolution rules under each
compatibility level, and Avro JSON to binary and back."""

from __future__ import annotations

import io
import json
import re
import struct
from dataclasses import dataclass
from typing import Any

import fastavro
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from service.core.schemas.avro import AvroFormat, AvroSchema
from service.core.schemas.model import (
    Compatibility,
    ConversionError,
    InvalidSchema,
    SchemaReference,
    SchemaType,
    compatibility_errors,
    fill_roles,
)
from tests.unit.schemas.helpers import Parser


def _text(schema: Any) -> str:
    # A str is schema text, unless it is a bare type name: then it is that name as a JSON string.
    bare = isinstance(schema, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", schema)
    return schema if isinstance(schema, str) and not bare else json.dumps(schema)


parse = Parser(AvroFormat(), SchemaType.AVRO, _text)


def record(name: str, *fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


# --- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("{not json", "an Avro schema is JSON"),
        ("42", "is not a schema"),
        ({"type": "nope"}, "unknown type 'nope'"),
        ({"fields": []}, "needs a 'type'"),
        (
            record("R", {"name": "a", "type": "int"}, {"name": "a", "type": "long"}),
            "field 'a' is defined twice",
        ),
        (record("R", {"name": "1a", "type": "int"}), "needs a valid 'name'"),
        (record("R", {"name": "a"}), "a field needs a 'type'"),
        (record("1R"), "not a valid Avro name"),
        ({"type": "record", "name": "R"}, "needs 'fields'"),
        ({"type": "enum", "name": "E", "symbols": ["A", "A"]}, "unique"),
        ({"type": "enum", "name": "E", "symbols": ["A", "1"]}, "not a valid enum symbol"),
        ({"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}, "not a symbol"),
        ({"type": "fixed", "name": "F"}, "needs 'size'"),
        ({"type": "fixed", "name": "F", "size": -1}, "needs 'size'"),
        ({"type": "array"}, "needs 'items'"),
        (["int", "int"], "holds 'int' twice"),
        (["int", ["null"]], "cannot directly contain a union"),
        (record("R", {"name": "a", "type": "Missing"}), "unknown type 'Missing'"),
        (record("R", {"name": "a", "type": "int", "default": "x"}), "invalid default"),
        (record("R", {"name": "a", "type": "int", "default": 2**31}), "invalid default"),
        (record("R", {"name": "a", "type": ["null", "int"], "default": "x"}), "fits no branch"),
        (
            record("R", {"name": "a", "type": {"type": "fixed", "name": "F", "size": 2}, "default": "abc"}),
            "expected 2 bytes",
        ),
        (
            record(
                "R",
                {
                    "name": "a",
                    "type": record(
                        "R",
                    ),
                },
            ),
            "defined twice",
        ),
        (record("int"), "primitive type"),
        (record("R", {"name": "a", "type": "int", "order": "up"}), "'order' must be one of"),
        ({"type": {"type": "int"}}, "must be a string"),
    ],
)
def test_invalid_schemas_say_why(schema: Any, message: str) -> None:
    with pytest.raises(InvalidSchema, match=message):
        parse(schema)


def test_a_record_may_refer_to_itself() -> None:
    parsed = parse(record("Node", {"name": "next", "type": ["null", "Node"]}))
    assert parsed.codec().decode(parsed.codec().encode({"next": {"Node": {"next": None}}})) == {
        "next": {"Node": {"next": None}}
    }


def test_a_default_may_hold_a_value_of_the_record_being_defined() -> None:
    tree = record(
        "Tree", {"name": "kids", "type": {"type": "array", "items": "Tree"}, "default": [{"kids": []}]}
    )
    codec = parse(tree).codec()
    assert codec.decode(codec.encode({})) == {"kids": [{"kids": []}]}
    with pytest.raises(InvalidSchema, match="field 'kids' is missing and has no default"):
        parse(record("Tree", {"name": "kids", "type": {"type": "array", "items": "Tree"}, "default": [{}]}))


def test_names_resolve_in_the_enclosing_namespace_then_unqualified() -> None:
    parsed = parse(
        record(
            "R",
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
            {"name": "f", "type": "E"},
            {"name": "g", "type": "com.x.E"},
            namespace="com.x",
        )
    )
    assert json.loads(parsed.canonical())["fields"][1]["type"] == "com.x.E"
    other = parse(
        {
            "type": "record",
            "name": "R",
            "namespace": "a",
            "fields": [
                {"name": "e", "type": {"type": "enum", "name": "E", "namespace": "", "symbols": ["A"]}},
                {"name": "f", "type": "E"},
            ],
        }
    )
    assert json.loads(other.canonical())["fields"][1]["type"] == "E"


def test_references_provide_named_types() -> None:
    address = parse(record("Address", {"name": "street", "type": "string"}, namespace="com.acme"))
    ref = SchemaReference("com.acme.Address", "address-value", 1)
    customer = parse(
        record("Customer", {"name": "address", "type": "com.acme.Address"}),
        {"com.acme.Address": address},
        (ref,),
    )
    codec = customer.codec()
    assert codec.decode(codec.encode({"address": {"street": "Main"}})) == {"address": {"street": "Main"}}
    # the referenced type is named, not copied, in the canonical text
    assert json.loads(customer.canonical())["fields"][0]["type"] == "com.acme.Address"
    with pytest.raises(InvalidSchema, match=r"reference 'com\.acme\.Address' .* was not given"):
        parse(record("Customer", {"name": "address", "type": "com.acme.Address"}), {}, (ref,))
    with pytest.raises(InvalidSchema, match=r"unknown type 'com\.acme\.Address'"):
        parse(record("Customer", {"name": "address", "type": "com.acme.Address"}))


def test_a_type_reached_through_two_references_is_one_type() -> None:
    def money() -> AvroSchema:  # parsed anew each time, as a registry may
        return parse(record("Money", {"name": "cents", "type": "long"}))

    money_ref = (SchemaReference("Money", "money", 1),)
    price = parse(record("Price", {"name": "amount", "type": "Money"}), {"Money": money()}, money_ref)
    cost = parse(record("Cost", {"name": "amount", "type": "Money"}), {"Money": money()}, money_ref)
    line = parse(
        record("Line", {"name": "price", "type": "Price"}, {"name": "cost", "type": "Cost"}),
        {"Price": price, "Cost": cost},
        (SchemaReference("Price", "price", 1), SchemaReference("Cost", "cost", 1)),
    )
    value = {"price": {"amount": {"cents": 1}}, "cost": {"amount": {"cents": 2}}}
    assert line.codec().decode(line.codec().encode(value)) == value
    other_money = parse(record("Money", {"name": "cents", "type": "int"}))
    other_cost = parse(record("Cost", {"name": "amount", "type": "Money"}), {"Money": other_money}, money_ref)
    with pytest.raises(InvalidSchema, match="type 'Money' is defined by two references"):
        parse(
            record("Line", {"name": "price", "type": "Price"}, {"name": "cost", "type": "Cost"}),
            {"Price": price, "Cost": other_cost},
            (SchemaReference("Price", "price", 1), SchemaReference("Cost", "cost", 1)),
        )


# --- canonical text -------------------------------------------------------------------------------


def test_spelling_does_not_change_the_canonical_text() -> None:
    a = parse(
        '{"type":"record","name":"R","namespace":"com.x","fields":[{"name":"a","type":{"type":"int"}},'
        '{"name":"b","type":"double","default":1,"order":"ascending"},'
        '{"name":"c","type":{"type":"enum","name":"E","symbols":["X"],"aliases":["Old2","Old1"]}}]}'
    )
    b = parse(
        """{
          "fields": [
            {"type": "int", "name": "a"},
            {"default": 1.0, "type": "double", "name": "b"},
            {"type": {"symbols": ["X"], "name": "com.x.E", "type": "enum", "aliases": ["com.x.Old1", "Old2"]},
             "name": "c"}
          ],
          "name": "com.x.R", "type": "record"
        }"""
    )
    assert a.canonical() == b.canonical()


@pytest.mark.parametrize(
    "change",
    [
        {"default": 2},  # a different default is a different schema (unlike Parsing Canonical Form)
        {"doc": "the count"},
        {"aliases": ["count"]},
        {"order": "descending"},
        {"type": "long"},
    ],
)
def test_what_a_reader_or_user_sees_changes_the_canonical_text(change: dict[str, Any]) -> None:
    base = {"name": "n", "type": "int", "default": 1}
    assert parse(record("R", base)).canonical() != parse(record("R", {**base, **change})).canonical()


# --- reading rules --------------------------------------------------------------------------------


readable = parse.reading_errors


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        ("int", "long"),
        ("int", "float"),
        ("int", "double"),
        ("long", "float"),
        ("long", "double"),
        ("float", "double"),
        ("string", "bytes"),
        ("bytes", "string"),
        ("int", ["null", "int"]),
        (["int", "long"], "double"),
        ({"type": "array", "items": "int"}, {"type": "array", "items": "long"}),
        ({"type": "map", "values": "float"}, {"type": "map", "values": "double"}),
        ({"type": "fixed", "name": "a.F", "size": 4}, {"type": "fixed", "name": "b.F", "size": 4}),
        (
            {"type": "enum", "name": "E", "symbols": ["A"]},
            {"type": "enum", "name": "E", "symbols": ["A", "B"]},
        ),
        (
            {"type": "enum", "name": "E", "symbols": ["A", "C"]},
            {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"},
        ),
        (
            record("Old", {"name": "a", "type": "int"}),
            record("New", {"name": "a", "type": "int"}, aliases=["Old"]),
        ),
        (
            record("R", {"name": "old", "type": "int"}),
            record("R", {"name": "new", "type": "int", "aliases": ["old"]}),
        ),
    ],
)
def test_avro_resolution_reads(writer: Any, reader: Any) -> None:
    assert readable(reader, writer) == []


def why(kind: str, path: str, info: str) -> str:
    """Confluent's text of one of Avro's incompatibilities (its Avro ``Difference``), roles as %s."""
    at, matches = f"at path '{path}'", "in the %s schema does not match with the %s schema"
    description = {
        "TYPE_MISMATCH": f"The type (path '{path}') of a field {matches}",
        "MISSING_UNION_BRANCH": f"The %s schema is missing a type inside a union field {at} in the %s schema",
        "FIXED_SIZE_MISMATCH": f"The size of FIXED type field {at} {matches}",
        "MISSING_ENUM_SYMBOLS": f"The %s schema is missing enum symbols '{info}' {at} in the %s schema",
        "NAME_MISMATCH": f"The name of the schema has changed (path '{path}')",
        "READER_FIELD_MISSING_DEFAULT_VALUE": (
            f"The field '{info}' {at} in the %s schema has no default value and is missing in the %s schema"
        ),
    }[kind]
    return f"{{errorType:'{kind}', description:'{description}', additionalInfo:'{info}'}}"


def mismatch(path: str, reader: str, writer: str) -> str:
    return why("TYPE_MISMATCH", path, f"reader type: {reader} not compatible with writer type: {writer}")


def lacking(path: str, writer: str) -> str:
    return why("MISSING_UNION_BRANCH", path, f"reader union lacking writer type: {writer}")


def array(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


def avro_map(values: Any) -> dict[str, Any]:
    return {"type": "map", "values": values}


@pytest.mark.parametrize(
    ("writer", "reader", "errors"),
    [
        ("long", "int", [mismatch("/", "INT", "LONG")]),
        ("double", "float", [mismatch("/", "FLOAT", "DOUBLE")]),
        ("string", "int", [mismatch("/", "INT", "STRING")]),
        (["null", "int"], "int", [mismatch("/0", "INT", "NULL")]),  # a writer's branch, where it is
        (
            ["int", "string"],
            ["int", "boolean"],
            [lacking("/1", "STRING")],
        ),
        (
            "string",
            ["null", "int"],
            [why("MISSING_UNION_BRANCH", "/", "reader union lacking writer type: STRING")],
        ),
        (
            {"type": "fixed", "name": "F", "size": 4},
            {"type": "fixed", "name": "F", "size": 8},
            [why("FIXED_SIZE_MISMATCH", "/size", "expected: 4, found: 8")],
        ),
        (
            {"type": "enum", "name": "E", "symbols": ["C", "A", "B"]},
            {"type": "enum", "name": "E", "symbols": ["A"]},
            [why("MISSING_ENUM_SYMBOLS", "/symbols", "[B, C]")],  # sorted, as a Java TreeSet prints
        ),
        (  # the name, and the fields either way
            record("A", {"name": "a", "type": "int"}),
            record("B", {"name": "a", "type": "string"}),
            [why("NAME_MISMATCH", "/name", "expected: A"), mismatch("/fields/0/type", "STRING", "INT")],
        ),
        (
            record("R", {"name": "a", "type": "int"}),
            record("R", {"name": "a", "type": "int"}, {"name": "x", "type": "int"}),
            [why("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1", "x")],
        ),
        (
            {"type": "array", "items": "long"},
            {"type": "array", "items": "int"},
            [mismatch("/items", "INT", "LONG")],
        ),
        (
            {"type": "map", "values": "string"},
            {"type": "map", "values": "int"},
            [mismatch("/values", "INT", "STRING")],
        ),
        (
            {"type": "map", "values": "int"},
            {"type": "array", "items": "int"},
            [mismatch("/", "ARRAY", "MAP")],
        ),
    ],
)
def test_avro_resolution_refuses(writer: Any, reader: Any, errors: list[str]) -> None:
    assert readable(reader, writer) == errors


def test_a_field_without_default_of_an_enum_with_one_is_compared_as_avro_does() -> None:
    """Avro compares such a field's enum with the writer's record itself: a type mismatch."""
    enum = {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}
    errors = readable(record("R", {"name": "e", "type": enum}), record("R"))
    assert errors == [mismatch("/fields/0/type", "ENUM", "RECORD")]


def test_recursive_schemas_are_compared_once_per_pair() -> None:
    old = record("Node", {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]})
    new = record("Node", {"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]})
    assert readable(new, old) == []
    assert readable(old, new) == [mismatch("/fields/0/type", "INT", "LONG")]


def test_nested_records_report_the_path() -> None:
    inner_old = record("Inner", {"name": "a", "type": "int"})
    inner_new = record("Inner", {"name": "a", "type": "int"}, {"name": "b", "type": "string"})
    errors = readable(
        record("Outer", {"name": "in", "type": inner_new}), record("Outer", {"name": "in", "type": inner_old})
    )
    assert errors == [why("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/0/type/fields/1", "b")]


def test_the_roles_are_filled_in_as_confluent_does() -> None:
    """New reads old under BACKWARD, old reads new under FORWARD; FULL lists FORWARD's first."""
    old = parse(record("R", {"name": "a", "type": "int"}))
    new = parse(record("R", {"name": "a", "type": "string"}, {"name": "b", "type": "int"}))
    missing = fill_roles(why("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1", "b"), "new", "old")
    assert "in the new schema has no default value and is missing in the old schema" in missing
    type_new = fill_roles(mismatch("/fields/0/type", "STRING", "INT"), "new", "old")
    type_old = fill_roles(mismatch("/fields/0/type", "INT", "STRING"), "old", "new")
    assert compatibility_errors(new, [old], Compatibility.BACKWARD) == [type_new, missing]
    assert compatibility_errors(new, [old], Compatibility.FORWARD) == [type_old]
    assert compatibility_errors(new, [old], Compatibility.FULL) == [type_old, type_new, missing]


# Evolutions with a known verdict: (backward ok, forward ok), as Avro's resolution rules decide.

_PRIMITIVE = ["int", "long", "float", "double", "string", "bytes", "boolean"]
_SAMPLE_DEFAULT = {
    "int": 1,
    "long": 2,
    "float": 1.5,
    "double": 2.5,
    "string": "s",
    "bytes": "b",
    "boolean": True,
}
_PROMOTIONS = {
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "bytes"),
    ("bytes", "string"),
}


@dataclass
class Field:
    name: str
    type: str
    default: bool

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.default:
            out["default"] = _SAMPLE_DEFAULT[self.type]
        return out


@st.composite
def evolutions(draw: st.DrawFn) -> tuple[list[Field], list[dict[str, Any]], bool, bool, str]:
    count = draw(st.integers(1, 6))
    fields = [Field(f"f{i}", draw(st.sampled_from(_PRIMITIVE)), draw(st.booleans())) for i in range(count)]
    new = [f.schema() for f in fields]
    i = draw(st.integers(0, count - 1))
    target = fields[i]
    step = draw(
        st.sampled_from(
            ["add", "add_no_default", "remove", "promote", "change", "rename_alias", "nullable", "doc"]
        )
    )
    if step == "add":
        new.append({"name": "added", "type": "int", "default": 0})
        verdict = (True, True)
    elif step == "add_no_default":
        new.append({"name": "added", "type": "int"})
        verdict = (False, True)
    elif step == "remove":
        del new[i]
        verdict = (True, target.default)
    elif step == "promote":
        choices = [b for (a, b) in _PROMOTIONS if a == target.type]
        if not choices:
            return fields, new, True, True, "unchanged"
        to = draw(st.sampled_from(sorted(choices)))
        new[i] = Field(target.name, to, target.default).schema()
        verdict = (True, (to, target.type) in _PROMOTIONS)
    elif step == "change":
        to = draw(st.sampled_from([t for t in _PRIMITIVE if t != target.type]))
        new[i] = Field(target.name, to, target.default).schema()
        verdict = ((target.type, to) in _PROMOTIONS, (to, target.type) in _PROMOTIONS)
    elif step == "rename_alias":
        new[i] = {**target.schema(), "name": "renamed", "aliases": [target.name]}
        verdict = (True, target.default)  # the old reader finds no field of its name: default or fail
    elif step == "nullable":
        new[i] = {"name": target.name, "type": [target.type, "null"]}
        if target.default:
            new[i]["default"] = _SAMPLE_DEFAULT[target.type]
        verdict = (True, False)  # an old reader cannot read the null branch
    else:
        new[i] = {**target.schema(), "doc": "documented"}
        verdict = (True, True)
    return fields, new, verdict[0], verdict[1], step


@settings(max_examples=150)
@given(evolutions())
def test_evolution_steps_get_avros_verdict_at_every_level(
    evolution: tuple[list[Field], list[dict[str, Any]], bool, bool, str],
) -> None:
    fields, new_fields, backward, forward, step = evolution
    event(step)
    old = parse(record("R", *[f.schema() for f in fields]))
    new = parse(record("R", *new_fields))
    expected = {
        Compatibility.NONE: True,
        Compatibility.BACKWARD: backward,
        Compatibility.BACKWARD_TRANSITIVE: backward,
        Compatibility.FORWARD: forward,
        Compatibility.FORWARD_TRANSITIVE: forward,
        Compatibility.FULL: backward and forward,
        Compatibility.FULL_TRANSITIVE: backward and forward,
    }
    for level, ok in expected.items():
        errors = compatibility_errors(new, [old], level)
        assert (errors == []) is ok, (level, errors)
    # What the rules call readable, fastavro reads: old data with the new schema, and back.
    for reader, writer, ok in ((new, old, backward), (old, new, forward)):
        if ok:
            _resolve_with_fastavro(reader, writer)


def _resolve_with_fastavro(reader: AvroSchema, writer: AvroSchema) -> None:
    wschema = fastavro.parse_schema(json.loads(writer.schema.text))
    rschema = fastavro.parse_schema(json.loads(reader.schema.text))
    value = {f["name"]: _sample(f["type"]) for f in json.loads(writer.schema.text)["fields"]}
    out = io.BytesIO()
    fastavro.schemaless_writer(out, wschema, value)
    fastavro.schemaless_reader(io.BytesIO(out.getvalue()), wschema, rschema)


def _sample(type_: Any) -> Any:
    if isinstance(type_, list):
        return _sample(type_[0])
    return {"int": 1, "long": 1, "float": 1.0, "double": 1.0, "string": "x", "bytes": b"x", "boolean": True}[
        type_
    ]


def test_transitive_levels_check_every_earlier_version() -> None:
    v1 = parse(record("R", {"name": "a", "type": "int"}))
    v2 = parse(record("R", {"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}))
    v3 = parse(record("R", {"name": "b", "type": "int", "default": 0}))
    assert compatibility_errors(v3, [v1, v2], Compatibility.FORWARD) != []  # v2 needs a, v3 drops it
    assert compatibility_errors(v3, [v1, v2], Compatibility.BACKWARD) == []
    v4 = parse(record("R", {"name": "a", "type": "int"}, {"name": "c", "type": "int"}))
    assert compatibility_errors(v4, [v1, v2], Compatibility.BACKWARD) != []
    v5 = parse(record("R", {"name": "a", "type": "long"}))
    v6 = parse(record("R", {"name": "a", "type": "float"}))
    assert compatibility_errors(v6, [v5], Compatibility.FORWARD) != []
    older = parse(record("R", {"name": "a", "type": "string"}))
    assert compatibility_errors(v6, [older, v5], Compatibility.BACKWARD) == []  # the latest only
    assert compatibility_errors(v6, [older, v5], Compatibility.BACKWARD_TRANSITIVE) != []


# --- codec ----------------------------------------------------------------------------------------

RICH = record(
    "Rich",
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "s", "type": "string"},
    {"name": "b", "type": "bytes"},
    {"name": "fx", "type": {"type": "fixed", "name": "Hash", "size": 2}},
    {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "a", "type": {"type": "array", "items": "int"}},
    {"name": "m", "type": {"type": "map", "values": ["null", "string"]}},
    {"name": "u", "type": ["null", "string", "Color", record("Point", {"name": "x", "type": "int"})]},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
    {"name": "opt", "type": ["null", "int"], "default": None},
    {"name": "dflt", "type": {"type": "array", "items": ["null", "Point"]}, "default": [{"x": 1}, None]},
    namespace="com.acme",
)

RICH_VALUE = {
    "i": -5,
    "l": 2**40,
    "f": 1.5,
    "d": -2.25,
    "s": "héllo",
    "b": "\u0000\u00ff",
    "fx": "ab",
    "e": "GREEN",
    "a": [1, 2],
    "m": {"k": {"string": "v"}, "n": None},
    "u": {"com.acme.Point": {"x": 3}},
    "ts": 1700000000000,
    "dec": "\u0004\u00d2",
    "opt": {"int": 7},
    "dflt": [],
}


def test_rich_values_round_trip() -> None:
    codec = parse(RICH).codec()
    assert codec.decode(codec.encode(RICH_VALUE)) == RICH_VALUE


def test_missing_fields_take_their_defaults_in_avro_json() -> None:
    codec = parse(RICH).codec()
    value = {k: v for k, v in RICH_VALUE.items() if k not in ("opt", "dflt")}
    decoded = codec.decode(codec.encode(value))
    assert decoded["opt"] is None
    assert decoded["dflt"] == [{"com.acme.Point": {"x": 1}}, None]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(float("nan"), "NaN"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity")],
)
def test_special_floats_are_strings_as_in_avro_json(value: float, expected: str) -> None:
    codec = parse(record("R", {"name": "d", "type": "double"}, {"name": "f", "type": "float"})).codec()
    assert codec.decode(codec.encode({"d": expected, "f": expected})) == {"d": expected, "f": expected}


def test_primitive_and_union_schemas_encode_as_avro_does() -> None:
    assert parse('"string"').codec().encode("abc") == b"\x06abc"
    assert parse('"null"').codec().encode(None) == b""
    union = parse('["null", "long", "string"]').codec()
    assert union.encode(None) == b"\x00"
    assert union.encode({"long": 1}) == b"\x02\x02"
    assert union.decode(b"\x04\x02x") == {"string": "x"}


def test_an_int_and_long_union_decodes_to_the_first_branch_that_holds_the_value() -> None:
    codec = parse('["int", "long"]').codec()
    assert codec.decode(codec.encode({"long": 5})) == {"int": 5}
    assert codec.decode(codec.encode({"long": 2**40})) == {"long": 2**40}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], r"^\$: expected an object \(record 'com.acme.Rich'\)"),
        ({**RICH_VALUE, "i": "1"}, r"^\$\.i: expected an int"),
        ({**RICH_VALUE, "i": 2**31}, r"^\$\.i: expected an int"),
        ({**RICH_VALUE, "i": True}, r"^\$\.i: expected an int"),
        ({**RICH_VALUE, "l": 1.5}, r"^\$\.l: expected a long"),
        ({**RICH_VALUE, "f": 1e39}, r"^\$\.f: .* out of range for a float"),
        ({**RICH_VALUE, "b": "\u0100"}, r"^\$\.b: bytes are a string of code points 0-255"),
        ({**RICH_VALUE, "fx": "abc"}, r"^\$\.fx: expected 2 bytes, got 3"),
        ({**RICH_VALUE, "e": "BLUE"}, r"^\$\.e: expected one of the symbols"),
        ({**RICH_VALUE, "a": [1, "x"]}, r"^\$\.a\[1\]: expected an int"),
        ({**RICH_VALUE, "m": {"k": "v"}}, r"^\$\.m\.k: a union value is null or an object naming its branch"),
        ({**RICH_VALUE, "u": {"Point": {"x": 1}}}, r"^\$\.u: 'Point' is not a branch of the union"),
        (
            {**RICH_VALUE, "u": {"com.acme.Point": {"x": "1"}}},
            r'^\$\.u\["com\.acme\.Point"\]\.x: expected an int',
        ),
        ({**RICH_VALUE, "extra": 1}, r"^\$: record 'com.acme.Rich' has no field 'extra'"),
        ({k: v for k, v in RICH_VALUE.items() if k != "s"}, r"^\$\.s: missing field without a default"),
    ],
)
def test_values_that_do_not_fit_say_where_and_why(value: Any, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        parse(RICH).codec().encode(value)


@pytest.mark.parametrize("payload", [b"", b"\x02", b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"])
def test_bytes_that_are_not_a_datum_are_a_conversion_error(payload: bytes) -> None:
    with pytest.raises(ConversionError, match="not Avro data"):
        parse(
            record("R", {"name": "s", "type": "string"}, {"name": "u", "type": ["null", "int"]})
        ).codec().decode(payload)


def test_deeply_nested_payloads_of_recursive_schemas_are_refused_not_a_crash() -> None:
    # fastavro's compiled reader would overflow the C stack a few thousand levels down
    codec = parse(record("Node", {"name": "next", "type": ["null", "Node"]})).codec()
    with pytest.raises(ConversionError, match="nested too deeply"):
        codec.decode(b"\x02" * 100_000 + b"\x00")
    shallow = b"\x02" * 100 + b"\x00"
    assert codec.encode(codec.decode(shallow)) == shallow
    named = parse(
        record("Named", {"name": "label", "type": "string"}, {"name": "next", "type": ["null", "Named"]})
    ).codec()
    long_and_shallow = {"label": "x" * 2000, "next": {"Named": {"label": "y", "next": None}}}
    assert named.decode(named.encode(long_and_shallow)) == long_and_shallow
    deep_value: Any = None
    for _ in range(5000):
        deep_value = {"next": {"Node": deep_value}}
    with pytest.raises(ConversionError, match="nested too deeply"):
        codec.encode(deep_value)


def test_the_codec_is_built_once() -> None:
    parsed = parse(RICH)
    assert parsed.codec() is parsed.codec()


_avro_json_values = st.fixed_dictionaries(
    {
        "i": st.integers(-(2**31), 2**31 - 1),
        "l": st.integers(-(2**63), 2**63 - 1),
        "f": st.floats(width=32, allow_nan=False, allow_infinity=False),
        "d": st.floats(allow_nan=False, allow_infinity=False),
        "s": st.text(max_size=10),
        "b": st.binary(max_size=10).map(lambda b: b.decode("latin-1")),
        "fx": st.binary(min_size=2, max_size=2).map(lambda b: b.decode("latin-1")),
        "e": st.sampled_from(["RED", "GREEN"]),
        "a": st.lists(st.integers(-100, 100), max_size=4),
        "m": st.dictionaries(
            st.text(max_size=4),
            st.none() | st.builds(lambda s: {"string": s}, st.text(max_size=4)),
            max_size=3,
        ),
        "u": st.none()
        | st.builds(lambda s: {"string": s}, st.text(max_size=4))
        | st.sampled_from([{"com.acme.Color": "RED"}, {"com.acme.Point": {"x": 0}}]),
        "ts": st.integers(0, 2**41),
        "dec": st.binary(max_size=4).map(lambda b: b.decode("latin-1")),
        "opt": st.none() | st.builds(lambda i: {"int": i}, st.integers(-5, 5)),
        "dflt": st.lists(
            st.none() | st.builds(lambda x: {"com.acme.Point": {"x": x}}, st.integers(-5, 5)), max_size=3
        ),
    }
)


@settings(max_examples=100)
@given(_avro_json_values)
def test_any_avro_json_value_round_trips(value: dict[str, Any]) -> None:
    codec = parse(RICH).codec()
    payload = codec.encode(value)
    decoded = codec.decode(payload)
    assert {**decoded, "f": None} == {**value, "f": None}
    assert float32(decoded["f"]) == value["f"]  # the same float, in its shortest spelling
    assert codec.encode(decoded) == payload


def float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


@pytest.mark.parametrize(
    "value", [1.1, 0.1, -2.5, 3.4028235e38, 1e-45, 16777217.0, 0.3333333432674408, 123456.789]
)
def test_floats_decode_as_their_shortest_decimal_as_java_prints_them(value: float) -> None:
    codec = parse('"float"').codec()
    decoded = codec.decode(codec.encode(value))
    assert float32(decoded) == float32(value)
    assert decoded == float(repr(decoded)) and len(repr(decoded)) <= len(repr(float32(value)))
    expected = {1.1: 1.1, 0.1: 0.1, -2.5: -2.5, 3.4028235e38: 3.4028235e38, 1e-45: 1e-45}
    if value in expected:
        assert decoded == expected[value]
