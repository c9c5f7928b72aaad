"""Field defaults: whether a default fits its type, its canonical form, and its Avro JSON.

The parser (``parser``) checks and normalizes every field default once the whole schema is known;
the codec (``codec``) turns a default into Avro JSON (union values wrapped) to encode it. Both walk
the normalized schema of ``nodes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .nodes import _INT_RANGE, _LONG_RANGE, Node, _branch, _kind, _resolve


def _default_problem(value: Any, node: Node, named: Mapping[str, Node]) -> str | None:
    node = _resolve(node, named)
    kind = _kind(node)
    if kind == "union":
        branches = node
        if any(_default_problem(value, b, named) is None for b in branches):
            return None
        return "it fits no branch of the union"
    if kind == "null":
        return None if value is None else "expected null"
    if kind == "boolean":
        return None if isinstance(value, bool) else "expected a boolean"
    if kind in ("int", "long"):
        low, high = _INT_RANGE if kind == "int" else _LONG_RANGE
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        return None if ok else f"expected an {kind}"
    if kind in ("float", "double"):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else "expected a number"
    if kind in ("string", "bytes", "fixed"):
        if not isinstance(value, str):
            return "expected a string"
        if kind != "string" and any(ord(c) > 255 for c in value):
            return "bytes are a string of code points 0-255"
        if kind == "fixed" and len(value) != node["size"]:
            return f"expected {node['size']} bytes"
        return None
    if kind == "enum":
        return None if value in node["symbols"] else "not a symbol of the enum"
    if kind == "array":
        if not isinstance(value, list):
            return "expected an array"
        return next((p for p in (_default_problem(v, node["items"], named) for v in value) if p), None)
    if kind == "map":
        if not isinstance(value, dict):
            return "expected an object"
        return next(
            (p for p in (_default_problem(v, node["values"], named) for v in value.values()) if p), None
        )
    # record
    if not isinstance(value, dict):
        return "expected an object"
    for field in node["fields"]:
        if field["name"] in value:
            problem = _default_problem(value[field["name"]], field["type"], named)
            if problem:
                return f"field '{field['name']}': {problem}"
        elif "default" not in field:
            return f"field '{field['name']}' is missing and has no default"
    return None


def _normalize_default(value: Any, node: Node, named: Mapping[str, Node]) -> Any:
    node = _resolve(node, named)
    kind = _kind(node)
    if kind == "union":
        branch = next(b for b in node if _default_problem(value, b, named) is None)
        return _normalize_default(value, branch, named)
    if kind in ("float", "double"):
        return float(value)
    if kind == "array":
        return [_normalize_default(v, node["items"], named) for v in value]
    if kind == "map":
        return {k: _normalize_default(v, node["values"], named) for k, v in value.items()}
    if kind in ("record", "error"):
        fields = {f["name"]: f["type"] for f in node["fields"]}
        return {k: _normalize_default(v, fields[k], named) for k, v in value.items() if k in fields}
    return value


def _as_avro_json(default: Any, node: Node, named: Mapping[str, Node]) -> Any:
    """A field default (union values unwrapped, as the spec writes defaults) as Avro JSON."""
    node = _resolve(node, named)
    kind = _kind(node)
    if kind == "union":
        branch = next(b for b in node if _default_problem(default, b, named) is None)
        if _kind(_resolve(branch, named)) == "null":
            return None
        return {_branch(branch): _as_avro_json(default, branch, named)}
    if kind == "array":
        return [_as_avro_json(v, node["items"], named) for v in default]
    if kind == "map":
        return {k: _as_avro_json(v, node["values"], named) for k, v in default.items()}
    if kind in ("record", "error"):
        fields = {f["name"]: f["type"] for f in node["fields"]}
        return {k: _as_avro_json(v, fields[k], named) for k, v in default.items() if k in fields}
    return default
