"""Parsing an Avro schema into its normalized form, which is also its canonical text.

``_Normalizer`` checks a schema the way Avro's Java parser does (names, namespaces, duplicate fields
and symbols, union rules, fixed sizes, defaults that fit their type, named types defined once and
before use) and says what is wrong in ``InvalidSchema``. Named types of referenced schemas
(``references``, by the name the registry resolved them under) are known to the schema as if
defined before it. ``schema.AvroFormat`` runs it; field defaults are checked by ``defaults``.

Canonical text. Avro's Parsing Canonical Form keeps only what the binary encoding needs, so two
schemas differing in a default, a doc or an alias would be "the same" — yet a default decides
what a reader fills in, and registries store a new version when the doc changes. The canonical
text here is the schema as normalized JSON that keeps everything that matters to a reader or a
user and nothing that is mere spelling:

- names are full names; ``namespace`` attributes are folded into them; aliases are qualified;
- a primitive without attributes is its bare name (``{"type": "int"}`` is ``"int"``); the names
  Avro reserves (``name``, ``doc``, ``namespace``, …) are no attributes of a primitive, an array
  or a map (``{"type": "int", "name": "X"}`` is ``"int"``);
- a named type is defined at its first use and referred to by full name afterwards;
- kept: fields in order, field defaults (numbers of ``float``/``double`` written as floats), docs,
  sorted aliases, ``order`` unless ``ascending`` (the default), enum defaults, logical types and
  every other attribute (``connect.name``, ``avro.java.string``, …);
- keys sorted, no whitespace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ..model import InvalidSchema
from .defaults import _default_problem, _normalize_default
from .nodes import _NAME, _NAMED_KINDS, PRIMITIVES, Node, _branch

_ORDERS: Final = frozenset({"ascending", "descending", "ignore"})
# Attributes Avro's parser reserves: on a primitive, an array or a map they are no attributes
# ({"type": "int", "name": "X"} is "int"), as Avro's Java parser drops them.
_RESERVED: Final = frozenset(
    {"type", "name", "namespace", "doc", "aliases", "fields", "symbols", "size", "items", "values"}
)


class _Normalizer:
    """Walks a schema once: checks it and builds its normalized form, defining named types in
    ``named`` as they appear (after those of the references). Field defaults are checked once the
    whole schema is known (``finish``): a default may hold a value of a type still being defined."""

    def __init__(self, known: Mapping[str, Node]) -> None:
        self.named: dict[str, Node] = dict(known)
        self._defaults: list[tuple[dict[str, Any], Any, str]] = []

    def finish(self) -> None:
        for entry, value, where in self._defaults:
            problem = _default_problem(value, entry["type"], self.named)
            if problem is not None:
                raise InvalidSchema(f"{where}: invalid default {json.dumps(value)}: {problem}")
            entry["default"] = _normalize_default(value, entry["type"], self.named)

    def node(self, schema: Any, namespace: str, where: str) -> Node:
        if isinstance(schema, str):
            return self._reference(schema, namespace, where)
        if isinstance(schema, list):
            return self._union(schema, namespace, where)
        if not isinstance(schema, dict):
            raise InvalidSchema(f"{where}: {json.dumps(schema)} is not a schema")
        kind = schema.get("type")
        if kind is None:
            raise InvalidSchema(f"{where}: a schema object needs a 'type'")
        if not isinstance(kind, str):
            raise InvalidSchema(
                f"{where}: 'type' of a schema object must be a string, got {json.dumps(kind)}"
            )
        if kind in PRIMITIVES:
            props = {k: v for k, v in schema.items() if k not in _RESERVED}
            return {"type": kind, **props} if props else kind
        if kind in _NAMED_KINDS:
            return self._named(schema, kind, namespace, where)
        if kind in ("array", "map"):
            child = "items" if kind == "array" else "values"
            if child not in schema:
                raise InvalidSchema(f"{where}: an {kind} needs '{child}'")
            out = {k: v for k, v in schema.items() if k not in _RESERVED}
            out["type"] = kind
            out[child] = self.node(schema[child], namespace, f"{where}.{child}")
            return out
        return self._reference(kind, namespace, where)

    def _reference(self, name: str, namespace: str, where: str) -> Node:
        if name in PRIMITIVES:
            return name
        if name in ("record", "error", "enum", "fixed", "array", "map"):
            raise InvalidSchema(f'{where}: \'{name}\' needs the object form, e.g. {{"type": "{name}", …}}')
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        if full not in self.named:
            full = name  # as Java's parser does: a name not found in the namespace, unqualified
        if full not in self.named:
            raise InvalidSchema(
                f"{where}: unknown type '{name}' (neither defined before this point nor in a reference)"
            )
        return full

    def _union(self, branches: list[Any], namespace: str, where: str) -> Node:
        out: list[Node] = []
        seen: set[str] = set()
        for i, branch in enumerate(branches):
            if isinstance(branch, list):
                raise InvalidSchema(f"{where}[{i}]: a union cannot directly contain a union")
            node = self.node(branch, namespace, f"{where}[{i}]")
            key = _branch(node)
            if key in seen:
                raise InvalidSchema(f"{where}: the union holds '{key}' twice")
            seen.add(key)
            out.append(node)
        return out

    def _named(self, schema: dict[str, Any], kind: str, namespace: str, where: str) -> Node:
        name = schema.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidSchema(f"{where}: a {kind} needs a 'name'")
        ns = schema.get("namespace", namespace)
        if ns is None:
            ns = ""
        if not isinstance(ns, str):
            raise InvalidSchema(f"{where}: 'namespace' must be a string")
        if "." in name:
            ns, _, short = name.rpartition(".")
        else:
            short = name
        full = f"{ns}.{short}" if ns else short
        _check_full_name(full, f"{where} ({kind} '{name}')")
        if short in PRIMITIVES:
            raise InvalidSchema(f"{where}: '{short}' is a primitive type and cannot name a {kind}")
        if full in self.named:
            raise InvalidSchema(f"{where}: type '{full}' is defined twice")
        where = full
        out: dict[str, Any] = {"type": kind, "name": full}
        self.named[full] = out  # before the fields: a record may refer to itself
        if kind in ("record", "error"):
            out["fields"] = self._fields(schema.get("fields"), ns, where)
        elif kind == "enum":
            symbols = schema.get("symbols")
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                raise InvalidSchema(f"{where}: an enum needs 'symbols', a list of names")
            for s in symbols:
                if not _NAME.match(s):
                    raise InvalidSchema(f"{where}: '{s}' is not a valid enum symbol")
            if len(set(symbols)) != len(symbols):
                raise InvalidSchema(f"{where}: enum symbols must be unique")
            out["symbols"] = list(symbols)
            if "default" in schema:
                if schema["default"] not in symbols:
                    raise InvalidSchema(
                        f"{where}: the enum default {json.dumps(schema['default'])} is not a symbol"
                    )
                out["default"] = schema["default"]
        else:
            size = schema.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise InvalidSchema(f"{where}: a fixed needs 'size', a non-negative integer")
            out["size"] = size
        if "doc" in schema:
            out["doc"] = schema["doc"]
        aliases = schema.get("aliases")
        if aliases is not None:
            if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                raise InvalidSchema(f"{where}: 'aliases' must be a list of names")
            qualified = sorted({a if "." in a or not ns else f"{ns}.{a}" for a in aliases})
            for alias in qualified:
                _check_full_name(alias, f"{where} alias")
            out["aliases"] = qualified
        reserved = {"type", "name", "namespace", "fields", "symbols", "size", "doc", "aliases", "default"}
        out.update({k: v for k, v in schema.items() if k not in reserved})
        return out

    def _fields(self, fields: Any, namespace: str, where: str) -> list[dict[str, Any]]:
        if not isinstance(fields, list):
            raise InvalidSchema(f"{where}: a record needs 'fields', a list")
        out: list[dict[str, Any]] = []
        names: set[str] = set()
        for i, field in enumerate(fields):
            if not isinstance(field, dict):
                raise InvalidSchema(f"{where}: field {i} is not an object")
            name = field.get("name")
            if not isinstance(name, str) or not _NAME.match(name):
                raise InvalidSchema(f"{where}: field {i} needs a valid 'name', got {json.dumps(name)}")
            if name in names:
                raise InvalidSchema(f"{where}: field '{name}' is defined twice")
            names.add(name)
            if "type" not in field:
                raise InvalidSchema(f"{where}.{name}: a field needs a 'type'")
            node = self.node(field["type"], namespace, f"{where}.{name}")
            entry: dict[str, Any] = {"name": name, "type": node}
            if "default" in field:
                self._defaults.append((entry, field["default"], f"{where}.{name}"))
            if "doc" in field:
                entry["doc"] = field["doc"]
            aliases = field.get("aliases")
            if aliases is not None:
                if not isinstance(aliases, list) or not all(
                    isinstance(a, str) and _NAME.match(a) for a in aliases
                ):
                    raise InvalidSchema(f"{where}.{name}: 'aliases' must be a list of field names")
                entry["aliases"] = sorted(set(aliases))
            order = field.get("order", "ascending")
            if order not in _ORDERS:
                raise InvalidSchema(f"{where}.{name}: 'order' must be one of {sorted(_ORDERS)}")
            if order != "ascending":
                entry["order"] = order
            reserved = {"name", "type", "default", "doc", "aliases", "order"}
            entry.update({k: v for k, v in field.items() if k not in reserved})
            out.append(entry)
        return out


def _check_full_name(full: str, where: str) -> None:
    for part in full.split("."):
        if not _NAME.match(part):
            raise InvalidSchema(f"{where}: '{full}' is not a valid Avro name")
