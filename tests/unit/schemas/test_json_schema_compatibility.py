"""JSON Schema compatibility, rule by rule as Confluent's checker names them (its ``Difference.Type``).

Each case is a writer's schema (Confluent's "original") and a reader's ("update"): the rule the
change from one to the other is, and the rule of the change back; whether each keeps the schemas
compatible is Confluent's strict policy, and an incompatible one is named in the error. Every rule
Confluent's checker can report has a case (``test_every_rule_has_a_case``).
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import pytest

from service.core.schemas.json_schema import JsonSchemaFormat
from service.core.schemas.json_schema.compatibility import _Comparison
from service.core.schemas.json_schema.differences import COMPATIBLE
from service.core.schemas.model import Compatibility, SchemaType, compatibility_errors
from tests.unit.schemas.helpers import Parser

parse = Parser(JsonSchemaFormat(), SchemaType.JSON)

MODERN = "https://json-schema.org/draft/2020-12/schema"


class Case(NamedTuple):
    writer: Any
    reader: Any
    rule: str  # writer -> reader: the rules found, "+" between them
    back: str  # reader -> writer


def obj(properties: dict[str, Any] | None = None, *required: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties or {}, **extra}
    if required:
        out["required"] = list(required)
    return out


def arr(**extra: Any) -> dict[str, Any]:
    return {"type": "array", **extra}


def modern(schema: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": MODERN, **schema}


S = {"type": "string"}
N = {"type": "number"}
CLOSED: dict[str, Any] = {"additionalProperties": False}

CASES = [
    Case({"title": "a"}, {"title": "b"}, "TITLE_CHANGED", "TITLE_CHANGED"),
    Case({"description": "a"}, {"description": "b"}, "DESCRIPTION_CHANGED", "DESCRIPTION_CHANGED"),
    Case({"$id": "urn:a", **S}, {"$id": "urn:b", **S}, "ID_CHANGED", "ID_CHANGED"),
    Case({"default": "a", **S}, {"default": "b", **S}, "DEFAULT_CHANGED", "DEFAULT_CHANGED"),
    Case(arr(), arr(items=S), "SCHEMA_ADDED", "SCHEMA_REMOVED"),
    Case({"type": "integer"}, N, "TYPE_EXTENDED", "TYPE_NARROWED"),
    Case(S, N, "TYPE_CHANGED", "TYPE_CHANGED"),
    Case({}, S, "TYPE_CHANGED", ""),  # a reader that is empty reads anything
    Case(S, {"type": "string", "maxLength": 5}, "MAX_LENGTH_ADDED", "MAX_LENGTH_REMOVED"),
    Case({**S, "maxLength": 5}, {**S, "maxLength": 6}, "MAX_LENGTH_INCREASED", "MAX_LENGTH_DECREASED"),
    Case(S, {**S, "minLength": 1}, "MIN_LENGTH_ADDED", "MIN_LENGTH_REMOVED"),
    Case({**S, "minLength": 2}, {**S, "minLength": 1}, "MIN_LENGTH_DECREASED", "MIN_LENGTH_INCREASED"),
    Case(S, {**S, "pattern": "^a"}, "PATTERN_ADDED", "PATTERN_REMOVED"),
    Case({**S, "pattern": "^a"}, {**S, "pattern": "^b"}, "PATTERN_CHANGED", "PATTERN_CHANGED"),
    Case(N, {**N, "maximum": 5}, "MAXIMUM_ADDED", "MAXIMUM_REMOVED"),
    Case({**N, "maximum": 5}, {**N, "maximum": 6}, "MAXIMUM_INCREASED", "MAXIMUM_DECREASED"),
    Case(N, {**N, "minimum": 5}, "MINIMUM_ADDED", "MINIMUM_REMOVED"),
    Case({**N, "minimum": 5}, {**N, "minimum": 4}, "MINIMUM_DECREASED", "MINIMUM_INCREASED"),
    Case(N, {**N, "exclusiveMaximum": 5}, "EXCLUSIVE_MAXIMUM_ADDED", "EXCLUSIVE_MAXIMUM_REMOVED"),
    Case(
        {**N, "exclusiveMaximum": 5},
        {**N, "exclusiveMaximum": 6},
        "EXCLUSIVE_MAXIMUM_INCREASED",
        "EXCLUSIVE_MAXIMUM_DECREASED",
    ),
    Case(N, {**N, "exclusiveMinimum": 5}, "EXCLUSIVE_MINIMUM_ADDED", "EXCLUSIVE_MINIMUM_REMOVED"),
    Case(
        {**N, "exclusiveMinimum": 5},
        {**N, "exclusiveMinimum": 4},
        "EXCLUSIVE_MINIMUM_DECREASED",
        "EXCLUSIVE_MINIMUM_INCREASED",
    ),
    Case(N, {**N, "multipleOf": 2}, "MULTIPLE_OF_ADDED", "MULTIPLE_OF_REMOVED"),
    Case({**N, "multipleOf": 2}, {**N, "multipleOf": 4}, "MULTIPLE_OF_EXPANDED", "MULTIPLE_OF_REDUCED"),
    Case({**N, "multipleOf": 2}, {**N, "multipleOf": 3}, "MULTIPLE_OF_CHANGED", "MULTIPLE_OF_CHANGED"),
    # objects
    Case(obj({"a": S}), obj({"a": S}, "a"), "REQUIRED_ATTRIBUTE_ADDED", "REQUIRED_ATTRIBUTE_REMOVED"),
    Case(
        obj({"a": S}),
        obj({"a": {**S, "default": ""}}, "a"),
        "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED+DEFAULT_CHANGED",
        "REQUIRED_ATTRIBUTE_REMOVED+DEFAULT_CHANGED",
    ),
    Case(obj(), obj(maxProperties=3), "MAX_PROPERTIES_ADDED", "MAX_PROPERTIES_REMOVED"),
    Case(obj(maxProperties=3), obj(maxProperties=4), "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_DECREASED"),
    Case(obj(), obj(minProperties=3), "MIN_PROPERTIES_ADDED", "MIN_PROPERTIES_REMOVED"),
    Case(obj(minProperties=3), obj(minProperties=2), "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_INCREASED"),
    Case(obj(**CLOSED), obj(), "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_REMOVED"),
    Case(
        obj(additionalProperties=S),
        obj(),
        "ADDITIONAL_PROPERTIES_EXTENDED",
        "ADDITIONAL_PROPERTIES_NARROWED",
    ),
    Case(
        obj(dependencies={"a": ["b"]}),
        obj(),
        "DEPENDENCY_ARRAY_REMOVED",
        "DEPENDENCY_ARRAY_ADDED",
    ),
    Case(
        obj(dependencies={"a": ["b"]}),
        obj(dependencies={"a": ["b", "c"]}),
        "DEPENDENCY_ARRAY_EXTENDED",
        "DEPENDENCY_ARRAY_NARROWED",
    ),
    Case(
        obj(dependencies={"a": ["b"]}),
        obj(dependencies={"a": ["c"]}),
        "DEPENDENCY_ARRAY_CHANGED",
        "DEPENDENCY_ARRAY_CHANGED",
    ),
    Case(
        obj(dependencies={"a": obj()}),
        obj(),
        "DEPENDENCY_SCHEMA_REMOVED",
        "DEPENDENCY_SCHEMA_ADDED",
    ),
    Case(
        obj(),
        obj({"b": S}, "b"),
        "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    ),
    Case(
        obj(),
        obj({"b": {**S, "default": ""}}, "b"),
        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    ),
    Case(
        obj(),
        obj({"b": S}),
        "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    ),
    Case(
        obj(),
        obj({"b": {}}),
        "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    ),
    Case(
        obj(**CLOSED),
        obj({"b": S}, "b", **CLOSED),
        "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    ),
    Case(
        obj(**CLOSED),
        obj({"b": {**S, "default": ""}}, "b", **CLOSED),
        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    ),
    Case(
        obj(**CLOSED),
        obj({"b": S}, **CLOSED),
        "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    ),
    Case(
        obj({"b": False}, **CLOSED),
        obj(**CLOSED),
        "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    ),
    Case(
        obj({"b": S}, additionalProperties=S),
        obj(additionalProperties=S),
        "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL+OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    ),
    Case(
        obj({"b": N}, patternProperties={"^b": S}),
        obj(patternProperties={"^b": S}),
        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL+TYPE_CHANGED",
        "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL+TYPE_CHANGED"
        "+OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    ),
    Case(
        modern(obj(unevaluatedProperties=False)),
        modern(obj()),
        "UNEVALUATED_PROPERTIES_ADDED",
        "UNEVALUATED_PROPERTIES_REMOVED",
    ),
    Case(
        modern(obj(unevaluatedProperties=S)),
        modern(obj()),
        "UNEVALUATED_PROPERTIES_EXTENDED",
        "UNEVALUATED_PROPERTIES_NARROWED",
    ),
    # arrays
    Case(arr(), arr(maxItems=3), "MAX_ITEMS_ADDED", "MAX_ITEMS_REMOVED"),
    Case(arr(maxItems=3), arr(maxItems=4), "MAX_ITEMS_INCREASED", "MAX_ITEMS_DECREASED"),
    Case(arr(), arr(minItems=3), "MIN_ITEMS_ADDED", "MIN_ITEMS_REMOVED"),
    Case(arr(minItems=3), arr(minItems=2), "MIN_ITEMS_DECREASED", "MIN_ITEMS_INCREASED"),
    Case(arr(contains=S), arr(contains=S, maxContains=3), "MAX_CONTAINS_ADDED", "MAX_CONTAINS_REMOVED"),
    Case(
        arr(contains=S, maxContains=3),
        arr(contains=S, maxContains=4),
        "MAX_CONTAINS_INCREASED",
        "MAX_CONTAINS_DECREASED",
    ),
    Case(arr(contains=S), arr(contains=S, minContains=3), "MIN_CONTAINS_ADDED", "MIN_CONTAINS_REMOVED"),
    Case(
        arr(contains=S, minContains=3),
        arr(contains=S, minContains=2),
        "MIN_CONTAINS_DECREASED",
        "MIN_CONTAINS_INCREASED",
    ),
    Case(arr(), arr(uniqueItems=True), "UNIQUE_ITEMS_ADDED", "UNIQUE_ITEMS_REMOVED"),
    Case(
        arr(items=[S], additionalItems=False),
        arr(items=[S]),
        "ADDITIONAL_ITEMS_ADDED",
        "ADDITIONAL_ITEMS_REMOVED",
    ),
    Case(
        arr(items=[S], additionalItems=S),
        arr(items=[S]),
        "ADDITIONAL_ITEMS_EXTENDED",
        "ADDITIONAL_ITEMS_NARROWED",
    ),
    Case(
        modern(arr(unevaluatedItems=False)),
        modern(arr()),
        "UNEVALUATED_ITEMS_ADDED",
        "UNEVALUATED_ITEMS_REMOVED",
    ),
    Case(
        modern(arr(unevaluatedItems=S)),
        modern(arr()),
        "UNEVALUATED_ITEMS_EXTENDED",
        "UNEVALUATED_ITEMS_NARROWED",
    ),
    # the issue's case: one schema for all items becomes a schema for the first item
    Case(
        arr(items=S),
        arr(items=[S]),
        "ITEM_ADDED_TO_OPEN_CONTENT_MODEL+SCHEMA_REMOVED",
        "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL+SCHEMA_ADDED",
    ),
    Case(
        arr(items=[S]),
        arr(items=[S, {}]),
        "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
    ),
    Case(
        arr(items=[S], additionalItems=False),
        arr(items=[S, N], additionalItems=False),
        "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
        "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    ),
    Case(
        arr(items=[S, False], additionalItems=False),
        arr(items=[S], additionalItems=False),
        "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    ),
    Case(
        arr(items=[S, S], additionalItems=S),
        arr(items=[S], additionalItems=S),
        "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    ),
    Case(
        arr(items=[S, N], additionalItems=S),
        arr(items=[S], additionalItems=S),
        "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL+TYPE_CHANGED",
        "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL+TYPE_CHANGED",
    ),
    # enum, const, combined, not
    Case({"enum": ["a"]}, {"enum": ["a", "b"]}, "ENUM_ARRAY_EXTENDED", "ENUM_ARRAY_NARROWED"),
    Case({"enum": ["a"]}, {"enum": ["b"]}, "ENUM_ARRAY_CHANGED", "ENUM_ARRAY_CHANGED"),
    Case({"const": "a"}, {"const": "b"}, "ENUM_ARRAY_CHANGED", "ENUM_ARRAY_CHANGED"),
    Case({"oneOf": [S, N]}, {"anyOf": [S, N]}, "COMBINED_TYPE_EXTENDED", "COMBINED_TYPE_CHANGED"),
    Case({"allOf": [S, {"maxLength": 3}]}, {"allOf": [S]}, "PRODUCT_TYPE_NARROWED", "PRODUCT_TYPE_EXTENDED"),
    Case({"anyOf": [S]}, {"anyOf": [S, N]}, "SUM_TYPE_EXTENDED", "SUM_TYPE_NARROWED"),
    Case(S, {"type": ["string", "null"]}, "SUM_TYPE_EXTENDED", "TYPE_CHANGED"),
    Case(
        {"anyOf": [S, N]},
        {"anyOf": [S, {"type": "boolean"}]},
        "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
        "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
    ),
    Case({"not": S}, {"not": {**S, "maxLength": 3}}, "NOT_TYPE_NARROWED", "NOT_TYPE_EXTENDED"),
]

# What Confluent's checker names but never reports for a schema alone: a deprecated rule and the
# rules of metadata (reserved properties), which schemas here do not carry.
NEVER = {
    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
    "RESERVED_PROPERTY_REMOVED",
    "RESERVED_PROPERTY_CONFLICTS_WITH_PROPERTY",
}

ALL_RULES = """
ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_ADDED SCHEMA_REMOVED TYPE_EXTENDED
TYPE_NARROWED TYPE_CHANGED MAX_LENGTH_ADDED MAX_LENGTH_REMOVED MAX_LENGTH_INCREASED MAX_LENGTH_DECREASED
MIN_LENGTH_ADDED MIN_LENGTH_REMOVED MIN_LENGTH_INCREASED MIN_LENGTH_DECREASED PATTERN_ADDED PATTERN_REMOVED
PATTERN_CHANGED MAXIMUM_ADDED MAXIMUM_REMOVED MAXIMUM_INCREASED MAXIMUM_DECREASED MINIMUM_ADDED
MINIMUM_REMOVED MINIMUM_INCREASED MINIMUM_DECREASED EXCLUSIVE_MAXIMUM_ADDED EXCLUSIVE_MAXIMUM_REMOVED
EXCLUSIVE_MAXIMUM_INCREASED EXCLUSIVE_MAXIMUM_DECREASED EXCLUSIVE_MINIMUM_ADDED EXCLUSIVE_MINIMUM_REMOVED
EXCLUSIVE_MINIMUM_INCREASED EXCLUSIVE_MINIMUM_DECREASED MULTIPLE_OF_ADDED MULTIPLE_OF_REMOVED
MULTIPLE_OF_EXPANDED MULTIPLE_OF_REDUCED MULTIPLE_OF_CHANGED REQUIRED_ATTRIBUTE_ADDED
REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED MAX_PROPERTIES_ADDED MAX_PROPERTIES_REMOVED
MAX_PROPERTIES_INCREASED MAX_PROPERTIES_DECREASED MIN_PROPERTIES_ADDED MIN_PROPERTIES_REMOVED
MIN_PROPERTIES_INCREASED MIN_PROPERTIES_DECREASED ADDITIONAL_PROPERTIES_ADDED ADDITIONAL_PROPERTIES_REMOVED
ADDITIONAL_PROPERTIES_EXTENDED ADDITIONAL_PROPERTIES_NARROWED DEPENDENCY_ARRAY_ADDED DEPENDENCY_ARRAY_REMOVED
DEPENDENCY_ARRAY_EXTENDED DEPENDENCY_ARRAY_NARROWED DEPENDENCY_ARRAY_CHANGED DEPENDENCY_SCHEMA_ADDED
DEPENDENCY_SCHEMA_REMOVED PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL
PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL
PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL RESERVED_PROPERTY_REMOVED
RESERVED_PROPERTY_CONFLICTS_WITH_PROPERTY UNEVALUATED_PROPERTIES_ADDED UNEVALUATED_PROPERTIES_REMOVED
UNEVALUATED_PROPERTIES_EXTENDED UNEVALUATED_PROPERTIES_NARROWED MAX_ITEMS_ADDED MAX_ITEMS_REMOVED
MAX_ITEMS_INCREASED MAX_ITEMS_DECREASED MIN_ITEMS_ADDED MIN_ITEMS_REMOVED MIN_ITEMS_INCREASED
MIN_ITEMS_DECREASED MAX_CONTAINS_ADDED MAX_CONTAINS_REMOVED MAX_CONTAINS_INCREASED MAX_CONTAINS_DECREASED
MIN_CONTAINS_ADDED MIN_CONTAINS_REMOVED MIN_CONTAINS_INCREASED MIN_CONTAINS_DECREASED UNIQUE_ITEMS_ADDED
UNIQUE_ITEMS_REMOVED ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_REMOVED ADDITIONAL_ITEMS_EXTENDED
ADDITIONAL_ITEMS_NARROWED UNEVALUATED_ITEMS_ADDED UNEVALUATED_ITEMS_REMOVED UNEVALUATED_ITEMS_EXTENDED
UNEVALUATED_ITEMS_NARROWED ITEM_ADDED_TO_OPEN_CONTENT_MODEL ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
ITEM_ADDED_TO_CLOSED_CONTENT_MODEL ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL
ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL
ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
ENUM_ARRAY_EXTENDED ENUM_ARRAY_NARROWED ENUM_ARRAY_CHANGED COMBINED_TYPE_EXTENDED COMBINED_TYPE_CHANGED
PRODUCT_TYPE_EXTENDED PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED SUM_TYPE_NARROWED
COMBINED_TYPE_SUBSCHEMAS_CHANGED NOT_TYPE_EXTENDED NOT_TYPE_NARROWED
""".split()


def rules(writer: Any, reader: Any) -> set[str]:
    """Every rule the change from ``writer`` to ``reader`` is, compatible or not."""
    w, r = parse(writer), parse(reader)
    return {d.rule for d in _Comparison(w, r).run(w.document, w.resolver(), r.document, r.resolver())}


def refused(writer: Any, reader: Any) -> list[str]:
    """The rules named in the errors of a reader of ``writer``'s data (none: compatible)."""
    found = []
    for error in parse.reading_errors(reader, writer):
        match = re.match(r'\{errorType:"([A-Z_]+)", description:"(.*)\'\}$', error)
        assert match is not None, error
        found.append(match.group(1))
    return sorted(found)


@pytest.mark.parametrize("case", CASES, ids=[c.rule.split("+")[0] for c in CASES])
def test_each_change_is_confluents_rule_with_its_verdict(case: Case) -> None:
    for writer, reader, rule in (
        (case.writer, case.reader, case.rule),
        (case.reader, case.writer, case.back),
    ):
        found = rules(writer, reader)
        assert found == (set(rule.split("+")) if rule else set()), (writer, reader)
        assert refused(writer, reader) == sorted(found - COMPATIBLE), (writer, reader)


def test_every_rule_has_a_case() -> None:
    covered = {r for c in CASES for r in f"{c.rule}+{c.back}".split("+")}
    assert set(ALL_RULES) - NEVER - covered == set()
    assert COMPATIBLE <= set(ALL_RULES)


def test_the_strict_policy_accepts_what_confluent_lists() -> None:
    assert "ITEM_ADDED_TO_OPEN_CONTENT_MODEL" not in COMPATIBLE
    assert "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" not in COMPATIBLE
    assert len(COMPATIBLE) == 65


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        (obj(), obj(propertyNames={"pattern": "^a"})),  # the issue's case
        (obj(propertyNames={"maxLength": 3}), obj()),
        (arr(), arr(contains=S)),
        ({**S, "format": "email"}, S),
        (S, {**S, "format": "email"}),
        ({"if": S, "then": S}, {}),
    ],
)
def test_what_confluent_does_not_compare_is_no_difference(writer: Any, reader: Any) -> None:
    assert refused(writer, reader) == []
    assert refused(reader, writer) == [] or reader == {}


def test_a_message_names_the_rule_and_where_in_confluents_words() -> None:
    """%s where Confluent writes the roles: "new" and "old" when the new schema reads old data."""
    [error] = parse.reading_errors(arr(items=[S]), arr(items=S))
    assert error == (
        '{errorType:"ITEM_ADDED_TO_OPEN_CONTENT_MODEL", description:"The %s schema has an open content '
        "model and has a property or item at path '#/items/0' which is missing in the %s schema'}"
    )
    new, old = parse(obj({"a": {**S, "maxLength": 3}})), parse(obj({"a": {**S, "maxLength": 5}}))
    assert compatibility_errors(new, [old], Compatibility.BACKWARD) == [
        '{errorType:"MAX_LENGTH_DECREASED", description:"The value at path \'#/properties/a/maxLength\' in '
        "the new schema is less than its value in the old schema'}"
    ]


def test_a_cycle_assumed_compatible_does_not_hide_a_difference_behind_it() -> None:
    # T0 -> T2 -> T0 through singleton oneOfs; the root's oneOf matches T0 and T1 both ways
    def node(id_type: str, target: str) -> dict[str, Any]:
        return obj({"id": {"type": id_type}, "ref": {"oneOf": [{"$ref": f"#/definitions/{target}"}]}})

    def schema(t0: str, t1: str) -> dict[str, Any]:
        return obj(
            {"root": {"oneOf": [{"$ref": "#/definitions/T0"}, {"$ref": "#/definitions/T1"}]}},
            definitions={"T0": node(t0, "T2"), "T1": node(t1, "T2"), "T2": node("integer", "T0")},
        )

    assert refused(schema("integer", "boolean"), schema("boolean", "number")) != []
    assert refused(schema("integer", "boolean"), schema("integer", "boolean")) == []
