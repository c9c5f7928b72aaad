"""Avro schemas: parsing, the canonical text, Avro's schema-resolution rules, and the codec.

``AvroFormat.parse`` checks a schema the way Avro's Java parser does (names, namespaces,
duplicate fields and symbols, union rules, fixed sizes, defaults that fit their type, named
types defined once and before use) and says what is wrong in ``InvalidSchema``. Named types of
referenced schemas (``references``, by the name the registry resolved them under) are known to
the schema as if defined before it.

Canonical text. Avro's Parsing Canonical Form keeps only what the binary encoding needs, so two
schemas differing in a default, a doc or an alias would be "the same" — yet a default decides
what a reader fills in, and registries store a new version when the doc changes. The canonical
text here is the schema as normalized JSON that keeps everything that matters to a reader or a
user and nothing that is mere spelling:

- names are full names; ``namespace`` attributes are folded into them; aliases are qualified;
- a primitive without attributes is its bare name (``{"type": "int"}`` is ``"int"``);
- a named type is defined at its first use and referred to by full name afterwards;
- kept: fields in order, field defaults (numbers of ``float``/``double`` written as floats), docs,
  sorted aliases, ``order`` unless ``ascending`` (the default), enum defaults, logical types and
  every other attribute (``connect.name``, ``avro.java.string``, …);
- keys sorted, no whitespace.

Reading rules. ``reading_errors`` implements Avro's schema resolution as Java's
``SchemaCompatibility`` applies it: promotions int→long→float→double and string↔bytes; records,
enums and fixed match by unqualified name or a reader alias naming the writer's full name;
a reader field is found in the writer by name or by one of its aliases, and a field the writer
lacks needs a default; an enum reader without a default must hold every writer symbol; fixed sizes
must be equal; every branch of a writer union must be readable, and a reader union reads a value
if one of its branches does. Recursive types are followed once per (reader, writer) pair.
Logical types do not enter compatibility (they annotate the same bytes).

Codec. JSON is Avro's JSON encoding, as Confluent's REST Proxy takes and gives it: a union value
is ``null`` or ``{"<branch>": value}`` where the branch is a primitive or ``array``/``map`` name,
or the full name of a named type; ``bytes`` and ``fixed`` are strings whose code points 0-255 are
the bytes; enums are their symbol; a ``float`` is given as its shortest decimal (``1.1``), as Java
prints it; NaN and infinities of ``float``/``double`` are the strings
``"NaN"``, ``"Infinity"``, ``"-Infinity"``; logical types are their underlying type (a
``timestamp-millis`` is a number, a ``decimal`` its bytes). Record fields missing from the JSON
take their default; a field that is missing without a default, or a field the record does not
have, is a ``ConversionError`` naming it. Binary encoding is fastavro's schemaless writer and
reader over the schema parsed once per ``AvroSchema``; this module only checks and reshapes the
JSON around them.

One ambiguity the binary form cannot resolve through fastavro: in a union holding both ``int`` and
``long`` (or ``float`` and ``double``) a decoded number is reported under the first of those
branches, in union order, that can hold it.
"""

from __future__ import annotations

import io
import json
import math
import re
import struct
from collections.abc import Callable, Mapping
from typing import Any, Final

from fastavro import _read_py, parse_schema, schemaless_reader, schemaless_writer

from service.core.json_depth import MAX_SCHEMA_DEPTH, exceeds

from .model import JSON, ConversionError, InvalidSchema, ParsedSchema, Schema, SchemaType

__all__ = ["AvroCodec", "AvroFormat", "AvroSchema"]

PRIMITIVES: Final = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED_KINDS: Final = frozenset({"record", "error", "enum", "fixed"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ORDERS: Final = frozenset({"ascending", "descending", "ignore"})
_INT_RANGE: Final = (-(2**31), 2**31 - 1)
_LONG_RANGE: Final = (-(2**63), 2**63 - 1)
_FLOAT_MAX: Final = 3.4028234663852886e38
_FLOAT_MIN_NORMAL: Final = 1.1754943508222875e-38
_DOUBLE_MAX: Final = 1.7976931348623157e308
_FLOAT32 = struct.Struct("<f")

_TOO_DEEP: Final = "the value is nested too deeply"
# Payloads of recursive schemas up to this size nest at most this deep: safe for the compiled reader.
_COMPILED_READER_MAX_BYTES: Final = 512

# Which writer types each reader type reads (Avro's promotions).
_PROMOTIONS: Final[Mapping[str, frozenset[str]]] = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}

Node = Any  # a normalized schema: a primitive or full name (str), a union (list) or a dict


# --- parsing and normalization -------------------------------------------------------------


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
            props = {k: v for k, v in schema.items() if k != "type"}
            return {"type": kind, **props} if props else kind
        if kind in _NAMED_KINDS:
            return self._named(schema, kind, namespace, where)
        if kind in ("array", "map"):
            child = "items" if kind == "array" else "values"
            if child not in schema:
                raise InvalidSchema(f"{where}: an {kind} needs '{child}'")
            out = {k: v for k, v in schema.items() if k not in ("type", child)}
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


def _resolve(node: Node, named: Mapping[str, Node]) -> Node:
    if isinstance(node, str) and node not in PRIMITIVES:
        return named[node]
    return node


def _kind(node: Node) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    return str(node["type"])


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


# --- the parsed schema ----------------------------------------------------------------------


class AvroSchema:
    """A parsed Avro schema: its normalized form, the named types it knows (its own and its
    references'), and its codec, built on first use."""

    def __init__(self, schema: Schema, root: Node, named: Mapping[str, Node]) -> None:
        self.schema = schema
        self.root = root
        self.named = named
        self._canonical = json.dumps(root, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        self._codec: AvroCodec | None = None

    def canonical(self) -> str:
        return self._canonical

    def reading_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return [f"the writer's schema is {writer.schema.schema_type}, not AVRO"]
        errors: list[str] = []
        _Resolution(self.named, writer.named, errors).check(self.root, writer.root, "")
        return list(dict.fromkeys(errors))

    def codec(self) -> AvroCodec:
        if self._codec is None:
            self._codec = AvroCodec(self.root, self.named)
        return self._codec

    def record_name(self) -> str | None:
        root = self.root
        if not isinstance(root, dict) or not isinstance(root.get("name"), str):
            return None
        name, namespace = root["name"], root.get("namespace")
        return f"{namespace}.{name}" if namespace and "." not in name else name

    def __repr__(self) -> str:
        return f"AvroSchema({self._canonical[:80]!r})"


class AvroFormat:
    """Parses Avro schemas (``SchemaFormat`` for ``SchemaType.AVRO``)."""

    schema_type: SchemaType = SchemaType.AVRO

    def parse(self, schema: Schema, references: Mapping[str, ParsedSchema]) -> AvroSchema:
        if exceeds(schema.text, MAX_SCHEMA_DEPTH):  # before the recursive parser and codec see it
            raise InvalidSchema(f"an Avro schema nests JSON more than {MAX_SCHEMA_DEPTH} levels deep")
        try:
            document = json.loads(schema.text)
        except ValueError as exc:
            raise InvalidSchema(f"an Avro schema is JSON: {exc}") from None
        known: dict[str, Node] = {}
        for ref in schema.references:
            parsed = references.get(ref.name)
            if parsed is None:
                raise InvalidSchema(
                    f"reference '{ref.name}' ({ref.subject} version {ref.version}) was not given"
                )
            if not isinstance(parsed, AvroSchema):
                raise InvalidSchema(
                    f"reference '{ref.name}' is a {parsed.schema.schema_type} schema, not AVRO"
                )
            for name, node in parsed.named.items():
                if known.setdefault(name, node) != node:  # the same type through two paths is fine
                    raise InvalidSchema(f"type '{name}' is defined by two references")
        normalizer = _Normalizer(known)
        try:
            root = normalizer.node(document, "", "schema")
            normalizer.finish()
        except RecursionError:
            raise InvalidSchema("the schema is nested too deeply") from None
        return AvroSchema(schema, root, normalizer.named)


# --- reading rules --------------------------------------------------------------------------


class _Resolution:
    """One ``reading_errors`` run: Avro's resolution of a writer's schema by a reader's."""

    def __init__(self, reader_named: Mapping[str, Node], writer_named: Mapping[str, Node], errors: list[str]):
        self.rnamed = reader_named
        self.wnamed = writer_named
        self.errors = errors
        self.trial = False
        self.assumed: set[tuple[str, str]] = set()  # named pairs compared or under comparison
        self.failing: set[tuple[str, str]] = set()  # named pairs known not to resolve

    def readable(self, reader: Node, writer: Node, path: str) -> bool:
        """Whether ``reader`` reads ``writer`` (a trial: its errors are not reported)."""
        trial = _Resolution(self.rnamed, self.wnamed, [])
        trial.trial = True
        trial.assumed = self.assumed
        trial.failing = self.failing
        trial.check(reader, writer, path)
        return not trial.errors

    def check(self, reader: Node, writer: Node, path: str) -> None:
        reader = _resolve(reader, self.rnamed)
        writer = _resolve(writer, self.wnamed)
        rkind, wkind = _kind(reader), _kind(writer)
        if wkind == "union":
            for branch in writer:
                bname = _branch(branch)
                if rkind == "union":
                    if not any(self.readable(r, branch, path) for r in reader):
                        self.fail(
                            path,
                            f"the writer's union branch '{bname}' matches no branch of the reader's union",
                        )
                else:
                    self.check(reader, branch, path)
            return
        if rkind == "union":
            if not any(self.readable(r, writer, path) for r in reader):
                self.fail(
                    path, f"the reader's union has no branch that reads the writer's '{_branch(writer)}'"
                )
            return
        if rkind != wkind and not (rkind in ("record", "error") and wkind in ("record", "error")):
            if wkind in _PROMOTIONS.get(rkind, ()):
                return
            self.fail(path, f"the writer's {_describe(writer)} cannot be read as {_describe(reader)}")
            return
        if rkind in PRIMITIVES:
            return
        if rkind == "array":
            self.check(reader["items"], writer["items"], f"{path}[]")
        elif rkind == "map":
            self.check(reader["values"], writer["values"], f"{path}{{}}")
        else:
            self.named(reader, writer, path or reader["name"])

    def named(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        rname, wname = reader["name"], writer["name"]
        if rname.rpartition(".")[2] != wname.rpartition(".")[2] and wname not in reader.get("aliases", ()):
            self.fail(
                path,
                f"the writer's {writer['type']} '{wname}' has another name than the reader's '{rname}' "
                "(and no reader alias names it)",
            )
            return
        if (rname, wname) in self.assumed:
            return  # compared already, or being compared further up (a recursive type)
        if self.trial and (rname, wname) in self.failing:
            self.fail(path, "does not resolve")  # known: unions of unions try a pair many times
            return
        self.assumed.add((rname, wname))
        before = len(self.errors)
        try:
            kind = reader["type"]
            if kind == "fixed":
                if reader["size"] != writer["size"]:
                    self.fail(
                        path, f"fixed '{rname}' has size {reader['size']}, the writer's {writer['size']}"
                    )
            elif kind == "enum":
                if "default" not in reader:
                    missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
                    if missing:
                        self.fail(
                            path,
                            f"the reader's enum '{rname}' lacks the writer's symbols {missing} "
                            "and has no default",
                        )
            else:
                wfields = {f["name"]: f for f in writer["fields"]}
                for field in reader["fields"]:
                    fpath = f"{path}.{field['name']}"
                    match = wfields.get(field["name"])
                    if match is None:
                        match = next((wfields[a] for a in field.get("aliases", ()) if a in wfields), None)
                    if match is not None:
                        self.check(field["type"], match["type"], fpath)
                    elif "default" not in field:
                        self.fail(
                            fpath, "the reader's field is missing from the writer's data and has no default"
                        )
        finally:
            if len(self.errors) > before:
                self.assumed.discard((rname, wname))
                self.failing.add((rname, wname))

    def fail(self, path: str, reason: str) -> None:
        self.errors.append(f"{path}: {reason}" if path else reason)


def _branch(node: Node) -> str:
    if isinstance(node, str):
        return node
    return str(node.get("name") or node["type"])


def _describe(node: Node) -> str:
    kind = _kind(node)
    if kind in _NAMED_KINDS:
        return f"{kind} '{node['name']}'"
    return kind


# --- the codec ------------------------------------------------------------------------------


class _Mismatch(Exception):
    """A JSON value does not fit; ``path`` grows (innermost first) as it unwinds."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []


Encoder = Callable[[Any], Any]
Decoder = Callable[[Any], Any] | None  # None: the datum is already the JSON


def _where(path: list[str]) -> str:
    return "$" + "".join(reversed(path))


def _key(name: str) -> str:
    return f".{name}" if _NAME.match(name) else f"[{json.dumps(name)}]"


class AvroCodec:
    """Avro JSON to and from Avro binary for one schema (``Codec``)."""

    def __init__(self, root: Node, named: Mapping[str, Node]) -> None:
        self._named = named
        self._encoders: dict[str, Encoder] = {}
        self._decoders: dict[str, Decoder] = {}
        # Defaults are encoded once every encoder exists: a default may hold a value of the very
        # record whose encoder was being built.
        self._pending_defaults: list[Callable[[], None]] = []
        self._encode = self._encoder(root)
        while self._pending_defaults:
            self._pending_defaults.pop()()
        self._decode = self._decoder(root)
        self._fastavro = parse_schema(_codec_schema(root, named, set()), {})
        self._recursive = _is_recursive(root, named)

    def encode(self, value: JSON) -> bytes:
        try:
            datum = self._encode(value)
        except _Mismatch as exc:
            raise ConversionError(f"{_where(exc.path)}: {exc.reason}") from None
        except RecursionError:
            raise ConversionError(_TOO_DEEP) from None
        out = io.BytesIO()
        try:
            schemaless_writer(out, self._fastavro, datum)
        except (ValueError, TypeError, OverflowError, struct.error) as exc:
            raise ConversionError(f"the value does not fit the Avro schema: {exc}") from None
        return out.getvalue()

    def decode(self, payload: bytes) -> JSON:
        # fastavro's compiled reader recurses on the C stack, as deep as the payload nests, and a
        # few thousand levels crash the process. A payload of a recursive schema that could nest
        # that deep (every level takes a byte) goes to its Python reader, which stops at Python's
        # recursion limit instead.
        safe = not self._recursive or len(payload) <= _COMPILED_READER_MAX_BYTES
        reader = schemaless_reader if safe else _read_py.schemaless_reader
        try:
            datum = reader(io.BytesIO(payload), self._fastavro, None, return_named_type=True)
            return datum if self._decode is None else self._decode(datum)
        except RecursionError:
            raise ConversionError(_TOO_DEEP) from None
        except Exception as exc:  # fastavro raises many kinds for bytes that are not a datum
            raise ConversionError(f"the payload is not Avro data of this schema: {exc!r}") from None

    # Encoders turn Avro JSON into the datum fastavro writes, checking it on the way.

    def _encoder(self, node: Node) -> Encoder:
        if isinstance(node, str) and node not in PRIMITIVES:
            cached = self._encoders.get(node)
            if cached is _BUILDING:  # a recursive type: look the encoder up when it runs
                return lambda value: self._encoders[node](value)
            if cached is not None:
                return cached
            self._encoders[node] = _BUILDING
            built = self._encoder(self._named[node])
            self._encoders[node] = built
            return built
        kind = _kind(node)
        if kind == "union":
            return self._union_encoder(node)
        if kind in _SIMPLE_ENCODERS:
            return _SIMPLE_ENCODERS[kind]
        if kind == "fixed":
            return _fixed_encoder(node["size"])
        if kind == "enum":
            return _enum_encoder(node["symbols"])
        if kind == "array":
            return _array_encoder(self._encoder(node["items"]))
        if kind == "map":
            return _map_encoder(self._encoder(node["values"]))
        if kind in ("record", "error"):
            if node["name"] not in self._encoders:
                return self._encoder(node["name"])
            return self._record_encoder(node)
        raise InvalidSchema(f"cannot encode type {kind}")  # unreachable for a parsed schema

    def _record_encoder(self, node: dict[str, Any]) -> Encoder:
        fields: list[tuple[str, Encoder, bool, int]] = []
        defaults: list[Any] = [None] * len(node["fields"])
        for i, field in enumerate(node["fields"]):
            fields.append((field["name"], self._encoder(field["type"]), "default" in field, i))
            if "default" in field:

                def encode_default(i: int = i, field: dict[str, Any] = field) -> None:
                    defaults[i] = self._default_datum(field["default"], field["type"])

                self._pending_defaults.append(encode_default)
        names = frozenset(f[0] for f in fields)

        def encode(value: Any) -> Any:
            if type(value) is not dict:
                raise _Mismatch(f"expected an object (record '{node['name']}'), got {_json_type(value)}")
            out = {}
            seen = 0
            name = ""
            try:
                for name, encoder, has_default, i in fields:
                    if name in value:
                        out[name] = encoder(value[name])
                        seen += 1
                    elif has_default:
                        out[name] = defaults[i]
                    else:
                        raise _Mismatch("missing field without a default")
            except _Mismatch as exc:
                exc.path.append(_key(name))
                raise
            if seen != len(value):
                unknown = sorted(k for k in value if k not in names)
                raise _Mismatch(f"record '{node['name']}' has no field {', '.join(map(repr, unknown))}")
            return out

        return encode

    def _default_datum(self, default: Any, node: Node) -> Any:
        node = _resolve(node, self._named)
        if isinstance(node, list):
            for branch in node:
                if _default_problem(default, branch, self._named) is None:
                    if _kind(_resolve(branch, self._named)) == "null":
                        return None
                    return (_branch(branch), self._default_datum(default, branch))
        kind = _kind(node)
        if kind in ("array", "map", "record", "error"):
            # A default of a structured type may itself hold unions or omit fields: build it as
            # Avro JSON of the type first (wrapping union values), then encode that.
            return self._encoder(node)(_as_avro_json(default, node, self._named))
        return self._encoder(node)(default)

    def _union_encoder(self, branches: list[Node]) -> Encoder:
        by_name: dict[str, Encoder] = {}
        nullable = False
        for branch in branches:
            name = _branch(branch)
            if name == "null":
                nullable = True
            else:
                by_name[name] = self._encoder(branch)
        names = ", ".join(repr(n) for n in [_branch(b) for b in branches])

        def encode(value: Any) -> Any:
            if value is None:
                if nullable:
                    return None
                raise _Mismatch(f"null is not a branch of the union [{names}]")
            if type(value) is dict and len(value) == 1:
                ((name, inner),) = value.items()
                encoder = by_name.get(name)
                if encoder is None:
                    raise _Mismatch(f"'{name}' is not a branch of the union [{names}]")
                try:
                    return (name, encoder(inner))
                except _Mismatch as exc:
                    exc.path.append(_key(name))
                    raise
            example = next(iter(by_name), "null")
            raise _Mismatch(
                f'a union value is null or an object naming its branch, e.g. {{"{example}": …}} '
                f"(union [{names}]), got {_json_type(value)}"
            )

        return encode

    # Decoders turn fastavro's datum into Avro JSON; None where the datum already is.

    def _decoder(self, node: Node) -> Decoder:
        if isinstance(node, str) and node not in PRIMITIVES:
            if node in self._decoders:
                built = self._decoders[node]
                if built is not _BUILDING:
                    return built

                def recursive(value: Any) -> Any:
                    decoder = self._decoders[node]
                    return value if decoder is None else decoder(value)

                return recursive
            self._decoders[node] = _BUILDING
            decoder = self._decoder(self._named[node])
            self._decoders[node] = decoder
            return decoder
        kind = _kind(node)
        if kind == "union":
            return self._union_decoder(node)
        if kind == "float":
            return _decode_float32
        if kind == "double":
            return _decode_float
        if kind in ("bytes", "fixed"):
            return _decode_bytes
        if kind == "array":
            item = self._decoder(node["items"])
            return None if item is None else (lambda value: [item(v) for v in value])
        if kind == "map":
            values = self._decoder(node["values"])
            return None if values is None else (lambda value: {k: values(v) for k, v in value.items()})
        if kind in ("record", "error"):
            if node["name"] not in self._decoders:
                return self._decoder(node["name"])
            converting = [
                (f["name"], d) for f in node["fields"] if (d := self._decoder(f["type"])) is not None
            ]
            if not converting:
                return None

            def decode_record(value: dict[str, Any]) -> dict[str, Any]:
                for name, decoder in converting:
                    value[name] = decoder(value[name])
                return value

            return decode_record
        return None  # null, boolean, int, long, string, enum

    def _union_decoder(self, branches: list[Node]) -> Decoder:
        decoders = {_branch(b): self._decoder(b) for b in branches}
        ints = [n for n in ("int", "long") if n in decoders]
        floats = [n for n in ("float", "double") if n in decoders]
        ints.sort(key=[_branch(b) for b in branches].index)
        floats.sort(key=[_branch(b) for b in branches].index)

        def decode(value: Any) -> Any:
            if value is None:
                return None
            if type(value) is tuple:  # a named type: fastavro gives (full name, datum)
                name, inner = value
            elif type(value) is bool:
                name, inner = "boolean", value
            elif type(value) is int:
                name, inner = (
                    next(
                        (n for n in ints if n == "long" or _INT_RANGE[0] <= value <= _INT_RANGE[1]), ints[-1]
                    ),
                    value,
                )
            elif type(value) is float:
                name, inner = (
                    next((n for n in floats if n == "double" or _is_float32(value)), floats[-1]),
                    value,
                )
            elif type(value) is str:
                name, inner = "string", value
            elif type(value) is bytes:
                name, inner = "bytes", value
            elif type(value) is list:
                name, inner = "array", value
            else:
                name, inner = "map", value
            decoder = decoders[name]
            return {name: inner if decoder is None else decoder(inner)}

        return decode


_BUILDING: Final[Any] = object()


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _encode_null(value: Any) -> Any:
    if value is not None:
        raise _Mismatch(f"expected null, got {_json_type(value)}")
    return None


def _encode_boolean(value: Any) -> Any:
    if value is True or value is False:
        return value
    raise _Mismatch(f"expected a boolean, got {_json_type(value)}")


def _integer_encoder(kind: str, low: int, high: int) -> Encoder:
    article = "an" if kind == "int" else "a"

    def encode(value: Any) -> Any:
        if type(value) is int:
            if low <= value <= high:
                return value
        elif type(value) is float and value.is_integer() and low <= value <= high:
            return int(value)
        raise _Mismatch(f"expected {article} {kind} ({low}..{high}), got {_json_type(value)}")

    return encode


_SPECIAL_FLOATS: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _float_encoder(kind: str, limit: float) -> Encoder:
    def encode(value: Any) -> Any:
        tv = type(value)
        if tv is float or tv is int:
            if -limit <= value <= limit:
                return float(value)
            if tv is float and math.isinf(value):
                return value
            if kind == "float":  # just above the largest float, yet rounding to it
                try:
                    return _FLOAT32.unpack(_FLOAT32.pack(value))[0]
                except OverflowError:
                    pass
            raise _Mismatch(f"{value!r} is out of range for a {kind}")
        if tv is str and value in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[value]
        raise _Mismatch(f"expected a number ({kind}), got {_json_type(value)}")

    return encode


def _encode_string(value: Any) -> Any:
    if type(value) is str:
        return value
    raise _Mismatch(f"expected a string, got {_json_type(value)}")


def _encode_bytes(value: Any) -> Any:
    if type(value) is not str:
        raise _Mismatch(f"expected a string of bytes (code points 0-255), got {_json_type(value)}")
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        raise _Mismatch("bytes are a string of code points 0-255 in Avro's JSON encoding") from None


def _fixed_encoder(size: int) -> Encoder:
    def encode(value: Any) -> Any:
        data = _encode_bytes(value)
        if len(data) != size:
            raise _Mismatch(f"expected {size} bytes, got {len(data)}")
        return data

    return encode


def _enum_encoder(symbols: list[str]) -> Encoder:
    allowed = frozenset(symbols)

    def encode(value: Any) -> Any:
        if type(value) is str and value in allowed:
            return value
        raise _Mismatch(f"expected one of the symbols {symbols}, got {json.dumps(value)[:100]}")

    return encode


def _array_encoder(item: Encoder) -> Encoder:
    def encode(value: Any) -> Any:
        if type(value) is not list:
            raise _Mismatch(f"expected an array, got {_json_type(value)}")
        i = 0
        try:
            out = []
            for i, v in enumerate(value):  # noqa: B007 - i names the item in an error
                out.append(item(v))
            return out
        except _Mismatch as exc:
            exc.path.append(f"[{i}]")
            raise

    return encode


def _map_encoder(values: Encoder) -> Encoder:
    def encode(value: Any) -> Any:
        if type(value) is not dict:
            raise _Mismatch(f"expected an object (map), got {_json_type(value)}")
        key = ""
        try:
            out = {}
            for key, v in value.items():
                out[key] = values(v)
            return out
        except _Mismatch as exc:
            exc.path.append(_key(key))
            raise

    return encode


_SIMPLE_ENCODERS: Final[Mapping[str, Encoder]] = {
    "null": _encode_null,
    "boolean": _encode_boolean,
    "int": _integer_encoder("int", *_INT_RANGE),
    "long": _integer_encoder("long", *_LONG_RANGE),
    "float": _float_encoder("float", _FLOAT_MAX),
    "double": _float_encoder("double", _DOUBLE_MAX),
    "string": _encode_string,
    "bytes": _encode_bytes,
}


def _decode_float(value: float) -> Any:
    if value - value == 0:  # neither NaN nor infinite
        return value
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _decode_bytes(value: bytes) -> str:
    return value.decode("latin-1")


def _decode_float32(value: float) -> Any:
    """A float as Java prints it (the shortest decimal that is the same float): 1.1, not the
    1.100000023841858 its widening to a double would print."""
    if value - value != 0:
        return _decode_float(value)
    # From six digits, where a normal float's shortest spelling shows; subnormals have fewer.
    for digits in range(6 if abs(value) >= _FLOAT_MIN_NORMAL else 1, 9):
        shorter = float(f"{value:.{digits}g}")
        if _FLOAT32.unpack(_FLOAT32.pack(shorter))[0] == value:
            return shorter
    return float(f"{value:.9g}")  # nine significant digits always name a float


def _is_float32(value: float) -> bool:
    try:
        return bool(_FLOAT32.unpack(_FLOAT32.pack(value))[0] == value) or value != value
    except OverflowError:
        return False


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


def _is_recursive(root: Node, named: Mapping[str, Node]) -> bool:
    """Whether a named type reachable from ``root`` can contain itself."""

    def children(node: Node) -> list[Node]:
        if isinstance(node, list):
            return node
        if isinstance(node, str):
            return [] if node in PRIMITIVES else [named[node]]
        if node["type"] in ("record", "error"):
            return [f["type"] for f in node["fields"]]
        return [node[k] for k in ("items", "values") if k in node]

    def reaches(start: str) -> bool:
        seen: set[str] = set()
        stack = children(named[start])
        while stack:
            node = stack.pop()
            if isinstance(node, str) and node not in PRIMITIVES:
                if node == start:
                    return True
                if node in seen:
                    continue
                seen.add(node)
            elif isinstance(node, dict) and node.get("name") == start:
                return True
            stack += children(node)
        return False

    return any(reaches(name) for name in named)


def _codec_schema(node: Node, named: Mapping[str, Node], defined: set[str]) -> Any:
    """The schema fastavro is given: named types defined at first use (including those of the
    references), without defaults, docs or logical types (the codec's JSON is the underlying
    type's, and it fills every field itself)."""
    if isinstance(node, str):
        if node in PRIMITIVES or node in defined:
            return node
        return _codec_schema(named[node], named, defined)
    if isinstance(node, list):
        return [_codec_schema(b, named, defined) for b in node]
    kind = node["type"]
    if kind in PRIMITIVES:
        return kind
    if kind == "array":
        return {"type": "array", "items": _codec_schema(node["items"], named, defined)}
    if kind == "map":
        return {"type": "map", "values": _codec_schema(node["values"], named, defined)}
    defined.add(node["name"])
    if kind == "enum":
        return {"type": "enum", "name": node["name"], "symbols": node["symbols"]}
    if kind == "fixed":
        return {"type": "fixed", "name": node["name"], "size": node["size"]}
    fields = [{"name": f["name"], "type": _codec_schema(f["type"], named, defined)} for f in node["fields"]]
    return {"type": "record", "name": node["name"], "fields": fields}
