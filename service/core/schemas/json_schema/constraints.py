"""What a subschema is, as Confluent's checker sees it: the kind of schema its JSON Schema library
builds from it (``Shapes``), and what an object's or an array's content model allows.

Confluent compares the typed schemas its JSON Schema library (everit) loads, not keywords: a
schema is empty (``true``, ``{}``, annotations only), ``false``, one typed schema (string,
number — ``integer`` is a number that requires integers —, boolean, null, object, array), an
``enum``, a ``const``, a ``not`` or a combined schema (``allOf``/``anyOf``/``oneOf``). A schema
whose keywords make several of these (``"type": "string"`` beside ``"enum"``, an ``anyOf`` beside
``properties``) is the ``allOf`` of them; several types (``"type": ["string", "null"]``) are the
``anyOf`` of one typed schema each; without ``type``, each family of keywords present makes its
typed schema (``properties`` an object, ``maxLength`` a string). ``Shapes`` builds the parts it
needs once per node, so that a comparison can recognise a pair of nodes it has seen.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any, Final, NamedTuple

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
        "minContains",
        "maxContains",
        "unevaluatedItems",
    }
)
_STRING_KEYWORDS: Final = frozenset({"minLength", "maxLength", "pattern", "format"})
_NUMBER_KEYWORDS: Final = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
_FAMILIES: Final = (
    ("object", _OBJECT_KEYWORDS),
    ("array", _ARRAY_KEYWORDS),
    ("string", _STRING_KEYWORDS),
    ("number", _NUMBER_KEYWORDS),
)
_COMBINATORS: Final = ("allOf", "anyOf", "oneOf")
_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "null", "object", "array"})
_MODERN: Final = (referencing.jsonschema.DRAFT201909, referencing.jsonschema.DRAFT202012)


class Shape(NamedTuple):
    """What a node is: ``kind`` (``empty``, ``false``, a type name, ``enum``, ``const``, ``not``,
    ``combined``), the node holding its keywords, and for ``combined`` its criterion and parts."""

    kind: str
    node: Any
    criterion: str = ""
    parts: tuple[Any, ...] = ()


class Shapes:
    """The shapes of one comparison's nodes; the parts it makes stay alive (they are compared by
    identity) for as long as it does."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, Shape]] = {}

    def of(self, node: Any) -> Shape:
        if node is True:
            return Shape("empty", node)
        if node is False:
            return Shape("false", node)
        if not isinstance(node, dict):
            return Shape("empty", node)
        known = self._known.get(id(node))
        if known is None:
            known = self._known[id(node)] = (node, self._shape(node))
        return known[1]

    def _shape(self, node: dict[str, Any]) -> Shape:
        parts: list[Any] = []
        kinds: list[Shape] = []
        for criterion in _COMBINATORS:
            if isinstance(node.get(criterion), list):
                part = {criterion: node[criterion]}
                parts.append(part)
                kinds.append(Shape("combined", part, criterion, tuple(node[criterion])))
        for keyword in ("not", "const", "enum"):
            if keyword in node and (keyword != "enum" or isinstance(node[keyword], list)):
                part = {keyword: node[keyword]}
                parts.append(part)
                kinds.append(Shape(keyword, part))
        declared = node.get("type")
        if isinstance(declared, str):
            declared = [declared]
        if isinstance(declared, list):
            typed = [t for t in declared if t in _TYPES]
        else:
            typed = [t for t, keywords in _FAMILIES if node.keys() & keywords]
        if isinstance(declared, list) and len(typed) > 1:
            each = tuple(self._typed(node, t) for t in typed)
            part = {"anyOf": list(each)}
            parts.append(part)
            kinds.append(Shape("combined", part, "anyOf", each))
        else:
            for t in typed:
                part = self._typed(node, t)
                parts.append(part)
                kinds.append(Shape(_kind(t), part))
        if not kinds:
            return Shape("empty", node)
        if len(kinds) == 1:
            return kinds[0]._replace(node=node) if kinds[0].kind != "combined" else kinds[0]
        return Shape("combined", node, "allOf", tuple(parts))

    def _typed(self, node: dict[str, Any], t: str) -> dict[str, Any]:
        rest = {k: v for k, v in node.items() if k not in ("type", "not", "const", "enum", *_COMBINATORS)}
        part = {**rest, "type": t}
        self._known[id(part)] = (part, Shape(_kind(t), part))
        return part


def _kind(t: str) -> str:
    return "number" if t == "integer" else t


def is_empty(node: Any, shapes: Shapes) -> bool:
    """An everit ``EmptySchema`` (``true`` included); a ``$ref`` is not one, whatever it names."""
    if isinstance(node, dict) and "$ref" in node:
        return False
    return shapes.of(node).kind == "empty"


def requires_integer(node: dict[str, Any]) -> bool:
    declared = node.get("type")
    return declared == "integer" or (isinstance(declared, list) and declared == ["integer"])


def unevaluated(node: dict[str, Any], keyword: str, spec: referencing.Specification[Any]) -> Any:
    """``unevaluatedProperties``/``unevaluatedItems`` where the draft has them (2019-09 on), or None."""
    return node.get(keyword) if spec in _MODERN else None


def additional(node: dict[str, Any], keyword: str) -> tuple[bool, Any]:
    """Whether ``additionalProperties``/``additionalItems`` permits more, and its schema (None when
    it is absent or a boolean)."""
    value = node.get(keyword, True)
    if isinstance(value, dict):
        return True, value
    return value is not False, None


def items(node: dict[str, Any], spec: referencing.Specification[Any]) -> tuple[Any, list[Any], str]:
    """An array schema's schema for all items (None if it has none), its per-position item schemas,
    and the keyword that holds what comes after them."""
    if spec is referencing.jsonschema.DRAFT202012 or "prefixItems" in node:
        prefix = node.get("prefixItems")
        if isinstance(prefix, list):
            return None, prefix, "items"
        if isinstance(node.get("items"), bool):  # as Confluent translates it: items permitted or not
            return None, [], "items"
        return node.get("items"), [], "additionalItems"
    value = node.get("items")
    if isinstance(value, list):
        return None, value, "additionalItems"
    return value, [], "additionalItems"


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return bool(a == b)


def number(value: Any) -> Decimal | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None
