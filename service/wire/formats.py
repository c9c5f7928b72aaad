"""Embedded data formats: how keys, values and headers travel inside JSON.

``binary`` carries base64, ``json`` carries any JSON value (stored as its
UTF-8 JSON text), ``string`` carries UTF-8 text. ``avro``, ``jsonschema`` and
``protobuf`` carry JSON that a schema turns into the schema-registry wire format
(``service.core.schemas.serde`` does that). Header values are base64 in
every format, as in Confluent's v3 API. Decoding turns client input into
bytes (a key or value it cannot take is Confluent's ``BadRequest``, a header
a ``ConversionError``, each with the record's position); encoding turns
stored bytes back into JSON-ready values.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Callable, Iterator
from typing import Any, Final

import orjson
import pybase64
from typing_extensions import TypeIs

from service.core.models import EmbeddedFormat, Header, PlainFormat, SchemaFormat
from service.core.rules import check_header_name
from service.errors import BadRequest, ConversionError, NotBase64, UnsupportedMediaType

PLAIN_FORMATS: tuple[PlainFormat, ...] = ("binary", "json", "string")
SCHEMA_FORMATS: tuple[SchemaFormat, ...] = ("avro", "jsonschema", "protobuf")
FORMATS: tuple[EmbeddedFormat, ...] = (*PLAIN_FORMATS, *SCHEMA_FORMATS)

# The v2 control media type: consumer, subscription, offset and position bodies, and responses.
V2 = "application/vnd.kafka.v2+json"

_DATA_TYPES: dict[str, EmbeddedFormat] = {f"application/vnd.kafka.{fmt}.v2+json": fmt for fmt in FORMATS}
# Confluent treats the generic types as binary.
_GENERIC_TYPES = {V2, "application/vnd.kafka+json", "application/json"}


def media_type(header: str | None) -> str:
    """The bare media type of a Content-Type/Accept item, lower-cased, without parameters."""
    return (header or "").split(";", 1)[0].strip().lower()


# What curl -d sends when no -H 'Content-Type: …' says otherwise: the commonest 415 of all.
_FORM = "application/x-www-form-urlencoded"
_PRODUCE_TYPES = f"{', '.join(_DATA_TYPES)} or application/json (read as binary)"


def unsupported(content_type: str, reads: str) -> UnsupportedMediaType:
    """The 415 of a Content-Type a route does not read: Jersey's NotSupportedException, its status
    line as the message (and the status as the code), followed by the types the route reads, as
    the 406 says which it answers in."""
    curl = " (what curl -d sends without -H 'Content-Type: …')" if media_type(content_type) == _FORM else ""
    return UnsupportedMediaType(
        f"HTTP 415 Unsupported Media Type: this route reads {reads}, not {content_type[:100]!r}{curl}."
    )


def produce_format(content_type: str | None) -> EmbeddedFormat:
    """The embedded format a produce request's Content-Type names."""
    mt = media_type(content_type)
    if mt in _DATA_TYPES:
        return _DATA_TYPES[mt]
    if not mt or mt in _GENERIC_TYPES:
        return "binary"
    raise unsupported(content_type or "", _PRODUCE_TYPES)


def binary_by_default(content_type: str | None) -> str | None:
    """What a ``NotBase64`` of a produce adds when no embedded format was named (no Content-Type,
    or a generic one, read as binary as Confluent reads it): that, and the type JSON values need;
    None when the request named the binary format itself."""
    mt = media_type(content_type)
    if mt in _DATA_TYPES:
        return None
    said = f"Content-Type {mt}" if mt else "A request without a Content-Type"
    return (
        f"{said} is read as the binary format, whose keys and values are base64: "
        f"JSON keys and values need Content-Type {content_type_for('json')}."
    )


def is_schema_format(fmt: EmbeddedFormat) -> TypeIs[SchemaFormat]:
    return fmt in SCHEMA_FORMATS


def content_type_for(fmt: EmbeddedFormat) -> str:
    return f"application/vnd.kafka.{fmt}.v2+json"


# --- decoding: client JSON -> bytes -------------------------------------------------


def _decode_binary(value: Any, where: str) -> bytes | None:
    # A record's key or value: refused with the 400 and the words of Confluent's record
    # serializer (``data=… is not a base64 string.``), then where it is.
    if value is None:
        return None
    if not isinstance(value, str):
        raise NotBase64(f"Bad Request: data={shown(value)} is not a base64 string. ({where})")
    try:
        return pybase64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise NotBase64(f"Bad Request: data={shown(value)} is not a valid base64 string. ({where})") from None


def _header_value(value: Any, where: str) -> bytes | None:
    # Headers are brokergate's (v2 has none): their errors are its own, 42203.
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConversionError(f"{where}: expected a base64 string or null for the binary format")
    try:
        return pybase64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConversionError(f"{where}: invalid base64 ({exc})") from exc


_SHOWN_CHARS = 64  # of a refused value, in its error message


def shown(value: Any) -> str:
    """A refused JSON value as Confluent's messages print it (its compact JSON), cut short."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


def holds_float(value: Any) -> bool:
    """Whether parsed JSON holds a float: a number orjson may have rounded (a decimal with more
    digits than a double keeps, an integer beyond 64 bits), so the text must be read again exactly."""
    # A stack of containers, not recursion: whatever the depth, no RecursionError (and, parsed JSON
    # holding exact types, ``type(...) is`` checks: a third of the time of a recursive walk).
    if isinstance(value, float):
        return True
    stack = [value] if isinstance(value, dict | list) else []
    while stack:
        item = stack.pop()
        for child in item.values() if isinstance(item, dict) else item:
            kind = type(child)
            if kind is float:
                return True
            if kind is dict or kind is list:
                stack.append(child)
    return False


def _exact_int(text: str) -> int | orjson.Fragment:
    return int(text) if len(text) < 19 else orjson.Fragment(text.encode())  # beyond int64: as written


def loads_exact(body: bytes) -> Any:
    """``body``'s JSON with every number kept as the client wrote it (``orjson.Fragment``), so that
    ``123456789012345678901234567890`` or ``3.14159265358979323846`` is stored, and read back, as is.
    Slower than orjson alone: only for bodies ``holds_float`` says need it."""
    return json.loads(body, parse_float=lambda text: orjson.Fragment(text.encode()), parse_int=_exact_int)


def _decode_json(value: Any, where: str) -> bytes | None:
    if value is None:
        return None
    try:
        data = orjson.dumps(value)
    except TypeError as exc:  # e.g. integers beyond 64 bits
        raise ConversionError(f"{where}: cannot encode as JSON ({exc})") from exc
    # orjson's output keeps the buffer it was written in (4 KiB at least): 10,000 small values
    # would hold 40 MiB until appended. A copy holds what the value needs.
    return bytes(memoryview(data)) if len(data) < _ORJSON_BUFFER else data


_ORJSON_BUFFER = 4096


def _decode_string(value: Any, where: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"Bad Request: data={shown(value)} is not a string. ({where})")
    return value.encode("utf-8", "surrogatepass")


DECODERS: dict[PlainFormat, Callable[[Any, str], bytes | None]] = {
    "binary": _decode_binary,
    "json": _decode_json,
    "string": _decode_string,
}


def decode_headers(raw: Any, where: str) -> tuple[Header, ...]:
    """Headers as ``[{"name": str, "value": base64|null}, ...]``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConversionError(f"{where}: headers must be a list of {{name, value}} objects")
    out: list[Header] = []
    for i, h in enumerate(raw):
        if not isinstance(h, dict):
            raise ConversionError(f"{where}[{i}]: a header needs a non-empty string 'name'")
        name = check_header_name(h.get("name"), f"{where}[{i}]")
        out.append((name, _header_value(h.get("value"), f"{where}[{i}].value")))
    return tuple(out)


# --- showing: stored bytes -> the JSON text a consumer is given ---------------------------

# Why a stored key or value is not shown in its consumer's format (``ConversionError``, 42203).
NOT_JSON = "A stored record is not valid JSON; read it with a binary consumer or seek past it."
NOT_UTF8 = "A stored record is not valid UTF-8; read it with a binary consumer or seek past it."
_NULL: Final = b"null"


def _show_binary(column: list[bytes | None]) -> Iterator[bytes]:
    b64 = pybase64.b64encode
    for data in column:
        yield _NULL if data is None else b'"' + b64(data) + b'"'


def _show_json(column: list[bytes | None]) -> Iterator[bytes]:
    check = orjson.loads
    try:
        for data in column:
            if data is None:
                yield _NULL
            else:
                check(data)  # checked, and then given as stored: its numbers exactly as written
                yield data
    except orjson.JSONDecodeError as exc:
        raise ConversionError(NOT_JSON) from exc


def _show_string(column: list[bytes | None]) -> Iterator[bytes]:
    dumps = orjson.dumps
    try:
        for data in column:
            yield _NULL if data is None else dumps(data.decode())
    except UnicodeDecodeError as exc:
        raise ConversionError(NOT_UTF8) from exc


# How a consumer is given the keys or the values of records in each plain format, as JSON text:
# base64 in a string, JSON as stored (once it parses: an invalid one would corrupt the whole
# answer), UTF-8 text in a string; null for none. Each is shown as the renderer takes it, so that
# no column of shown values is held at once (``records.objects``). Values of a schema format are
# shown from the JSON their schema decoded (``records.json_text``).
SHOWN: Final[dict[PlainFormat, Callable[[list[bytes | None]], Iterator[bytes]]]] = {
    "binary": _show_binary,
    "json": _show_json,
    "string": _show_string,
}


def encode_headers(headers: tuple[Header, ...]) -> list[dict[str, str | None]]:
    return [{"name": k, "value": None if v is None else pybase64.b64encode_as_string(v)} for k, v in headers]
