"""The subschemas of a JSON Schema document, each with the resolver of the base URI it is under.

``schema.JsonSchemaFormat`` walks every subschema to check its ``$ref`` and its patterns;
``compatibility`` enters a subschema's ``$id`` as it follows a ``$ref``. ``Resolver`` is the
``referencing`` library's type that both hand around.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import referencing

if TYPE_CHECKING:
    from referencing._core import Resolver as _Resolver

    Resolver = _Resolver[Any]

# Keywords whose values are data, not subschemas: the walk over a document does not enter them.
_DATA_KEYWORDS: Final = frozenset({"enum", "const", "default", "examples"})
# Keywords whose values are maps of names to subschemas (the names are not keywords).
_SCHEMA_MAPS: Final = frozenset(
    {"properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies"}
)


def _walk(
    node: Any,
    resolver: Resolver,
    spec: referencing.Specification[Any],
    where: str,
    visit: Callable[[dict[str, Any], Resolver, str], None],
) -> None:
    """Calls ``visit`` on every subschema of ``node`` with the resolver of its base URI."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            _walk(item, resolver, spec, f"{where}/{i}", visit)
        return
    if not isinstance(node, dict):
        return
    resolver = _enter(node, resolver, spec)
    visit(node, resolver, where)
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                _walk(sub, resolver, spec, f"{where}/{key}/{name}", visit)
        elif isinstance(value, dict | list):
            _walk(value, resolver, spec, f"{where}/{key}", visit)


def _enter(node: Any, resolver: Resolver, spec: referencing.Specification[Any]) -> Resolver:
    if isinstance(node, dict) and spec.id_of(node) is not None:
        return resolver.in_subresource(spec.create_resource(node))
    return resolver
