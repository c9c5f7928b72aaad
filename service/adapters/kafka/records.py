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

from aiokafka import errors as ke
from aiokafka.record.memory_records import MemoryRecords

from service.core.models import Header, Record


@dataclass(frozen=True, slots=True)
class Decoded:
    """The records at or after the requested offset, and where the next fetch should start.

    ``next_offset`` is past the last complete batch seen (control batches included),
    so a fetch never asks twice for a batch it has consumed; it equals the
    requested offset when the response held no complete batch.
    """

    records: list[Record]
    next_offset: int
    size: int  # sum of Record.size, the unit of max_bytes


def decode(data: bytes | memoryview | None, min_offset: int) -> Decoded:
    """Every record with offset >= ``min_offset`` in ``data`` (a fetch response's record set).

    Raises aiokafka's ``CorruptRecordException`` for a batch whose CRC does not
    match and ``UnsupportedCodecError`` for a compression this process cannot read.
    """
    records: list[Record] = []
    next_offset = min_offset
    size = 0
    if not data:
        return Decoded(records, next_offset, size)
    batches: Any = MemoryRecords(bytes(data))
    while batches.has_next():
        batch = batches.next_batch()
        if batch is None:
            break
        if not batch.validate_crc():
            raise ke.CorruptRecordException(f"batch at offset {_base_offset(batch)} fails its CRC check")
        if not batch.is_control_batch:
            for rec in batch:
                if rec.offset < min_offset:
                    continue
                headers: tuple[Header, ...] = tuple(rec.headers) if rec.headers else ()
                timestamp = rec.timestamp if rec.timestamp is not None else -1
                record = Record(rec.offset, timestamp, rec.key, rec.value, headers)
                records.append(record)
                size += record.size
        next_offset = max(next_offset, batch.next_offset)
    return Decoded(records, next_offset, size)


def _base_offset(batch: Any) -> object:
    return getattr(batch, "base_offset", "?")


def take(records: list[Record], budget: int, *, force_first: bool) -> int:
    """How many of ``records`` fit in ``budget`` bytes (``Record.size``), in order.

    With ``force_first`` the first record is taken even if it alone exceeds the
    budget: a reader must never stall behind one large record.
    """
    used = 0
    n = 0
    for record in records:
        size = record.size
        if used + size > budget and not (force_first and n == 0):
            break
        used += size
        n += 1
    return n
