"""The texts the registry stores and answers for an Avro schema, as Confluent's registry writes them.

Confluent stores an Avro schema as Avro's own ``Schema.toString()`` prints it (its
``canonicalString``): compact JSON, each object's keys in Avro's order (``type``, ``name``,
``namespace`` where it differs from the enclosing one, ``doc``, then what the kind has:
``fields``, ``symbols`` and ``default``, ``size``, ``items``, ``values``), then the other
attributes as they came, then ``aliases``; a named type written in full once and by name
afterwards, relative to the enclosing namespace; types of the references by name only.
``?normalize=true`` stores the same text with the other attributes sorted by name (logical-type
attributes first), as Confluent's normalization reparsed by Avro comes out.

``?format=resolved`` answers the text with the references' types written in full where first
used (Avro's ``Schema.toString()`` of the schema parsed with them): ``render`` given the named
types (``inline``). ``render`` works on the normalized form ``parser`` builds (full names,
qualified aliases, defaults checked); it does no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from .nodes import PRIMITIVES, Node

_NAMED_KEYS: Final = frozenset({"type", "name", "fields", "symbols", "size", "doc", "aliases", "default"})
_FIELD_KEYS: Final = frozenset({"name", "type", "doc", "default", "order", "aliases"})
_LOGICAL_FIRST: Final = ("logicalType", "precision", "scale")


def render(
    root: Node,
    references: Iterable[str],
    *,
    normalized: bool = False,
    inline: Mapping[str, Node] | None = None,
) -> str:
    """The text of ``root`` as Avro prints it; ``references`` are the full names the references
    define (written by name); ``normalized``: other attributes sorted; ``inline``: the named types
    by full name, a type not yet written is written in full where it is first used."""
    return _Writer(set(references), normalized, inline or {}).text(root)


class _Writer:
    def __init__(self, written: set[str], normalized: bool, inline: Mapping[str, Node]) -> None:
        self._written = written
        self._normalized = normalized
        self._inline = inline

    def text(self, root: Node) -> str:
        return json.dumps(self._node(root, ""), separators=(",", ":"), ensure_ascii=False)

    def _node(self, node: Node, space: str) -> Any:
        if isinstance(node, str):
            if node in PRIMITIVES:
                return node
            found = self._inline.get(node) if node not in self._written else None
            return self._named(found, space) if isinstance(found, dict) else self._name_ref(node, space)
        if isinstance(node, list):
            return [self._node(branch, space) for branch in node]
        kind = node["type"]
        if kind in ("array", "map"):
            child = "items" if kind == "array" else "values"
            out = {"type": kind, child: self._node(node[child], space)}
            return self._props(out, node, {"type", child})
        if kind in PRIMITIVES:
            return self._props({"type": kind}, node, {"type"})
        return self._named(node, space)

    def _named(self, node: dict[str, Any], space: str) -> Any:
        full: str = node["name"]
        if full in self._written:
            return self._name_ref(full, space)
        self._written.add(full)
        ns, _, short = full.rpartition(".")
        out: dict[str, Any] = {"type": node["type"], "name": short}
        if ns != space:
            out["namespace"] = ns
        if "doc" in node:
            out["doc"] = node["doc"]
        if "fields" in node:
            out["fields"] = [self._field(f, ns) for f in node["fields"]]
        if "symbols" in node:
            out["symbols"] = node["symbols"]
            if "default" in node:
                out["default"] = node["default"]
        if "size" in node:
            out["size"] = node["size"]
        self._props(out, node, _NAMED_KEYS)
        if node.get("aliases"):
            out["aliases"] = [self._name_ref(alias, ns) for alias in node["aliases"]]
        return out

    def _field(self, field: dict[str, Any], space: str) -> dict[str, Any]:
        out: dict[str, Any] = {"name": field["name"], "type": self._node(field["type"], space)}
        for key in ("doc", "default", "order", "aliases"):
            if key in field:
                out[key] = field[key]
        return self._props(out, field, _FIELD_KEYS)

    def _props(self, out: dict[str, Any], node: dict[str, Any], taken: Iterable[str]) -> dict[str, Any]:
        skip = set(taken)
        keys = [k for k in node if k not in skip]
        if self._normalized:  # Confluent writes the logical type first, the rest sorted
            first = [k for k in _LOGICAL_FIRST if k in keys]
            keys = first + sorted(k for k in keys if k not in _LOGICAL_FIRST)
        for key in keys:
            out[key] = node[key]
        return out

    @staticmethod
    def _name_ref(full: str, space: str) -> str:
        """A name as Avro writes a reference to it: short within its own namespace."""
        ns, _, short = full.rpartition(".")
        return short if ns == space else full
