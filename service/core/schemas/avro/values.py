"""Avro JSON values to Avro binary, and the datums fastavro reads back to Avro JSON, one type at a time.

An encoder checks a JSON value against its type as it writes it, and returns its Avro binary
encoding, or raises ``_Mismatch`` naming what is wrong (the path is added as it unwinds); a decoder
turns a datum fastavro read back into Avro JSON. ``codec.AvroCodec`` composes them along a schema
and handles unions, records and named types.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Mapping
from typing import Any, Final

from .nodes import _INT_RANGE, _LONG_RANGE, _NAME

_FLOAT_MAX: Final = 3.4028234663852886e38
_FLOAT_MIN_NORMAL: Final = 1.1754943508222875e-38
_DOUBLE_MAX: Final = 1.7976931348623157e308
_FLOAT32 = struct.Struct("<f")


class _Mismatch(Exception):
    """A JSON value does not fit; ``path`` grows (innermost first) as it unwinds."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []


Encoder = Callable[[Any], bytes]
Decoder = Callable[[Any], Any] | None  # None: the datum is already the JSON


def _where(path: list[str]) -> str:
    return "$" + "".join(reversed(path))


def _key(name: str) -> str:
    return f".{name}" if _NAME.match(name) else f"[{json.dumps(name)}]"


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


# Avro's binary encoding of the values an encoder has checked: zig-zag varints, little-endian
# IEEE floats, length-prefixed strings and bytes, blocks of items ended by a zero count.

_BYTE: Final = tuple(bytes((i,)) for i in range(256))
_DOUBLE = struct.Struct("<d")
_EMPTY_BLOCKS: Final = b"\x00"  # an array or map without items: only the closing zero count


def _varint(n: int) -> bytes:
    """A non-negative integer in 7-bit groups, least significant first."""
    if n < 0x80:
        return _BYTE[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _long(value: int) -> bytes:
    """An Avro int or long: zig-zag (0, -1, 1, -2 ... as 0, 1, 2, 3 ...), then a varint."""
    return _varint(value << 1 if value >= 0 else (~value << 1) | 1)


def _sized(data: bytes) -> bytes:
    """Avro bytes and strings: the length, then the bytes."""
    n = len(data)
    return (_BYTE[n << 1] if n < 0x40 else _varint(n << 1)) + data


def _encode_null(value: Any) -> bytes:
    if value is not None:
        raise _Mismatch(f"expected null, got {_json_type(value)}")
    return b""


def _encode_boolean(value: Any) -> bytes:
    if value is True:
        return b"\x01"
    if value is False:
        return b"\x00"
    raise _Mismatch(f"expected a boolean, got {_json_type(value)}")


def _integer_encoder(kind: str, low: int, high: int) -> Encoder:
    article = "an" if kind == "int" else "a"

    def encode(value: Any) -> bytes:
        if type(value) is int:
            if low <= value <= high:
                if 0 <= value < 0x40:  # most integers a record holds: one byte
                    return _BYTE[value << 1]
                return _long(value)
        elif type(value) is float and value.is_integer() and low <= value <= high:
            return _long(int(value))
        raise _Mismatch(f"expected {article} {kind} ({low}..{high}), got {_json_type(value)}")

    return encode


_SPECIAL_FLOATS: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _float_encoder(kind: str, limit: float, packing: struct.Struct) -> Encoder:
    pack = packing.pack

    def encode(value: Any) -> bytes:
        tv = type(value)
        if tv is float or tv is int:
            if -limit <= value <= limit:
                return pack(value)  # an int as float(value) is: rounded to the nearest
            if tv is float and math.isinf(value):
                return pack(value)
            if kind == "float":  # just above the largest float, yet rounding to it
                try:
                    return pack(value)
                except (OverflowError, struct.error):  # struct.error: an int beyond any float
                    pass
            raise _Mismatch(f"{value!r} is out of range for a {kind}")
        if tv is str and value in _SPECIAL_FLOATS:
            return pack(_SPECIAL_FLOATS[value])
        raise _Mismatch(f"expected a number ({kind}), got {_json_type(value)}")

    return encode


def _encode_string(value: Any) -> bytes:
    if type(value) is str:
        # A lone surrogate (no JSON parser of the API lets one through) raises UnicodeEncodeError.
        data = value.encode()
        n = len(data)  # _sized, inline: strings are the most common field
        return (_BYTE[n << 1] if n < 0x40 else _varint(n << 1)) + data
    raise _Mismatch(f"expected a string, got {_json_type(value)}")


def _latin1(value: Any) -> bytes:
    if type(value) is not str:
        raise _Mismatch(f"expected a string of bytes (code points 0-255), got {_json_type(value)}")
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        raise _Mismatch("bytes are a string of code points 0-255 in Avro's JSON encoding") from None


def _encode_bytes(value: Any) -> bytes:
    return _sized(_latin1(value))


def _bare_bytes_encoder(value: Any) -> bytes:
    """A value of a top-level ``bytes`` schema as Confluent's serializers write it: the bytes alone,
    without Avro's length before them (``codec.AvroCodec`` picks it for the whole value)."""
    return _latin1(value)


def _fixed_encoder(size: int) -> Encoder:
    def encode(value: Any) -> bytes:
        data = _latin1(value)
        if len(data) != size:
            raise _Mismatch(f"expected {size} bytes, got {len(data)}")
        return data

    return encode


def _enum_encoder(symbols: list[str]) -> Encoder:
    indexes = {symbol: _long(i) for i, symbol in enumerate(symbols)}

    def encode(value: Any) -> bytes:
        if type(value) is str:
            index = indexes.get(value)
            if index is not None:
                return index
        raise _Mismatch(f"expected one of the symbols {symbols}, got {json.dumps(value)[:100]}")

    return encode


def _array_encoder(item: Encoder) -> Encoder:
    def encode(value: Any) -> bytes:
        if type(value) is not list:
            raise _Mismatch(f"expected an array, got {_json_type(value)}")
        if not value:
            return _EMPTY_BLOCKS
        i = 0
        try:
            out = [_long(len(value))]
            for i, v in enumerate(value):  # noqa: B007 - i names the item in an error
                out.append(item(v))
        except _Mismatch as exc:
            exc.path.append(f"[{i}]")
            raise
        out.append(_EMPTY_BLOCKS)
        return b"".join(out)

    return encode


def _map_encoder(values: Encoder) -> Encoder:
    def encode(value: Any) -> bytes:
        if type(value) is not dict:
            raise _Mismatch(f"expected an object (map), got {_json_type(value)}")
        if not value:
            return _EMPTY_BLOCKS
        key = ""
        try:
            out = [_long(len(value))]
            for key, v in value.items():
                out.append(_sized(key.encode()))
                out.append(values(v))
        except _Mismatch as exc:
            exc.path.append(_key(key))
            raise
        out.append(_EMPTY_BLOCKS)
        return b"".join(out)

    return encode


_SIMPLE_ENCODERS: Final[Mapping[str, Encoder]] = {
    "null": _encode_null,
    "boolean": _encode_boolean,
    "int": _integer_encoder("int", *_INT_RANGE),
    "long": _integer_encoder("long", *_LONG_RANGE),
    "float": _float_encoder("float", _FLOAT_MAX, _FLOAT32),
    "double": _float_encoder("double", _DOUBLE_MAX, _DOUBLE),
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
