"""Decoding the record sets of Kafka fetch responses into ``RecordColumns``.

Pure functions over aiokafka's own readers (``MemoryRecords`` walks the
batches of a response, ``DefaultRecordBatch`` / ``LegacyRecordBatch`` iterate a
batch's records, decompressing as needed). What Kafka's consumer does is done
here too: CRCs are checked, control batches (transaction markers) are skipped,
and records before the requested offset are dropped (Kafka answers with whole
batches, so a fetch at offset 5 may start at the batch holding offsets 0-9).
A truncated batch at the end of a response (the broker cuts at the size limit)
is ignored, as the next fetch starts there.

Used by ``Fetcher``; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.record.memory_records import MemoryRecords

from service.core.models import Header, RecordColumns
from service.core.rules import record_size

from .errors import corrupt_records

_NO_HEADERS: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class Decoded:
    """The records at or after the requested offset, and where the next fetch should start.

    ``next_offset`` is past the last complete batch seen (control batches included),
    so a fetch never asks twice for a batch it has consumed; it equals the
    requested offset when the response held no complete batch.
    """

    records: RecordColumns
    next_offset: int


def decode(data: bytes | memoryview | None, min_offset: int) -> Decoded:
    """Every record with offset >= ``min_offset`` in ``data`` (a fetch response's record set).

    The records are kept as columns (``RecordColumns``): a few appends per record, no object of
    our own, and each record's size measured in one pass over the values when, as usual, no
    record has a key or headers. Raises ``errors.corrupt_records`` for a batch whose CRC does not
    match, and aiokafka's ``UnsupportedCodecError`` for a compression this process cannot read
    (``errors.translate`` words both).
    """
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[tuple[Header, ...]] = []
    next_offset = min_offset
    if not data:
        return Decoded(RecordColumns.empty(), next_offset)
    add_offset, add_ts, add_key, add_value, add_headers = (
        offsets.append,
        timestamps.append,
        keys.append,
        values.append,
        headers.append,
    )
    none = _NO_HEADERS
    batches: Any = MemoryRecords(bytes(data))
    while batches.has_next():
        batch = batches.next_batch()
        if batch is None:
            break
        if not batch.validate_crc():
            raise corrupt_records(f"batch at offset {_base_offset(batch)} fails its CRC check")
        if batch.is_control_batch:
            pass
        elif type(batch) is DefaultRecordBatch:  # v2: a timestamp on every record
            for rec in batch:
                add_offset(rec.offset)
                add_ts(rec.timestamp)
                add_key(rec.key)
                add_value(rec.value)
                h = rec.headers
                add_headers(tuple(h) if h else none)
        else:  # the old formats (v0, v1): no headers, v0 no timestamps
            for rec in batch:
                ts = rec.timestamp
                add_offset(rec.offset)
                add_ts(ts if ts is not None else -1)
                add_key(rec.key)
                add_value(rec.value)
                add_headers(none)
        next_offset = max(next_offset, batch.next_offset)
    columns = RecordColumns(offsets, timestamps, keys, values, headers, _sizes(keys, values, headers))
    if offsets and offsets[0] < min_offset:  # Kafka answers whole batches: the first may start earlier
        keep = [i for i, offset in enumerate(offsets) if offset >= min_offset]
        columns = _pick(columns, keep)
    return Decoded(columns, next_offset)


def _sizes(
    keys: list[bytes | None], values: list[bytes | None], headers: list[tuple[Header, ...]]
) -> list[int]:
    """Each record's ``Record.size``: one pass of ``len`` when no record has a key, headers or null value."""
    n = len(values)
    if keys.count(None) == n and headers.count(_NO_HEADERS) == n and None not in values:
        return list(map(len, values))  # type: ignore[arg-type]  # no None among them
    return [record_size(k, v, h) for k, v, h in zip(keys, values, headers, strict=True)]


def _pick(columns: RecordColumns, keep: list[int]) -> RecordColumns:
    if len(keep) == len(columns):
        return columns
    if keep and keep[-1] - keep[0] == len(keep) - 1:  # one run, as always in a log's order
        return columns[keep[0] : keep[-1] + 1]
    return RecordColumns(
        [columns.offsets[i] for i in keep],
        [columns.timestamps[i] for i in keep],
        [columns.keys[i] for i in keep],
        [columns.values[i] for i in keep],
        [columns.headers[i] for i in keep],
        [columns.sizes[i] for i in keep],
    )


def _base_offset(batch: Any) -> object:
    return getattr(batch, "base_offset", "?")
