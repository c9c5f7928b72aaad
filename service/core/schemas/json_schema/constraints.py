"""What a subschema constrains, as ``compatibility`` reads it: keyword families, types, values.

Like Confluent, a schema without ``type`` counts as the types its keywords constrain
(``properties`` → object, ``items`` → array, …); ``enum``/``const`` give the types of their
values. Also whether an object's content model is open, an array's items by position, and the
number helpers the limits need.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any, Final

import referencing
import referencing.jsonschema

_OBJECT_KEYWORDS: Final = frozenset(
    {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "propertyNames",
        "unevaluatedProperties",
    }
)
_ARRAY_KEYWORDS: Final = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "unevaluatedItems",
    }
)
_STRING_KEYWORDS: Final = frozenset({"minLength", "maxLength", "pattern"})
_NUMBER_KEYWORDS: Final = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
_CONSTRAINTS: Final = (
    _OBJECT_KEYWORDS
    | _ARRAY_KEYWORDS
    | _STRING_KEYWORDS
    | _NUMBER_KEYWORDS
    | {"type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "$ref", "if"}
)
_UPPER: Final = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")
_LOWER: Final = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")
_LIMIT_TYPES: Final = {
    "maxLength": "string",
    "minLength": "string",
    "maximum": "number",
    "minimum": "number",
    "exclusiveMaximum": "number",
    "exclusiveMinimum": "number",
    "maxItems": "array",
    "minItems": "array",
    "maxProperties": "object",
    "minProperties": "object",
}
_COMBINATORS: Final = ("allOf", "anyOf", "oneOf")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _types(node: dict[str, Any]) -> set[str] | None:
    """The JSON types ``node`` accepts, or None for any."""
    declared = node.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    values = _values(node)
    if values is not None:
        return {_json_type(v) for v in values}
    inferred = set()
    keys = node.keys()
    if keys & _OBJECT_KEYWORDS:
        inferred.add("object")
    if keys & _ARRAY_KEYWORDS:
        inferred.add("array")
    if keys & _STRING_KEYWORDS:
        inferred.add("string")
    if keys & _NUMBER_KEYWORDS:
        inferred.add("number")
    return inferred or None


def _values(node: dict[str, Any]) -> list[Any] | None:
    if "const" in node:
        return [node["const"]]
    enum = node.get("enum")
    return list(enum) if isinstance(enum, list) else None


def _covers(types: set[str] | None, t: str) -> bool:
    return types is None or t in types or (t == "integer" and "number" in types)


def _allows(types: set[str] | None, t: str) -> bool:
    if types is None:
        return True
    return bool(types & {"number", "integer"}) if t == "number" else t in types


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    return bool(a == b)


def _is_open(node: dict[str, Any]) -> bool:
    additional = node.get("additionalProperties", True)
    unevaluated = node.get("unevaluatedProperties", True)
    return additional is True and unevaluated is True and not node.get("patternProperties")


def _items(node: dict[str, Any], spec: referencing.Specification[Any]) -> tuple[list[Any], Any]:
    """An array schema's per-position item schemas and the schema of the items after them."""
    if "prefixItems" in node or spec is referencing.jsonschema.DRAFT202012:
        prefix = node.get("prefixItems")
        return (prefix if isinstance(prefix, list) else []), node.get("items", True)
    items = node.get("items", True)
    if isinstance(items, list):
        return items, node.get("additionalItems", True)
    return [], items


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _divides(divisor: float, value: float) -> bool:
    try:
        return Decimal(str(value)) % Decimal(str(divisor)) == 0
    except (InvalidOperation, ZeroDivisionError):
        return False
