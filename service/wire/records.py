"""Fast conversion between v2 JSON bodies and records: the data-plane hot path.

Produce bodies are validated by hand rather than through pydantic so that a
1000-record request costs one orjson parse plus one tight pass; the pydantic
models in ``v2`` document the same shape. Two ways read a body's records: one
pass for the most common body, values alone, which answers None for any other;
and the record loop, which reads every body and names the record it refuses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Any, cast

import orjson
import pybase64

from service.core.models import (
    EmbeddedFormat,
    Header,
    NewRecords,
    PlainFormat,
    RecordColumns,
    TopicPartition,
)
from service.core.rules import record_size
from service.core.schemas.model import ConversionError as CodecError
from service.errors import BadRequest, ConversionError, InvalidPayload, PayloadTooLarge

from .formats import DECODERS, SHOWN, decode_headers, encode_headers, is_schema_format, shown
from .timestamps import epoch_millis

_RECORD_KEYS = frozenset({"key", "value", "partition", "headers", "timestamp"})


@dataclass(slots=True)
class ParsedProduce:
    records: NewRecords
    partitions: list[int | None] | None  # None when no record names a partition
    payload_bytes: int  # the records' sizes (rules.record_size), for metrics


def _records_of(body: Any, max_records: int | None = None) -> list[Any]:
    # A body of the wrong shape is what Confluent's JSON binding refuses: its 400.
    if not isinstance(body, dict):
        raise BadRequest(f"Cannot deserialize a produce request from {json_kind(body)}: it is a JSON object.")
    raw_records = body.get("records")
    if raw_records is not None and not isinstance(raw_records, list):
        raise BadRequest(
            f"Cannot deserialize 'records' from {json_kind(raw_records)}: it is a list of records."
        )
    if raw_records is None:  # absent or null: an empty list, as Confluent binds it
        raw_records = []
    if not raw_records:
        raise InvalidPayload("'records' must hold at least one record.")
    if max_records is not None and len(raw_records) > max_records:
        raise PayloadTooLarge(
            f"A request carries at most {max_records} records, not {len(raw_records)}; send several."
        )
    return raw_records


def json_kind(value: Any) -> str:
    """What a JSON value is, as a binding error names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({shown(value)})"
    return "a list" if isinstance(value, list) else "an object"


_INT_TEXT = re.compile(r"[+-]?[0-9]{1,10}")


def bound_int(value: Any, where: str) -> int | None:
    """An integer field as Confluent's JSON binding (Jackson) takes it: a JSON integer, or a string
    of one (``"1"`` is 1); anything else is its 400."""
    if value is None or type(value) is int:
        return value
    if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
        number = int(value)
        if -(2**31) <= number < 2**31:
            return number
    raise BadRequest(f"Cannot deserialize {where} from {json_kind(value)}: it is an integer.")


def parse_produce(
    body: Any,
    fmt: PlainFormat,
    *,
    max_record_bytes: int,
    max_records: int | None = None,
    max_headers: int | None = None,
) -> ParsedProduce:
    """Records, their explicit partitions and their payload size, or a 4xx naming the bad record.

    A record's size is ``rules.record_size`` (key, value and headers); with ``max_records`` a
    request may carry at most that many records, with ``max_headers`` a record that many headers.
    The most common body, values alone, is read in one pass (``_values_alone``); any other, or
    one that pass cannot take, by the record loop that names what it refuses.
    """
    raw_records = _records_of(body, max_records)
    parsed = _values_alone(raw_records, fmt, max_record_bytes)
    if parsed is not None:
        return parsed
    decode = DECODERS[fmt]
    return _careful(raw_records, decode, decode, max_record_bytes, max_headers)


@dataclass(frozen=True, slots=True)
class SchemaChoice:
    """What a schema-format produce request says of its schemas: for keys and for values, the
    schema's text or its registry id (or neither), and whether any record needs it."""

    key_schema: str | None
    key_schema_id: int | None
    value_schema: str | None
    value_schema_id: int | None
    has_keys: bool
    has_values: bool


def schema_choice(body: Any) -> SchemaChoice:
    """The schemas a request in the ``avro``, ``jsonschema`` or ``protobuf`` format names."""
    raw_records = _records_of(body)
    fields: dict[str, Any] = {}
    for side in ("key", "value"):
        text = body.get(f"{side}_schema")
        schema_id = bound_int(body.get(f"{side}_schema_id"), f"'{side}_schema_id'")
        if text is not None and not isinstance(text, str):
            raise BadRequest(f"Cannot deserialize '{side}_schema' from {json_kind(text)}: it is a string.")
        if text is not None and not text.strip():
            raise InvalidPayload(f"'{side}_schema' must be the schema's text, a non-empty string.")
        if schema_id is not None and not 0 <= schema_id < 2**31:
            raise InvalidPayload(f"'{side}_schema_id' must be a schema id, an integer from 0.")
        if text is not None and schema_id is not None:
            # Confluent's SchemaManager: "Unsupported argument", a 400
            raise BadRequest(f"Bad Request: give '{side}_schema' or '{side}_schema_id', not both.")
        fields[f"{side}_schema"], fields[f"{side}_schema_id"] = text, schema_id
    return SchemaChoice(
        **fields,
        has_keys=any(isinstance(r, dict) and r.get("key") is not None for r in raw_records),
        has_values=any(isinstance(r, dict) and r.get("value") is not None for r in raw_records),
    )


def encode_produce(
    body: Any,
    encode_key: Callable[[Any], bytes] | None,
    encode_value: Callable[[Any], bytes] | None,
    *,
    max_record_bytes: int,
    max_records: int | None = None,
    max_headers: int | None = None,
) -> ParsedProduce:
    """``parse_produce`` for the schema formats: each key and value encoded by its schema's
    ``encode`` (``None``: the request has no schema for it, so every one must be null)."""
    raw_records = _records_of(body, max_records)
    return _careful(
        raw_records, _schema_decode(encode_key), _schema_decode(encode_value), max_record_bytes, max_headers
    )


def _schema_decode(encode: Callable[[Any], bytes] | None) -> Decode:
    def decode(value: Any, where: str) -> bytes | None:
        if value is None:
            return None
        if encode is None:  # schema_choice found none, so no record has one: a caller's mistake
            raise InvalidPayload(f"{where}: the request has no schema for it.")
        try:
            return encode(value)
        except CodecError as exc:  # Confluent's record serializer: a 400, the codec's words
            raise BadRequest(f"Bad Request: {where}: {exc}") from None

    return decode


def _values_alone(raw_records: list[Any], fmt: PlainFormat, limit: int) -> ParsedProduce | None:
    """The records of a body whose every record is a value and nothing else, none null and each
    within ``limit`` bytes, read without a ``NewRecord`` per value nor the record loop's checks of
    fields the records do not have (four times the value's own decoding); None for any other
    body, or a value to refuse, which the record loop then names. The checks are C loops over
    the whole list (``map``, ``set``): no Python step per record but the value's own decoding."""
    if set(map(type, raw_records)) != {dict} or set(map(len, raw_records)) != {1}:
        return None
    texts = list(map(dict.get, raw_records, repeat("value")))
    if None in texts:  # a null value, or a record of one field that is not "value"
        return None
    values = _VALUES[fmt](texts)
    if values is None:
        return None
    sizes = list(map(len, values))
    if max(sizes) > limit:
        return None
    return ParsedProduce(NewRecords(cast(list[bytes | None], values)), None, sum(sizes))


def _binary_values(texts: list[Any]) -> list[bytes] | None:
    if set(map(type, texts)) != {str}:
        return None
    decode = pybase64.b64decode
    try:
        # (s, altchars, validate) by position: pybase64 reads a keyword argument slower than it decodes 100 B
        return [decode(text, None, True) for text in texts]
    except ValueError:  # not base64 (binascii.Error is one)
        return None


def _json_values(texts: list[Any]) -> list[bytes] | None:
    decode = DECODERS["json"]
    try:
        return [cast(bytes, decode(text, "")) for text in texts]
    except ConversionError:  # a value JSON cannot hold (an integer beyond 64 bits)
        return None


def _string_values(texts: list[Any]) -> list[bytes] | None:
    if set(map(type, texts)) != {str}:
        return None
    return [text.encode("utf-8", "surrogatepass") for text in texts]


# Each plain format's values of ``_values_alone``, or None when one is the record loop's to refuse.
_VALUES: dict[PlainFormat, Callable[[list[Any]], list[bytes] | None]] = {
    "binary": _binary_values,
    "json": _json_values,
    "string": _string_values,
}


Decode = Callable[[Any, str], bytes | None]  # a key's or value's JSON to bytes; ``where`` names it


def _careful(
    raw_records: list[Any], decode_key: Decode, decode_value: Decode, limit: int, max_headers: int | None
) -> ParsedProduce:
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers_of: list[tuple[Header, ...]] = []
    timestamps: list[int | None] = []
    explicit: list[int | None] = []
    any_explicit = False
    total = 0
    for i, raw in enumerate(raw_records):
        if not isinstance(raw, dict):
            raise BadRequest(
                f"Cannot deserialize records[{i}] from {json_kind(raw)}: a record is a JSON object."
            )
        if not _RECORD_KEYS.issuperset(raw):
            extra = sorted(set(raw) - _RECORD_KEYS)
            raise InvalidPayload(f"records[{i}]: unknown field(s) {', '.join(extra)}.")
        partition = bound_int(raw.get("partition"), f"records[{i}].partition")
        if partition is not None:
            if partition < 0:
                raise InvalidPayload(f"records[{i}].partition must be a non-negative integer.")
            any_explicit = True
        explicit.append(partition)
        key = decode_key(raw.get("key"), f"records[{i}].key")
        value = decode_value(raw.get("value"), f"records[{i}].value")
        raw_headers = raw.get("headers")
        if max_headers is not None and isinstance(raw_headers, list) and len(raw_headers) > max_headers:
            raise PayloadTooLarge(
                f"records[{i}] has {len(raw_headers)} headers; a record has at most {max_headers}."
            )
        headers = decode_headers(raw_headers, f"records[{i}].headers") if raw_headers else ()
        size = record_size(key, value, headers)  # headers count toward the limit, as in Kafka
        if size > limit:
            raise PayloadTooLarge(f"records[{i}] is larger than the record size limit of {limit} bytes.")
        total += size
        keys.append(key)
        values.append(value)
        headers_of.append(headers)
        stamp = raw.get("timestamp")
        timestamps.append(None if stamp is None else epoch_millis(stamp, f"records[{i}].timestamp"))
    records = NewRecords.trimmed(values, keys, headers_of, timestamps)
    return ParsedProduce(records, explicit if any_explicit else None, total)


def render_records(
    fmt: EmbeddedFormat, polled: Iterable[tuple[TopicPartition, RecordColumns]]
) -> orjson.Fragment:
    """``records_array`` to embed in a JSON answer."""
    return orjson.Fragment(records_array(fmt, polled))


def records_array(fmt: EmbeddedFormat, polled: Iterable[tuple[TopicPartition, RecordColumns]]) -> bytes:
    """v2 consumer records, with brokergate's ``timestamp`` and ``headers`` (and a share group's
    ``delivery_count``), as one JSON array."""
    return b"".join(render_slices(fmt, polled, slice_bytes=_WHOLE))


def render_slices(
    fmt: EmbeddedFormat, polled: Iterable[tuple[TopicPartition, RecordColumns]], *, slice_bytes: int
) -> Iterator[bytes]:
    """``records_array`` in pieces, each rendering about ``slice_bytes`` of records
    (at least one record), so that a large poll can be sent while it is rendered."""
    opening = b"["
    for tp, records in polled:
        start = 0
        while start < len(records):
            end = _slice_end(records.sizes, start, slice_bytes)
            run = records if start == 0 and end == len(records) else records[start:end]
            yield opening + objects(fmt, tp, run)
            opening = b","
            start = end
    yield b"[]" if opening == b"[" else b"]"


def objects(fmt: EmbeddedFormat, tp: TopicPartition, records: RecordColumns) -> bytes:
    """The v2 consumer records of one partition, comma-separated, each as orjson writes the dict
    of the API's shape (``v2.ConsumerRecord``), byte for byte, without a dict per record.

    Each key and value is shown as its format shows it (``formats.SHOWN``), a schema format's from
    the JSON its schema decoded (``RecordColumns.decoded``); a share group's records end with how
    many times each was delivered (``RecordColumns.deliveries``). A value the format cannot show
    is its ``ConversionError``, and nothing is written.
    """
    keys: Iterator[bytes]
    values: Iterator[bytes]
    if records.decoded is not None:
        keys, values = (map(json_text, column) for column in records.decoded)
    elif is_schema_format(fmt):
        raise ConversionError("A record of a schema format was not decoded; read it with a binary consumer.")
    else:
        show = SHOWN[fmt]
        # most records have no key: then no key is shown one by one
        keys = repeat(b"null") if records.keys.count(None) == len(records) else show(records.keys)
        values = show(records.values)
    head = b'{"topic":' + orjson.dumps(tp.topic) + b',"key":'
    tail = b',"partition":%d,"offset":' % tp.partition
    deliveries = records.deliveries
    ends = repeat(b"}") if deliveries is None else (b',"delivery_count":%d}' % n for n in deliveries)
    dumps = orjson.dumps
    # not strict: a ``repeat`` is endless; the lists end it
    rows = zip(keys, values, records.offsets, records.timestamps, records.headers, ends, strict=False)
    return b",".join(
        [
            b'%s%s,"value":%s%s%d,"timestamp":%d,"headers":%s%s'
            % (head, k, v, tail, o, t, dumps(encode_headers(h)) if h else b"[]", end)
            for k, v, o, t, h, end in rows
        ]
    )


def json_text(value: Any) -> bytes:
    """``value`` as JSON text; what ``orjson`` refuses (an integer beyond 64 bits, nesting past 255
    levels: a schema's decoded value may hold either) through the standard library, exactly."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:  # the slow, exact way
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


_WHOLE = 1 << 62  # one slice: nothing is sent before the whole array is rendered


def _slice_end(sizes: list[int], start: int, slice_bytes: int) -> int:
    """The end of the run of records from ``start`` that renders about ``slice_bytes`` (one at least)."""
    if slice_bytes >= _WHOLE:
        return len(sizes)
    budget = slice_bytes
    end = start
    while end < len(sizes) and (budget > 0 or end == start):
        budget -= sizes[end] + 64  # base64 adds a third, the JSON around a record about 64 B
        end += 1
    return end
