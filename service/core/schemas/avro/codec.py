"""The Avro codec: Avro JSON to and from Avro binary for one schema.

JSON is Avro's JSON encoding, as Confluent's REST Proxy takes and gives it: a union value
is ``null`` or ``{"<branch>": value}`` where the branch is a primitive or ``array``/``map`` name,
or the full name of a named type; ``bytes`` and ``fixed`` are strings whose code points 0-255 are
the bytes; enums are their symbol; a ``float`` is given as its shortest decimal (``1.1``), as Java
prints it; NaN and infinities of ``float``/``double`` are the strings
``"NaN"``, ``"Infinity"``, ``"-Infinity"``; logical types are their underlying type (a
``timestamp-millis`` is a number, a ``decimal`` its bytes). Record fields missing from the JSON
take their default; a field that is missing without a default, or a field the record does not
have, is a ``ConversionError`` naming it.

Encoding is compiled once per schema (``AvroSchema`` keeps its codec) into a tree of closures,
one per type (``values``), that check the JSON as they write Avro's binary encoding: the bytes of
fastavro's and Confluent's serializers, with no datum built in between and one pass over the value.
Defaults are encoded once, when the codec is built. Decoding is fastavro's schemaless reader over
the schema parsed once; this module reshapes its datum into Avro JSON.

A schema whose top-level type is ``bytes`` (a logical type on it, such as ``decimal``, included) is
the one exception to Avro's binary encoding, as Confluent's serializers make it (Java's
``AbstractKafkaAvroSerializer`` and ``AbstractKafkaAvroDeserializer``, confluent-kafka's
``AvroSerializer`` and ``AvroDeserializer``): the payload is the value's bytes alone, without the
length Avro writes before bytes, and reading takes the whole payload as the bytes. ``fixed``, and
``bytes`` anywhere below the top (a field, a union branch), keep Avro's encoding.

One ambiguity the binary form cannot resolve through fastavro: in a union holding both ``int`` and
``long`` (or ``float`` and ``double``) a decoded number is reported under the first of those
branches, in union order, that can hold it.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable, Mapping
from typing import Any, Final

from fastavro import _read_py, parse_schema, schemaless_reader

from ..model import JSON, ConversionError, InvalidSchema
from .defaults import _as_avro_json, _default_problem
from .nodes import _INT_RANGE, PRIMITIVES, Node, _branch, _kind, _resolve
from .unrolled import unrolled
from .values import (
    _SIMPLE_ENCODERS,
    Decoder,
    Encoder,
    _array_encoder,
    _bare_bytes_encoder,
    _decode_bytes,
    _decode_float,
    _decode_float32,
    _enum_encoder,
    _fixed_encoder,
    _is_float32,
    _json_type,
    _key,
    _long,
    _map_encoder,
    _Mismatch,
    _where,
)

__all__ = ["AvroCodec"]

_TOO_DEEP: Final = "the value is nested too deeply"
# Payloads of recursive schemas up to this size nest at most this deep: safe for the compiled reader.
_COMPILED_READER_MAX_BYTES: Final = 512


class AvroCodec:
    """Avro JSON to and from Avro binary for one schema (``Codec``)."""

    def __init__(self, root: Node, named: Mapping[str, Node]) -> None:
        self._named = named
        self._encoders: dict[str, Encoder] = {}
        self._decoders: dict[str, Decoder] = {}
        # Defaults are encoded once every encoder exists: a default may hold a value of the very
        # record whose encoder was being built.
        self._pending_defaults: list[Callable[[], bytes]] = []
        self._encode = self._encoder(root)
        while self._pending_defaults:
            self._pending_defaults.pop()()
        self._decode = self._decoder(root)
        self._fastavro = parse_schema(_codec_schema(root, named, set()), {})
        self._recursive = _is_recursive(root, named)
        # Confluent's framing of a top-level bytes value (see the module's docstring): chosen here,
        # once, so that no other value pays for the exception.
        self._bare = _kind(root) == "bytes"
        if self._bare:
            self._encode = _bare_bytes_encoder

    def encode(self, value: JSON) -> bytes:
        try:
            return self._encode(value)
        except _Mismatch as exc:
            raise ConversionError(f"{_where(exc.path)}: {exc.reason}") from None
        except RecursionError:
            raise ConversionError(_TOO_DEEP) from None
        except (ValueError, TypeError, OverflowError, struct.error) as exc:  # a lone surrogate
            raise ConversionError(f"the value does not fit the Avro schema: {exc}") from None

    def decode(self, payload: bytes) -> JSON:
        if self._bare:  # Confluent's reading: the whole payload is the value's bytes
            return _decode_bytes(payload)
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

    # Encoders turn Avro JSON into Avro binary, checking it on the way.

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
        fields: list[tuple[str, Encoder, int]] = []  # name, encoder, index of its default or -1
        with_defaults = [f for f in node["fields"] if "default" in f]
        # Encoded once every encoder exists, or first when a default being encoded needs one.
        defaults: list[bytes | None] = [None] * len(with_defaults)

        def default_at(at: int) -> bytes:
            data = defaults[at]
            if data is None:
                field = with_defaults[at]
                data = defaults[at] = self._default_bytes(field["default"], field["type"])
            return data

        self._pending_defaults.extend(functools.partial(default_at, at) for at in range(len(defaults)))
        at = 0
        for field in node["fields"]:
            fields.append((field["name"], self._encoder(field["type"]), at if "default" in field else -1))
            at += "default" in field
        names = frozenset(f[0] for f in fields)
        count = len(fields)
        record = node["name"]

        def careful(value: Any) -> bytes:
            if type(value) is not dict:
                raise _Mismatch(f"expected an object (record '{record}'), got {_json_type(value)}")
            out: list[bytes] = []
            append = out.append
            missing = 0
            name = ""
            try:
                for name, encoder, default in fields:
                    if name in value:
                        append(encoder(value[name]))
                    elif default >= 0:
                        append(defaults[default] or default_at(default))
                        missing += 1
                    else:
                        raise _Mismatch("missing field without a default")
            except _Mismatch as exc:
                exc.path.append(_key(name))
                raise
            if len(value) != count - missing:
                unknown = sorted(k for k in value if k not in names)
                raise _Mismatch(f"record '{record}' has no field {', '.join(map(repr, unknown))}")
            return b"".join(out)

        return unrolled([f[0] for f in fields], [f[1] for f in fields], careful)

    def _default_bytes(self, default: Any, node: Node) -> bytes:
        node = _resolve(node, self._named)
        if isinstance(node, list):
            for i, branch in enumerate(node):
                if _default_problem(default, branch, self._named) is None:
                    return _long(i) + self._default_bytes(default, branch)
        kind = _kind(node)
        if kind in ("array", "map", "record", "error"):
            # A default of a structured type may itself hold unions or omit fields: build it as
            # Avro JSON of the type first (wrapping union values), then encode that.
            return self._encoder(node)(_as_avro_json(default, node, self._named))
        return self._encoder(node)(default)

    def _union_encoder(self, branches: list[Node]) -> Encoder:
        by_name: dict[str, tuple[bytes, Encoder]] = {}  # the branch's index, encoded, and its encoder
        null: bytes | None = None
        for i, branch in enumerate(branches):
            name = _branch(branch)
            if name == "null":
                null = _long(i)
            else:
                by_name[name] = (_long(i), self._encoder(branch))
        names = ", ".join(repr(n) for n in [_branch(b) for b in branches])

        def encode(value: Any) -> bytes:
            if value is None:
                if null is not None:
                    return null
                raise _Mismatch(f"null is not a branch of the union [{names}]")
            if type(value) is dict and len(value) == 1:
                ((name, inner),) = value.items()
                branch = by_name.get(name)
                if branch is None:
                    raise _Mismatch(f"'{name}' is not a branch of the union [{names}]")
                try:
                    return branch[0] + branch[1](inner)
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
