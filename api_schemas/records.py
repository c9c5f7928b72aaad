"""Fast conversion between v2 JSON bodies and records: the data-plane hot path.

Produce bodies are validated by hand rather than through pydantic so that a
1000-record request costs one orjson parse plus one tight loop; the pydantic
models in ``v2`` document the same shape. Errors name the offending record.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from service.core.models import EmbeddedFormat, NewRecord, Record, TopicPartition
from service.errors import InvalidPayload

from .formats import DECODERS, ENCODERS, decode_headers, encode_headers

_RECORD_KEYS = frozenset({"key", "value", "partition", "headers", "timestamp"})
_MAX_TS = 2**63 - 1


def parse_timestamp(raw: Any, where: str) -> int | None:
    """Milliseconds since epoch from an integer or an ISO 8601 string."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise InvalidPayload(f"{where}: timestamp must be milliseconds since epoch or ISO 8601")
    if isinstance(raw, int):
        if not 0 <= raw <= _MAX_TS:
            raise InvalidPayload(f"{where}: timestamp {raw} is out of range")
        return raw
    if isinstance(raw, str):
        try:
            dt = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidPayload(f"{where}: {raw[:64]!r} is not an ISO 8601 timestamp") from exc
        if dt.tzinfo is None:
            raise InvalidPayload(f"{where}: ISO 8601 timestamp needs a time zone (e.g. 'Z')")
        ms = int(dt.timestamp() * 1000)
        if ms < 0:
            raise InvalidPayload(f"{where}: timestamp is before 1970")
        return ms
    raise InvalidPayload(f"{where}: timestamp must be milliseconds since epoch or ISO 8601")


def parse_produce(body: Any, fmt: EmbeddedFormat) -> tuple[list[NewRecord], list[int | None] | None]:
    """Records and their explicit partitions (None if no record names one)."""
    if not isinstance(body, dict):
        raise InvalidPayload("The body must be a JSON object with a 'records' list.")
    raw_records = body.get("records")
    if not isinstance(raw_records, list):
        raise InvalidPayload("'records' must be a list of records.")
    if not raw_records:
        raise InvalidPayload("'records' must hold at least one record.")
    decode = DECODERS[fmt]
    records: list[NewRecord] = []
    explicit: list[int | None] = []
    any_explicit = False
    for i, raw in enumerate(raw_records):
        if not isinstance(raw, dict):
            raise InvalidPayload(f"records[{i}] must be an object.")
        if not _RECORD_KEYS.issuperset(raw):
            extra = sorted(set(raw) - _RECORD_KEYS)
            raise InvalidPayload(f"records[{i}]: unknown field(s) {', '.join(extra)}.")
        partition = raw.get("partition")
        if partition is not None:
            if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
                raise InvalidPayload(f"records[{i}].partition must be a non-negative integer.")
            any_explicit = True
        explicit.append(partition)
        headers = raw.get("headers")
        records.append(
            NewRecord(
                decode(raw.get("key"), f"records[{i}].key"),
                decode(raw.get("value"), f"records[{i}].value"),
                decode_headers(headers, f"records[{i}].headers") if headers else (),
                parse_timestamp(raw.get("timestamp"), f"records[{i}].timestamp"),
            )
        )
    return records, explicit if any_explicit else None


def render_records(
    fmt: EmbeddedFormat, polled: Iterable[tuple[TopicPartition, Record]]
) -> list[dict[str, Any]]:
    """v2 consumer records, with brokergate's ``timestamp`` and ``headers``."""
    encode = ENCODERS[fmt]
    return [
        {
            "topic": tp.topic,
            "key": encode(r.key),
            "value": encode(r.value),
            "partition": tp.partition,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "headers": encode_headers(r.headers) if r.headers else [],
        }
        for tp, r in polled
    ]
