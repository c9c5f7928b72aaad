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


@pytest.mark.parametrize(
    ("url", "draft"),
    [
        ("https://json.schema.org/draft/2020-12/schema", "Draft7Validator"),  # not json-schema.org
        ("http://json-schema.org/draft-03/schema#", "Draft7Validator"),
        ("http://example.com/my-draft", "Draft7Validator"),
        ("http://json-schema.org/schema#", "Draft4Validator"),
        ("https://json-schema.org/draft-06/schema", "Draft6Validator"),
        ("https://json-schema.org/draft/2019-09/schema#", "Draft201909Validator"),
    ],
)
def test_a_schema_url_confluent_does_not_know_is_draft_07(url: str, draft: str) -> None:
    schema = parse({"$schema": url, "properties": {"a": {"type": "string"}}})
    assert schema._validator_class.__name__ == draft
    with pytest.raises(ConversionError, match=r"\$\.a: 1 is not of type 'string'"):
        schema.codec().encode({"a": 1})


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


def test_the_stored_text_is_compact_json_in_the_order_it_came() -> None:
    # Confluent's canonicalString; ?normalize=true stores the keys sorted
    schema = parse('{"type": "object",\n  "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}')
    compact = '{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}'
    assert schema.formatted() == compact
    assert schema.normalized() == schema.canonical()
    assert parse('{"title": "Zoë", "maximum": 1e400}').formatted() == '{"title": "Zoë", "maximum": 1e400}'
    assert parse('{"title": "Zoë"}').formatted() == '{"title":"Zoë"}'


# --- compatibility --------------------------------------------------------------------------------


errors = parse.reading_errors


def rule(error: str) -> str:
    """The Confluent rule an error names."""
    found = re.match(r'\{errorType:"([A-Z_]+)"', error)
    assert found is not None, error
    return found.group(1)


def path(error: str) -> str:
    found = re.search(r"at path '([^']*)'", error)
    assert found is not None, error
    return found.group(1)


# Confluent's rules one by one, both directions: test_json_schema_compatibility.py


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
    # the difference is found once and reported where the recursion meets it too, as Confluent does
    assert [rule(e) for e in errors(tree("integer"), tree("number"))] == ["TYPE_NARROWED", "TYPE_NARROWED"]
    assert [path(e) for e in errors(tree("integer"), tree("number"))] == [
        "#/properties/value",
        "#/properties/children/items/properties/value",
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
    # the typed part and the oneOf are the allOf's branches: a changed part leaves one unmatched
    assert [rule(e) for e in errors(variant("string", "b"), variant("integer", "b"))] == [
        "COMBINED_TYPE_SUBSCHEMAS_CHANGED"
    ]
    # Confluent compares "required" only for properties both sides declare: none here
    assert errors(variant("integer", "c"), variant("integer", "b")) == []


def test_wide_combinators_stop_at_the_comparison_budget() -> None:
    def union(width: int, offset: int) -> dict[str, Any]:
        return {"anyOf": [{"type": "string", "maxLength": offset + i} for i in range(width)]}

    assert parse(union(3, 1)).reading_errors(parse(union(3, 0))) == []
    # each branch against each: 300 x 300 pairs
    big_reader, big_writer = parse(union(300, 1)), parse(union(300, 0))
    assert big_reader.reading_errors(big_writer) == [
        f"the schemas are too complex to compare (more than {MAX_COMPARISONS} pairs of subschemas, "
        "mostly from nested combinators)"
    ]


def test_referenced_schemas_are_compared_through_their_refs() -> None:
    v1 = parse({"type": "string", "maxLength": 5})
    v2 = parse({"type": "string", "maxLength": 3})
    ref = (SchemaReference("name.json", "name", 1),)
    old = parse(obj({"n": {"$ref": "name.json"}}), {"name.json": v1}, ref)
    new = parse(obj({"n": {"$ref": "name.json"}}), {"name.json": v2}, ref)
    assert [path(e) for e in new.reading_errors(old)] == ["#/properties/n/maxLength"]
    assert [rule(e) for e in new.reading_errors(old)] == ["MAX_LENGTH_DECREASED"]
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
