"""Decoding the record sets of Kafka fetch responses into ``Record`` values.

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

from aiokafka.record.memory_records import MemoryRecords

from service.core.models import Header, Record, make_record
from service.core.rules import record_size

from .errors import corrupt_records


@dataclass(frozen=True, slots=True)
class Decoded:
    """The records at or after the requested offset, and where the next fetch should start.

    ``next_offset`` is past the last complete batch seen (control batches included),
    so a fetch never asks twice for a batch it has consumed; it equals the
    requested offset when the response held no complete batch.
    """

    records: list[Record]
    sizes: list[int]  # each record's ``Record.size`` (the unit of max_bytes), computed once here
    next_offset: int


def decode(data: bytes | memoryview | None, min_offset: int) -> Decoded:
    """Every record with offset >= ``min_offset`` in ``data`` (a fetch response's record set).

    Raises ``errors.corrupt_records`` for a batch whose CRC does not match, and
    aiokafka's ``UnsupportedCodecError`` for a compression this process cannot
    read (``errors.translate`` words both).
    """
    records: list[Record] = []
    sizes: list[int] = []
    next_offset = min_offset
    if not data:
        return Decoded(records, sizes, next_offset)
    make, add, add_size = make_record, records.append, sizes.append
    batches: Any = MemoryRecords(bytes(data))
    while batches.has_next():
        batch = batches.next_batch()
        if batch is None:
            break
        if not batch.validate_crc():
            raise corrupt_records(f"batch at offset {_base_offset(batch)} fails its CRC check")
        if not batch.is_control_batch:
            for rec in batch:
                offset = rec.offset
                if offset < min_offset:
                    continue
                key, value, timestamp = rec.key, rec.value, rec.timestamp
                headers: tuple[Header, ...] = tuple(rec.headers) if rec.headers else ()
                add(make(offset, timestamp if timestamp is not None else -1, key, value, headers))
                add_size(record_size(key, value, headers))
        next_offset = max(next_offset, batch.next_offset)
    return Decoded(records, sizes, next_offset)


def _base_offset(batch: Any) -> object:
    return getattr(batch, "base_offset", "?")
