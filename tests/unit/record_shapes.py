"""The v2 consumer record as a dict per record, written by ``orjson``: the shape the renderer's
text must equal, byte for byte (``service.wire.records.objects`` writes it without the dicts)."""

from __future__ import annotations

from typing import Any

import orjson
import pybase64

from service.core.models import Record, RecordColumns, TopicPartition
from service.core.shares.delivered import Delivered
from service.errors import ConversionError
from service.wire.formats import NOT_JSON, NOT_UTF8, encode_headers
from service.wire.records import json_text

_STORED = object()  # a key or value shown from its stored bytes, by its format


def record_dict(
    fmt: str, tp: TopicPartition, r: Record, key_json: Any = _STORED, value_json: Any = _STORED
) -> dict[str, Any]:
    """One consumer record as the v2 API shows it; a schema format's from its decoded JSON."""
    return {
        "topic": tp.topic,
        "key": _shown(fmt, r.key) if key_json is _STORED else orjson.Fragment(json_text(key_json)),
        "value": _shown(fmt, r.value) if value_json is _STORED else orjson.Fragment(json_text(value_json)),
        "partition": tp.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "headers": encode_headers(r.headers) if r.headers else [],
    }


def _shown(fmt: str, data: bytes | None) -> Any:
    if data is None:
        return None
    if fmt == "binary":
        return pybase64.b64encode_as_string(data)
    if fmt == "json":
        try:
            orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ConversionError(NOT_JSON) from exc
        return orjson.Fragment(data)
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise ConversionError(NOT_UTF8) from exc


def through_dicts(fmt: str, polled: list[tuple[TopicPartition, list[Record]]]) -> bytes:
    """The answer as a dict per record and ``orjson`` write it."""
    return orjson.dumps([record_dict(fmt, tp, r) for tp, records in polled for r in records])


def columns(polled: list[tuple[TopicPartition, list[Record]]]) -> list[tuple[TopicPartition, RecordColumns]]:
    """``polled`` as a read hands it out: each partition's records as columns."""
    return [(tp, RecordColumns.of(records)) for tp, records in polled]


def delivered_dicts(
    fmt: str, delivered: list[Delivered], decoded: list[tuple[Any, Any]] | None = None
) -> bytes:
    """A share consumer's poll as a dict per record (with its ``delivery_count``) and ``orjson``;
    ``decoded``: each record's key and value JSON, for a schema format."""
    objects = [
        {
            **record_dict(fmt, d.tp, d.record, *([] if decoded is None else decoded[i])),
            "delivery_count": d.deliveries,
        }
        for i, d in enumerate(delivered)
    ]
    return orjson.dumps(objects)
