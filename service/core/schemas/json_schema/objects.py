"""Object schemas compared as Confluent's ``ObjectSchemaDiff`` compares them: required properties,
properties added or removed against the content model, dependencies, additional and unevaluated
properties, and the property counts. ``propertyNames`` is not compared (nor by Confluent).

``compatibility._Comparison`` calls ``object_differences`` for two object schemas and is called
back for their subschemas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import referencing

from .constraints import Shapes, is_empty
from .differences import Difference, Diffs, at, compatible

if TYPE_CHECKING:
    from .subschemas import Resolver


class _Side(Protocol):
    spec: referencing.Specification[Any]


class _Comparison(Protocol):
    """What of ``compatibility._Comparison`` objects need (a protocol: that module imports this)."""

    writer: _Side
    reader: _Side
    shapes: Shapes

    def differences(self, w: Any, wres: Resolver, r: Any, rres: Resolver) -> Diffs: ...

    def content(
        self, node: dict[str, Any], more: str, uneval: str, spec: referencing.Specification[Any]
    ) -> tuple[bool, Any]: ...

    def removed(
        self, wnode: Any, wres: Resolver, open_: bool, partial: Any, rres: Resolver, where: str, what: str
    ) -> Diffs: ...

    def additional(
        self,
        w: dict[str, Any],
        wres: Resolver,
        wkey: str,
        r: dict[str, Any],
        rres: Resolver,
        rkey: str,
        what: str,
    ) -> Diffs: ...

    def unevaluated(
        self, w: dict[str, Any], wres: Resolver, r: dict[str, Any], rres: Resolver, keyword: str, what: str
    ) -> Diffs: ...

    def pattern_schema(self, node: dict[str, Any], name: str) -> Any: ...


def object_differences(
    comparison: _Comparison, w: dict[str, Any], wres: Resolver, r: dict[str, Any], rres: Resolver
) -> Diffs:
    wprops, rprops = _dict(w.get("properties")), _dict(r.get("properties"))
    wrequired, rrequired = _required(w), _required(r)
    found: Diffs = []
    for name in wprops:
        if name in rprops and (name in wrequired) != (name in rrequired):
            if name in wrequired:
                rule = "REQUIRED_ATTRIBUTE_REMOVED"
            elif _has_default(rprops[name]):
                rule = "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
            else:
                rule = "REQUIRED_ATTRIBUTE_ADDED"
            found.append(Difference(rule, f"required/{name}"))
    wopen, wpartial = comparison.content(
        w, "additionalProperties", "unevaluatedProperties", comparison.writer.spec
    )
    ropen, rpartial = comparison.content(
        r, "additionalProperties", "unevaluatedProperties", comparison.reader.spec
    )
    for name in list(wprops) + [n for n in rprops if n not in wprops]:
        where = f"properties/{name}"
        if name in wprops and name in rprops:
            found += at(where, comparison.differences(wprops[name], wres, rprops[name], rres))
        elif name in wprops:  # only the reader's content model says whether it may go
            partial = comparison.pattern_schema(r, name)
            found += comparison.removed(
                wprops[name], wres, ropen, rpartial if partial is None else partial, rres, where, "PROPERTY"
            )
        else:  # only the writer's content model says whether it may come
            found += _added(comparison, w, wres, wopen, wpartial, rprops[name], rres, name in rrequired, name)
    found += at("dependencies", _dependencies(comparison, w, wres, r, rres))
    found += comparison.additional(
        w, wres, "additionalProperties", r, rres, "additionalProperties", "PROPERTIES"
    )
    found += comparison.unevaluated(w, wres, r, rres, "unevaluatedProperties", "PROPERTIES")
    return found


def _added(
    comparison: _Comparison,
    w: dict[str, Any],
    wres: Resolver,
    wopen: bool,
    wpartial: Any,
    added: Any,
    rres: Resolver,
    required: bool,
    name: str,
) -> Diffs:
    where = f"properties/{name}"
    if wopen:
        if is_empty(added, comparison.shapes):
            rule = "PROPERTY_WITH_EMPTY_SCHEMA_ADDED"
        elif required:
            rule = (
                "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED" if _has_default(added) else "REQUIRED_PROPERTY_ADDED"
            )
        else:
            rule = "OPTIONAL_PROPERTY_ADDED"
        return [Difference(f"{rule}_TO_OPEN_CONTENT_MODEL", where)]
    found: Diffs = []
    partial = comparison.pattern_schema(w, name)
    partial = wpartial if partial is None else partial
    if partial is not None:
        diffs = comparison.differences(partial, wres, added, rres)
        covered = "IS" if compatible(diffs) else "NOT"
        found += [
            *at(where, diffs),
            Difference(f"PROPERTY_ADDED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where),
        ]
    if required:
        rule = "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED" if _has_default(added) else "REQUIRED_PROPERTY_ADDED"
    else:
        rule = "OPTIONAL_PROPERTY_ADDED"
    found.append(Difference(f"{rule}_TO_UNOPEN_CONTENT_MODEL", where))
    return found


def _dependencies(
    comparison: _Comparison, w: dict[str, Any], wres: Resolver, r: dict[str, Any], rres: Resolver
) -> Diffs:
    warrays, wschemas = _split(w)
    rarrays, rschemas = _split(r)
    found: Diffs = []
    for name in list(warrays) + [n for n in rarrays if n not in warrays]:
        mine, theirs = warrays.get(name), rarrays.get(name)
        if theirs is None:
            found.append(Difference("DEPENDENCY_ARRAY_REMOVED", name))
        elif mine is None:
            found.append(Difference("DEPENDENCY_ARRAY_ADDED", name))
        elif mine != theirs:
            rule = "EXTENDED" if mine <= theirs else "NARROWED" if theirs <= mine else "CHANGED"
            found.append(Difference(f"DEPENDENCY_ARRAY_{rule}", name))
    for name in list(wschemas) + [n for n in rschemas if n not in wschemas]:
        if name not in rschemas:
            found.append(Difference("DEPENDENCY_SCHEMA_REMOVED", name))
        elif name not in wschemas:
            found.append(Difference("DEPENDENCY_SCHEMA_ADDED", name))
        else:
            found += at(name, comparison.differences(wschemas[name], wres, rschemas[name], rres))
    return found


def _split(node: dict[str, Any]) -> tuple[dict[str, set[str]], dict[str, Any]]:
    """Property dependencies (names) and schema dependencies, whichever keyword spells them."""
    arrays = {k: set(v) for k, v in _dict(node.get("dependentRequired")).items() if isinstance(v, list)}
    schemas = dict(_dict(node.get("dependentSchemas")))
    for k, v in _dict(node.get("dependencies")).items():
        if isinstance(v, list):
            arrays[k] = set(v)
        else:
            schemas[k] = v
    return arrays, schemas


def _required(node: dict[str, Any]) -> set[str]:
    value = node.get("required")
    return {n for n in value if isinstance(n, str)} if isinstance(value, list) else set()


def _has_default(node: Any) -> bool:
    return isinstance(node, dict) and "default" in node


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
