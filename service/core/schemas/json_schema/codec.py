"""The JSON Schema codec: values checked against the schema, written as compact UTF-8 JSON.

A value is validated against the schema (format assertions on), and a mismatch is a
``ConversionError`` with the JSON path and the reason; the payload is the value as compact UTF-8
JSON, which is what Confluent's JSON Schema serializers write after the 5-byte header. Decoding
parses the JSON and does not validate (data already written is given as it is), keeping every
integer exact, as Jackson's reader does.
``schema.JsonSchema`` builds the validator (with the RE2 keywords of ``patterns``).
"""

from __future__ import annotations

import json
import re
from typing import Final, NoReturn

import orjson
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

from ..model import JSON, ConversionError

__all__ = ["JsonSchemaCodec"]

_MESSAGE_LIMIT: Final = 300
# A run of 19 digits: the shortest integer beyond 64 bits (-9223372036854775809), which ``orjson``
# reads as a double, rounded. Such a payload is read by the standard library, which keeps it exact.
_LONG_DIGITS: Final = re.compile(rb"[0-9]{19}")


class JsonSchemaCodec:
    """JSON values checked against the schema, as compact UTF-8 JSON (``Codec``)."""

    def __init__(self, validator: Validator) -> None:
        self._validator = validator

    def encode(self, value: JSON) -> bytes:
        try:
            error = best_match(self._validator.iter_errors(value))
            if error is not None:
                raise ConversionError(f"{error.json_path}: {_limit(error.message)}")
            try:
                return orjson.dumps(value)
            except orjson.JSONEncodeError:  # beyond 64-bit integers or 255 levels: the standard library
                return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        except RecursionError:
            raise ConversionError("the value is nested too deeply") from None

    def decode(self, payload: bytes) -> JSON:
        if _LONG_DIGITS.search(payload) is None:
            try:
                return orjson.loads(payload)
            except orjson.JSONDecodeError as exc:
                raise ConversionError(f"the payload is not JSON: {exc}") from None
        try:
            return json.loads(payload, parse_constant=_not_json)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise ConversionError(f"the payload is not JSON: {exc}") from None


def _not_json(constant: str) -> NoReturn:
    raise ValueError(f"{constant} is not a JSON value")


def _limit(text: str) -> str:
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."
