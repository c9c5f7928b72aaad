"""What the sink makes of a DataFrame: its columns checked, its rows as v2 produce records.

The columns are Spark's Kafka sink's (``key``, ``value``, ``headers``, ``topic``, ``partition``)
plus ``timestamp``, the record's time, which the gateway takes and Spark's Kafka sink does not.
Other columns are left alone, as Spark's Kafka sink leaves them, so a DataFrame read from a topic
(``offset`` and all) can be written to another as it is.

``Columns.check`` refuses, on the driver and before any task runs, a column of a type the format
cannot carry, in one line naming the column. ``Columns.records`` turns one Arrow batch into
``Outgoing`` records, each its topic and its JSON text in a produce body (``body`` joins them):

binary (the default)
    ``key`` and ``value`` are binary or string (its UTF-8 bytes), sent as base64.
json, avro, jsonschema, protobuf
    a string ``key``/``value`` is JSON text (what ``to_json`` makes), sent as it is once it has
    been checked to be one JSON value; any other type is sent as the JSON of its value: structs
    and maps as objects, arrays as arrays, timestamps and dates as ISO 8601 text, decimals as their
    exact digits, binary as base64 (as Avro's JSON encoding, code points 0-255, for ``avro``). An
    Avro union takes the JSON encoding of Avro (``{"string": "x"}``), as in the REST API.

Header values are binary or string; ``partition`` an integer column (null: the gateway's choice);
``timestamp`` a timestamp column (null: the time the gateway writes it).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

import orjson
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampType,
)

from .offsets import OptionError
from .sink_options import SCHEMA_FORMATS, SinkOptions

_BYTES_OR_TEXT: Final = (BinaryType, StringType)
_INTEGERS: Final = (ByteType, ShortType, IntegerType, LongType)
# A map's keys as JSON object names, whatever their type (a map<int,string> has int keys).
_JSON_OPTIONS: Final = orjson.OPT_NON_STR_KEYS


# One record on its way: its topic and its JSON text in a produce body.
Outgoing = tuple[str, str]


class BadRecord(ValueError):
    """A row the sink cannot send (its JSON text is not JSON, it has no topic)."""


@dataclass(frozen=True, slots=True)
class Columns:
    """Which of the sink's columns a DataFrame has, checked against the write's format."""

    names: frozenset[str]
    key_is_text: bool
    value_is_text: bool
    format: str
    topic: str | None

    @classmethod
    def check(cls, schema: StructType, options: SinkOptions) -> Columns:
        """The columns of ``schema`` the sink uses; ``OptionError`` for one it cannot."""
        by_name = {f.name.lower(): f.dataType for f in schema.fields}
        if "value" not in by_name:
            raise OptionError("the DataFrame has no value column: the sink writes it as each record's value")
        binary = options.format == "binary"
        for side in ("key", "value"):
            kind = by_name.get(side)
            if kind is not None and binary and not isinstance(kind, _BYTES_OR_TEXT):
                raise OptionError(
                    f"column {side} is {kind.simpleString()}: the binary format takes binary or string "
                    "(cast it, or give format json, avro, jsonschema or protobuf)"
                )
        if "key" in by_name and options.format in SCHEMA_FORMATS:
            if options.key_schema is None:
                raise OptionError(
                    f"format {options.format} with a key column: give keySchemaId or keySchema "
                    "(or drop the key column)"
                )
        _expect(by_name, "topic", (StringType,), "string")
        _expect(by_name, "partition", _INTEGERS, "an integer")
        _expect(by_name, "timestamp", (TimestampType,), "timestamp")
        headers = by_name.get("headers")
        if headers is not None and not _is_headers(headers):
            raise OptionError(
                f"column headers is {headers.simpleString()}: it takes "
                "array<struct<key:string,value:binary>> (or a string value)"
            )
        if options.topic is None and "topic" not in by_name:
            raise OptionError("name the topic: a topic option, or a topic column")
        return cls(
            names=frozenset(by_name) & {"key", "value", "headers", "topic", "partition", "timestamp"},
            key_is_text=isinstance(by_name.get("key"), StringType),
            value_is_text=isinstance(by_name.get("value"), StringType),
            format=options.format,
            topic=options.topic,
        )

    def records(self, batch: pa.RecordBatch) -> Iterator[Outgoing]:
        """The records of one Arrow batch, in its order, each as its JSON text. Each column is
        encoded in one pass; a binary record without headers is put together as text (no dict
        per record: a few hundred nanoseconds a record), any other with orjson."""
        n = batch.num_rows
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

        def column(name: str) -> list[Any] | None:
            if name not in self.names:
                return None
            array = batch.column(names[name])
            if pa.types.is_nested(array.type):  # maps as dicts; worth its cost only where they may be
                return array.to_pylist(maps_as_pydicts="strict")
            return array.to_pylist()

        topics = [self.topic] * n if self.topic is not None else column("topic")
        assert topics is not None  # Columns.check: a topic option or a topic column
        for i, topic in enumerate(topics):
            if topic is None:
                raise BadRecord(f"row {i} of a batch has a null topic and the write names none")
        given = column("value")
        assert given is not None  # Columns.check: a value column
        values = self._encoded(given, "value", self.value_is_text)
        keys = None if (given := column("key")) is None else self._encoded(given, "key", self.key_is_text)
        partitions = column("partition")
        millis = None
        if "timestamp" in self.names:
            micros = batch.column(names["timestamp"]).cast(pa.int64()).to_pylist()
            millis = [None if t is None else t // 1000 for t in micros]
        headers = column("headers")
        if self.format == "binary" and headers is None:
            texts = _binary_texts(values, keys, partitions, millis)
        else:
            texts = self._json_texts(values, keys, partitions, millis, headers)
        return zip(topics, texts, strict=True)

    def _json_texts(
        self,
        values: list[Any],
        keys: list[Any] | None,
        partitions: list[int | None] | None,
        millis: list[int | None] | None,
        headers: list[Any] | None,
    ) -> list[str]:
        """Records as orjson writes them, a dict each (JSON values, headers)."""
        fields: list[dict[str, Any]] = [{} if v is None else {"value": v} for v in values]
        for name, each in (("key", keys), ("partition", partitions), ("timestamp", millis)):
            for i, one in enumerate(each or ()):
                if one is not None:
                    fields[i][name] = one
        for i, given in enumerate(headers or ()):
            if given:
                fields[i]["headers"] = [_header(h) for h in given]
        dumps, default, opts = orjson.dumps, self._json_default, _JSON_OPTIONS
        return [dumps(f, default=default, option=opts).decode() for f in fields]

    def _encoded(self, values: list[Any], side: str, is_text: bool) -> list[Any]:
        """A key or value column as the body carries it."""
        if self.format == "binary":
            b64 = binascii.b2a_base64  # base64.b64encode, without its wrapper's cost
            raw = [None if v is None else v.encode() for v in values] if is_text else values
            return [None if v is None else b64(v, newline=False).decode("ascii") for v in raw]
        if is_text:
            return [None if v is None else _json_text(v, side) for v in values]
        return values

    def _json_default(self, value: Any) -> Any:
        return json_default(value, avro=self.format == "avro")


def _binary_texts(
    values: list[str | None],
    keys: list[str | None] | None,
    partitions: list[int | None] | None,
    millis: list[int | None] | None,
) -> list[str]:
    """Binary records without headers as JSON text, put together from each field's text: base64
    and numbers need no escaping, so no dict is built per record."""
    if keys is None and partitions is None and millis is None:
        return ["{}" if v is None else '{"value":"' + v + '"}' for v in values]
    fields = [[None if v is None else f'"value":"{v}"' for v in values]]
    if keys is not None:
        fields.append([None if k is None else f'"key":"{k}"' for k in keys])
    if partitions is not None:
        fields.append([None if p is None else f'"partition":{p}' for p in partitions])
    if millis is not None:
        fields.append([None if t is None else f'"timestamp":{t}' for t in millis])
    return ["{" + ",".join([f for f in row if f is not None]) + "}" for row in zip(*fields, strict=True)]


def body(records: list[str], options: SinkOptions, schema_ids: dict[str, int]) -> bytes:
    """A v2 produce body of ``records`` (each its JSON text): the write's schemas by id once a
    request told their ids (``schema_ids``, by side), else as the options give them."""
    doc: dict[str, Any] = {}
    for side, given in (("key", options.key_schema), ("value", options.value_schema)):
        known = schema_ids.get(side)
        if known is not None or isinstance(given, int):
            doc[f"{side}_schema_id"] = known if known is not None else given
        elif given is not None:
            doc[f"{side}_schema"] = given
    head = orjson.dumps(doc)[:-1].decode()  # without its closing brace
    return f'{head}{"," if doc else ""}"records":[{",".join(records)}]}}'.encode()


def json_default(value: Any, *, avro: bool) -> Any:
    """orjson's fallback for the values Spark hands a Python writer that JSON has no type for."""
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value))  # exact, as it was
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("latin-1") if avro else base64.b64encode(value).decode("ascii")
    if isinstance(value, _Text):
        return orjson.Fragment(value.text)
    raise TypeError(f"no JSON for a {type(value).__name__}")


class _Text:
    """A JSON text checked to hold one value, written into the body as it is (exact numbers kept)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _json_text(text: str, side: str) -> _Text:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses that JSON allows: an integer beyond 64 bits
            json.loads(text)
        except ValueError:
            raise BadRecord(f"a {side} is not JSON text: {text[:80]!r}") from None
    return _Text(text)


def _header(header: dict[str, Any]) -> dict[str, Any]:
    value = header.get("value")
    if isinstance(value, str):
        value = value.encode()
    return {
        "name": header.get("key"),
        "value": None if value is None else base64.b64encode(value).decode("ascii"),
    }


def _expect(by_name: dict[str, DataType], name: str, kinds: tuple[type, ...], said: str) -> None:
    kind = by_name.get(name)
    if kind is not None and not isinstance(kind, kinds):
        raise OptionError(f"column {name} is {kind.simpleString()}: it takes {said}")


def _is_headers(kind: DataType) -> bool:
    if not isinstance(kind, ArrayType) or not isinstance(kind.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in kind.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], StringType)
        and isinstance(fields["value"], _BYTES_OR_TEXT)
    )
