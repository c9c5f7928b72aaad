"""A Kafka fetch's records (``RecordColumns``) written as v2 consumer records, from the columns.

The same text as ``records``' ``_binary_objects`` and ``_text_objects`` write for a list of
``Record`` (byte for byte, as ``tests/unit/test_render_records.py`` proves), walking the
columns with ``zip``: no ``Record`` is built per record, where decoding them alone cost as much
as reading the batch. The loops are written out twice on purpose: read off a list of ``Record``
through one shared iterator of fields, the embedded log's records rendered 5-8 % slower.

Used by ``records.render_slices``; pure.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pybase64

from service.core.models import Header, PlainFormat, RecordColumns, TopicPartition
from service.errors import ConversionError

from .formats import NOT_JSON, NOT_UTF8, encode_headers

# A record's offset, timestamp, key, value and headers.
Row = tuple[int, int, bytes | None, bytes | None, tuple[Header, ...]]


def _rows(records: RecordColumns) -> Iterator[Row]:
    return zip(
        records.offsets, records.timestamps, records.keys, records.values, records.headers, strict=True
    )


def binary(tp: TopicPartition, records: RecordColumns) -> str:
    """The binary format's objects, comma-separated: keys and values in base64 (no escaping)."""
    encode = pybase64.b64encode_as_string
    head = '{"topic":' + orjson.dumps(tp.topic).decode() + ',"key":'
    after_value = f',"partition":{tp.partition},"offset":'
    out: list[str] = []
    add = out.append
    for offset, timestamp, key, value, headers in _rows(records):
        k = "null" if key is None else f'"{encode(key)}"'
        v = "null" if value is None else f'"{encode(value)}"'
        if headers:  # rare: the common record's text has one field fewer to fill
            h = orjson.dumps(encode_headers(headers)).decode()
            add(f'{head}{k},"value":{v}{after_value}{offset},"timestamp":{timestamp},"headers":{h}}}')
        else:
            add(f'{head}{k},"value":{v}{after_value}{offset},"timestamp":{timestamp},"headers":[]}}')
    return ",".join(out)


def text(fmt: PlainFormat, tp: TopicPartition, records: RecordColumns) -> bytes:
    """The json or string format's objects, comma-separated: a json key or value embedded as
    stored once ``orjson.loads`` accepts it, a string one escaped by ``orjson.dumps``; one the
    format cannot show is ``records``' ``ConversionError``."""
    head = b'{"topic":' + orjson.dumps(tp.topic) + b',"key":'
    tail = b',"partition":%d,"offset":' % tp.partition
    out: list[bytes] = []
    add = out.append
    dumps = orjson.dumps
    if fmt == "json":
        check = orjson.loads
        try:
            for offset, timestamp, key, value, headers in _rows(records):
                if key is None:
                    key = b"null"
                else:
                    check(key)
                if value is None:
                    value = b"null"
                else:
                    check(value)
                h = dumps(encode_headers(headers)) if headers else b"[]"
                add(
                    b'%s%s,"value":%s%s%d,"timestamp":%d,"headers":%s}'
                    % (head, key, value, tail, offset, timestamp, h)
                )
        except orjson.JSONDecodeError as exc:
            raise ConversionError(NOT_JSON) from exc
        return b",".join(out)
    try:
        for offset, timestamp, key, value, headers in _rows(records):
            k = b"null" if key is None else dumps(key.decode())
            v = b"null" if value is None else dumps(value.decode())
            h = dumps(encode_headers(headers)) if headers else b"[]"
            add(
                b'%s%s,"value":%s%s%d,"timestamp":%d,"headers":%s}' % (head, k, v, tail, offset, timestamp, h)
            )
    except UnicodeDecodeError as exc:
        raise ConversionError(NOT_UTF8) from exc
    return b",".join(out)
