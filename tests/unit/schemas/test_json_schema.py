"""JSON Schema: drafts and references, the canonical text, Confluent's compatibility rules under each
level, and values checked and written as compact JSON."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from service.core.schemas.json_schema import MAX_COMPARISONS, JsonSchemaFormat
from service.core.schemas.model import (
    Compatibility,
    ConversionError,
    InvalidSchema,
    SchemaReference,
    SchemaType,
    compatibility_errors,
)
from tests.unit.schemas.helpers import Parser

parse = Parser(JsonSchemaFormat(), SchemaType.JSON)


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    if required:
        out["required"] = required
    return out


# --- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "a JSON Schema is a JSON document"),
        ("[]", "a JSON object or a boolean"),
        ('{"type": "text"}', "not a valid draft-07 schema at /type"),
        (
            '{"$schema": "https://json-schema.org/draft/2020-12/schema", "minLength": -1}',
            "not a valid draft 2020-12 schema at /minLength",
        ),
        (
            '{"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 3}',
            "not a valid draft-04 schema",
        ),
        ('{"$schema": "http://example.com/my-draft"}', "unsupported \\$schema"),
        ('{"$ref": "#/definitions/missing"}', "resolves neither inside the schema nor to a reference"),
        ('{"properties": {"a": {"$ref": "other.json"}}}', "/properties/a: \\$ref 'other.json'"),
        ('{"pattern": "(?<=a)b"}', "not a regular expression in RE2 syntax"),
        ('{"patternProperties": {"(a)\\\\1": {}}}', "RE2 syntax"),
    ],
)
def test_invalid_schemas_say_why(text: str, message: str) -> None:
    with pytest.raises(InvalidSchema, match=message):
        parse(text)


def test_draft_07_is_the_default_and_each_draft_is_checked_as_itself() -> None:
    # exclusiveMinimum is a number from draft-06 on, a boolean in draft-04
    parse({"exclusiveMinimum": 3})
    parse({"$schema": "http://json-schema.org/draft-04/schema#", "minimum": 3, "exclusiveMinimum": True})
    parse({"$schema": "https://json-schema.org/draft/2019-09/schema", "$defs": {"a": {"type": "string"}}})
    parse(True)


def test_references_resolve_by_name_and_never_by_fetching() -> None:
    address = parse(obj({"zip": {"type": "string"}}, ["zip"]))
    ref = SchemaReference("address.json", "address-value", 1)
    customer = parse(obj({"address": {"$ref": "address.json"}}), {"address.json": address}, (ref,))
    codec = customer.codec()
    assert codec.encode({"address": {"zip": "1"}}) == b'{"address":{"zip":"1"}}'
    with pytest.raises(ConversionError, match=r"\$\.address: 'zip' is a required property"):
        codec.encode({"address": {}})
    with pytest.raises(InvalidSchema, match=r"reference 'address\.json' .* was not given"):
        parse(obj({"address": {"$ref": "address.json"}}), {}, (ref,))
    with pytest.raises(InvalidSchema, match="resolves neither"):
        parse(obj({"address": {"$ref": "https://example.com/address.json"}}))


def test_references_resolve_against_the_schemas_id_and_their_own_id() -> None:
    address = parse({"$id": "https://example.com/schemas/address.json", "type": "string"})
    ref = SchemaReference("address.json", "address-value", 1)
    customer = parse(
        {"$id": "https://example.com/schemas/customer.json", "properties": {"a": {"$ref": "address.json"}}},
        {"address.json": address},
        (ref,),
    )
    with pytest.raises(ConversionError, match=r"\$\.a: 1 is not of type 'string'"):
        customer.codec().encode({"a": 1})
    nested = parse(
        {"items": {"$ref": "customer.json"}},
        {"customer.json": customer},
        (SchemaReference("customer.json", "customer-value", 1),),
    )
    with pytest.raises(ConversionError, match=r"\$\[0\]\.a"):
        nested.codec().encode([{"a": 1}])


# --- canonical text -------------------------------------------------------------------------------


def test_canonical_text_is_sorted_and_compact() -> None:
    a = parse('{"type": "object",\n  "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}')
    b = parse('{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}')
    assert (
        a.canonical()
        == b.canonical()
        == '{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}'
    )
    assert (
        parse(obj({"a": {"type": "number"}})).canonical()
        != parse(obj({"a": {"type": "integer"}})).canonical()
    )


# --- compatibility --------------------------------------------------------------------------------


errors = parse.reading_errors


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        ({"type": "integer"}, {"type": "number"}),
        ({"type": "string"}, {"type": ["string", "null"]}),
        ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}),
        ({"type": "string", "maxLength": 5}, {"type": "string"}),
        ({"type": "string", "minLength": 5}, {"type": "string", "minLength": 1}),
        ({"type": "integer", "maximum": 5, "minimum": 0}, {"type": "integer", "maximum": 6, "minimum": -1}),
        ({"type": "number", "multipleOf": 4}, {"type": "number", "multipleOf": 2}),
        ({"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}),
        ({"const": 1}, {"enum": [1, 2]}),
        ({"type": "string"}, {}),
        ({"type": "string"}, True),
        (False, {"type": "string"}),
        ({"type": "string"}, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (
            {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        ),
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"type": ["integer", "string"]}),
        ({"allOf": [{"type": "string"}, {"maxLength": 3}]}, {"type": "string"}),
        (
            obj({"a": {"type": "string"}}, additionalProperties=False),
            obj({}, additionalProperties=False, patternProperties={"^a$": {}}),
        ),
        (obj({"a": {"type": "string"}}), obj({})),  # removed from an open reader
        (obj({"a": {"type": "string"}}, additionalProperties=False), obj({"a": {"type": "string"}})),
        (obj({}, additionalProperties=False), obj({"b": {"type": "string"}}, additionalProperties=False)),
        (
            obj({}, additionalProperties=False),
            obj({"b": {"type": "string", "default": ""}}, ["b"], additionalProperties=False),
        ),
        (obj({"a": {"type": "string"}}, ["a"]), obj({"a": {"type": "string"}})),
        (obj({"a": {"type": "string"}}), obj({"a": {"type": "string", "default": "x"}}, ["a"])),
        (obj({}), obj({"b": {}})),  # an empty schema added to an open model
        ({"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "number"}}),
        (
            {"type": "array", "items": [{"type": "integer"}], "additionalItems": False},
            {"type": "array", "items": [{"type": "number"}, {"type": "string"}]},
        ),
        ({"type": "array", "maxItems": 3, "uniqueItems": True}, {"type": "array", "maxItems": 4}),
    ],
)
def test_reader_accepts_all_the_writer_wrote(writer: Any, reader: Any) -> None:
    assert errors(reader, writer) == []


@pytest.mark.parametrize(
    ("writer", "reader", "message"),
    [
        ({"type": "number"}, {"type": "integer"}, "the writer's type number is not among the reader's"),
        ({"type": "string"}, {"type": "integer"}, "the writer's type string"),
        ({}, {"type": "string"}, "the writer allows any type"),
        ({"type": "string"}, False, "accepts no value"),
        ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, "maxLength 5 is stricter"),
        ({"type": "string"}, {"type": "string", "minLength": 1}, "adds minLength 1"),
        ({"type": "string"}, {"type": "string", "pattern": "^a"}, "adds pattern"),
        ({"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, "changes pattern"),
        ({"type": "integer", "maximum": 10}, {"type": "integer", "maximum": 5}, "maximum 5 is stricter"),
        ({"type": "integer"}, {"type": "integer", "exclusiveMinimum": 0}, "adds exclusiveMinimum"),
        ({"type": "number", "multipleOf": 3}, {"type": "number", "multipleOf": 2}, "does not divide"),
        ({"enum": ["a", "b"]}, {"enum": ["a"]}, r"does not allow the writer's values \[\"b\"\]"),
        ({"type": "string"}, {"enum": ["a"]}, "allows only"),
        (
            {"type": "string"},
            {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
            "no branch of the reader's anyOf",
        ),
        (
            {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            "anyOf became oneOf",
        ),
        (
            {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            {"anyOf": [{"type": "integer"}]},
            "branch 1 has no compatible branch",
        ),
        (
            obj({}),
            obj({"b": {"type": "string"}}),
            "/properties/b: the reader adds the property to an open content",
        ),
        (
            obj({"a": {"type": "string"}}, additionalProperties=False),
            obj({}, additionalProperties=False),
            "removed the property from a closed content model",
        ),
        (
            obj({}, additionalProperties=False),
            obj({"b": {"type": "string"}}, ["b"], additionalProperties=False),
            "requires a new property that has no default",
        ),
        (
            obj({"a": {"type": "string"}}),
            obj({"a": {"type": "string"}}, ["a"]),
            "/required/a: the reader requires",
        ),
        (
            obj({"a": {"type": "integer"}}, additionalProperties=False),
            obj({}, additionalProperties={"type": "string"}),
            "not read by its additional or pattern properties",
        ),
        (obj({}), obj({}, additionalProperties=False), "forbids additional properties"),
        (obj({}), obj({}, additionalProperties={"type": "string"}), "constrains additional properties"),
        (
            obj({"a": {"type": "integer"}}),
            obj({"a": {"type": "string"}}),
            "/properties/a: the writer's type integer",
        ),
        (
            {"type": "array", "items": {"type": "number"}},
            {"type": "array", "items": {"type": "integer"}},
            "/items: the writer's type number",
        ),
        ({"type": "array"}, {"type": "array", "uniqueItems": True}, "adds uniqueItems"),
        (
            {"type": "array", "items": [{"type": "integer"}]},
            {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]},
            "/items/1: the writer allows any type",
        ),
        (obj({}), obj({}, dependencies={"a": ["b"]}), "adds or extends a property dependency"),
        ({"type": "string"}, {"type": "string", "not": {"const": "x"}}, "adds 'not'"),
    ],
)
def test_reader_refuses_what_the_writer_may_have_written(writer: Any, reader: Any, message: str) -> None:
    found = errors(reader, writer)
    assert any(re.search(message, e) for e in found), found


def test_recursive_references_are_compared_once_per_pair() -> None:
    def tree(leaf: str) -> dict[str, Any]:
        return {
            "definitions": {
                "node": obj(
                    {
                        "value": {"type": leaf},
                        "children": {"type": "array", "items": {"$ref": "#/definitions/node"}},
                    }
                )
            },
            "$ref": "#/definitions/node",
        }

    assert errors(tree("number"), tree("integer")) == []
    assert errors(tree("integer"), tree("number")) == [
        "/properties/value: the writer's type number is not among the reader's ['integer']"
    ]


def test_a_combinator_beside_other_keywords_is_compared_part_by_part() -> None:
    def variant(a_type: str, second_required: str) -> dict[str, Any]:
        return {
            **obj({"a": {"type": a_type}, "b": {"type": "string"}}),
            "oneOf": [{"required": ["a"]}, {"required": [second_required]}],
        }

    same = errors(variant("integer", "b"), variant("integer", "b"))
    assert same == []
    assert errors(variant("number", "b"), variant("integer", "b")) == []
    assert errors(variant("string", "b"), variant("integer", "b")) == [
        "/properties/a: the writer's type integer is not among the reader's ['string']"
    ]
    assert errors(variant("integer", "c"), variant("integer", "b")) == [
        "/oneOf/1/required/c: the reader requires a property the writer did not, and it has no default"
    ]


def test_deeply_nested_combinators_stop_at_the_comparison_budget() -> None:
    def nest(depth: int) -> dict[str, Any]:
        if depth == 0:
            return {"type": "integer"}
        inner = nest(depth - 1)
        return {"anyOf": [inner, obj({"x": inner}), {"type": "array", "items": inner}]}

    small = parse(nest(3))
    assert small.reading_errors(small) == []
    big = parse(nest(7))
    assert big.reading_errors(big) == [
        f"the schemas are too complex to compare (more than {MAX_COMPARISONS} pairs of subschemas, "
        "mostly from nested combinators)"
    ]


def test_referenced_schemas_are_compared_through_their_refs() -> None:
    v1 = parse({"type": "string", "maxLength": 5})
    v2 = parse({"type": "string", "maxLength": 3})
    ref = (SchemaReference("name.json", "name", 1),)
    old = parse(obj({"n": {"$ref": "name.json"}}), {"name.json": v1}, ref)
    new = parse(obj({"n": {"$ref": "name.json"}}), {"name.json": v2}, ref)
    assert new.reading_errors(old) == [
        "/properties/n: the reader's maxLength 3 is stricter than the writer's 5"
    ]
    assert old.reading_errors(new) == []


# Evolution steps of an object schema with Confluent's (strict) verdicts: (backward ok, forward ok).

_PROPERTY = st.sampled_from(
    [
        {"type": "string"},
        {"type": "string", "maxLength": 8},
        {"type": "integer"},
        {"type": "boolean"},
        {"type": "integer", "maximum": 100},
        {"enum": ["a", "b"]},
    ]
)


@st.composite
def evolutions(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], bool, bool, str]:
    names = [f"p{i}" for i in range(draw(st.integers(1, 5)))]
    properties = {n: draw(_PROPERTY) for n in names}
    required = sorted(draw(st.sets(st.sampled_from(names))))
    closed = draw(st.booleans())
    extra = {"additionalProperties": False} if closed else {}
    old = obj(properties, required, **extra)
    new = json.loads(json.dumps(old))
    target = draw(st.sampled_from(names))
    prop = new["properties"][target]
    steps = ["add_optional", "remove", "require", "unrequire", "change_type", "title"]
    if prop.get("type") == "integer":
        steps.append("widen_to_number")
    if "maxLength" in prop or "maximum" in prop:
        steps.append("raise_limit")
    if "enum" in prop:
        steps.append("extend_enum")
    step = draw(st.sampled_from(steps))
    if step == "add_optional":
        new["properties"]["added"] = {"type": "string"}
        # open writer: the old data may hold "added" with any value (strict: incompatible);
        # a closed old reader cannot read new data holding "added"
        verdict = (closed, not closed)
    elif step == "remove":
        del new["properties"][target]
        new.pop("required", None)
        new["required"] = [r for r in required if r != target] or []
        if not new["required"]:
            del new["required"]
        # an old reader requiring the property cannot read new data without it
        verdict = (not closed, closed and target not in required)
    elif step == "require":
        new["required"] = sorted(set(required) | {target})
        verdict = (target in required, True)
    elif step == "unrequire":
        new["required"] = [r for r in required if r != target]
        if not new["required"]:
            del new["required"]
        verdict = (True, target not in required)
    elif step == "change_type":
        new["properties"][target] = {"type": "array"}
        verdict = (False, False)
    elif step == "widen_to_number":
        prop["type"] = "number"
        verdict = (True, False)
    elif step == "raise_limit":
        if "maxLength" in prop:
            prop["maxLength"] += 1
        else:
            prop["maximum"] += 1
        verdict = (True, False)
    elif step == "extend_enum":
        prop["enum"] = [*prop["enum"], "c"]
        verdict = (True, False)
    else:
        new["title"] = "A title changes nothing"
        verdict = (True, True)
    return old, new, verdict[0], verdict[1], f"{step} ({'closed' if closed else 'open'})"


@settings(max_examples=150)
@given(evolutions())
def test_evolution_steps_get_confluents_verdict_at_every_level(
    evolution: tuple[dict[str, Any], dict[str, Any], bool, bool, str],
) -> None:
    old_doc, new_doc, backward, forward, step = evolution
    event(step)
    old, new = parse(old_doc), parse(new_doc)
    for level in Compatibility:
        expected = level is Compatibility.NONE or (
            (backward or not level.backward) and (forward or not level.forward)
        )
        found = compatibility_errors(new, [old], level)
        assert (found == []) is expected, (level, found)


# --- codec ----------------------------------------------------------------------------------------

PERSON = obj(
    {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "extra": {
            "type": "object",
            "patternProperties": {"^x-": {"type": "integer"}},
            "additionalProperties": False,
        },
    },
    ["name"],
)


def test_values_are_written_as_compact_utf8_json() -> None:
    codec = parse(PERSON).codec()
    payload = codec.encode({"name": "Zoë", "age": 3, "tags": ["a", "b"], "extra": {"x-a": 1}})
    assert payload == '{"name":"Zoë","age":3,"tags":["a","b"],"extra":{"x-a":1}}'.encode()
    assert codec.decode(payload) == {"name": "Zoë", "age": 3, "tags": ["a", "b"], "extra": {"x-a": 1}}


def test_integers_beyond_64_bits_are_written_too() -> None:
    codec = parse({"type": "integer"}).codec()
    assert codec.encode(2**70) == str(2**70).encode()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({}, r"^\$: 'name' is a required property"),
        ({"name": ""}, r"^\$\.name: '' should be non-empty"),
        ({"name": "a", "age": -1}, r"^\$\.age: -1 is less than the minimum of 0"),
        ({"name": "a", "age": 1.5}, r"^\$\.age: 1\.5 is not of type 'integer'"),
        ({"name": "a", "email": "not an address"}, r"^\$\.email: 'not an address' is not a 'email'"),
        ({"name": "a", "tags": ["x", 1]}, r"^\$\.tags\[1\]: 1 is not of type 'string'"),
        ({"name": "a", "code": "abc"}, r"^\$\.code: \"abc\" does not match"),
        ({"name": "a", "extra": {"x-a": "1"}}, r"^\$\.extra\['x-a'\]: '1' is not of type 'integer'"),
        (
            {"name": "a", "extra": {"y": 1}},
            r"^\$\.extra: additional properties are not allowed \('y' unexpected\)",
        ),
        ([], r"^\$: \[\] is not of type 'object'"),
    ],
)
def test_values_that_do_not_validate_say_where_and_why(value: Any, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        parse(PERSON).codec().encode(value)


def test_patterns_run_in_linear_time() -> None:
    # (a+)+$ backtracks exponentially in Python's re on "aaaa…!"; RE2 answers at once
    codec = parse({"type": "string", "pattern": "^(a+)+$"}).codec()
    with pytest.raises(ConversionError, match="does not match"):
        codec.encode("a" * 5000 + "!")


def test_deeply_nested_values_are_a_conversion_error() -> None:
    value: Any = []
    for _ in range(5000):
        value = [value]
    with pytest.raises(ConversionError, match="nested too deeply"):
        parse({"type": "array", "items": {"$ref": "#"}}).codec().encode(value)


def test_payloads_that_are_not_json_are_a_conversion_error() -> None:
    with pytest.raises(ConversionError, match="not JSON"):
        parse({}).codec().decode(b"{nope")


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=100)
@given(_json)
def test_any_json_value_round_trips_through_an_open_schema(value: Any) -> None:
    codec = parse({}).codec()
    assert codec.decode(codec.encode(value)) == value
