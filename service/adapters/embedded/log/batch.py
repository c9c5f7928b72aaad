"""Record batch codec of the embedded log: bytes in, bytes out, no I/O.

One ``append`` call becomes one batch. Layout (all integers big-endian)::

    batch header, 46 bytes
      0  base_offset      int64   offset of the first record; NOT covered by the CRC, so
                                  the partition can assign it after encoding, under its lock
      8  batch_length     int32   bytes after this field (crc .. last record)
     12  crc              uint32  CRC32C of bytes [16, 12 + batch_length)
     16  magic            int8    format version, 1
     17  attributes       int8    reserved, 0
     18  record_count     int32   >= 1; record i has offset base_offset + i
     22  append_time      int64   ms, the log's clock when the batch was appended
     30  first_timestamp  int64   ms, timestamp of the first record
     38  max_timestamp    int64   ms, largest record timestamp in the batch
    records, one after another
      0  record_length    int32   bytes after this field
      4  timestamp        int64   ms
     12  key_length       int32   -1 for a null key
     16  value_length     int32   -1 for a null value
     20  header_count     int32
     24  key bytes, value bytes, then per header:
         name_length uint16, name (UTF-8), value_length int32 (-1 = null), value bytes

Encoding and decoding are the produce/fetch hot path: precompiled ``Struct``
objects, one ``b"".join`` per batch, no per-record objects on the way in.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, cast

from crc32c import crc32c

from service.adapters.format_versions import LOG_BATCH_FORMAT
from service.core.models import Header, NewRecord, NewRecords, RecordColumns
from service.core.rules import INT64_MAX, INT64_MIN, record_size

MAGIC: Final = LOG_BATCH_FORMAT

HEAD: Final = struct.Struct(">qiI")  # base_offset, batch_length, crc
META: Final = struct.Struct(">bbiqqq")  # magic, attributes, count, append_time, first_ts, max_ts
HEADER: Final = struct.Struct(">qiIbbiqqq")  # HEAD + META, for decoding in one call
REC: Final = struct.Struct(">iqiii")  # record_length, timestamp, key_len, value_len, header_count
HDR_NAME: Final = struct.Struct(">H")
HDR_VALUE: Final = struct.Struct(">i")

HEADER_SIZE: Final = HEADER.size  # 46
LENGTH_PREFIX: Final = 12  # base_offset + batch_length: the part of a batch batch_length excludes
CRC_START: Final = 16  # the CRC covers the batch from here to its end
MIN_BATCH_LENGTH: Final = HEADER_SIZE - LENGTH_PREFIX + REC.size  # one empty record
MAX_BATCH_LENGTH: Final = 2**31 - 1
REC_PREFIX: Final = REC.size  # 24
_REC_FIXED: Final = REC.size - 4  # what record_length counts besides key, value and headers


class BatchError(ValueError):
    """Root of the codec's errors."""


class CorruptBatch(BatchError):
    """Bytes that are not a valid batch: bad length, magic, CRC or record layout."""


class NewerBatch(CorruptBatch):
    """A batch header of a magic above ``MAGIC``: a newer release's batch if its CRC holds
    (``scan`` checks), else damage like any other."""

    def __init__(self, header: BatchHeader, magic: int) -> None:
        super().__init__(f"unknown batch magic {magic}")
        self.header = header
        self.magic = magic


class RecordTooLarge(BatchError):
    """One encoded record is larger than the limit the caller gave."""


class InvalidRecord(BatchError):
    """A record that cannot be encoded (timestamp out of range, header name too long, ...)."""


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """A batch ready to write except for its 16-byte head (base offset, length, CRC).

    ``body`` is everything the CRC covers; the writer prepends
    ``HEAD.pack(base_offset, 4 + len(body), crc)``.
    """

    body: bytes
    crc: int
    count: int
    append_time: int
    first_timestamp: int
    max_timestamp: int

    @property
    def size(self) -> int:
        """Bytes the batch takes on disk."""
        return CRC_START + len(self.body)

    def head(self, base_offset: int) -> bytes:
        return HEAD.pack(base_offset, 4 + len(self.body), self.crc)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    length: int
    crc: int
    count: int
    append_time: int
    first_timestamp: int
    max_timestamp: int

    @property
    def size(self) -> int:
        return LENGTH_PREFIX + self.length

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


def _encode_headers(headers: tuple[Header, ...]) -> bytes:
    parts: list[bytes] = []
    for name, value in headers:
        raw = name.encode("utf-8")
        if len(raw) > 0xFFFF:
            raise InvalidRecord(f"header name longer than 65535 bytes: {name[:40]!r}...")
        parts.append(HDR_NAME.pack(len(raw)))
        parts.append(raw)
        if value is None:
            parts.append(HDR_VALUE.pack(-1))
        else:
            parts.append(HDR_VALUE.pack(len(value)))
            parts.append(value)
    return b"".join(parts)


def encode_batch(
    records: Sequence[NewRecord],
    now_ms: int,
    *,
    max_record_bytes: int = MAX_BATCH_LENGTH,
) -> EncodedBatch:
    """Encode ``records`` (at least one) as one batch; a record without a timestamp gets ``now_ms``.

    Raises ``RecordTooLarge`` when a record's encoded size (``REC_PREFIX`` plus
    key, value and headers) exceeds ``max_record_bytes``, ``InvalidRecord`` for
    unencodable fields. Values alone (``NewRecords.values_alone``) are encoded from their values.
    """
    if not records:
        raise InvalidRecord("a batch needs at least one record")
    if not INT64_MIN <= now_ms <= INT64_MAX:
        raise InvalidRecord(f"append time out of range: {now_ms}")
    limit = max_record_bytes - 4
    records = NewRecords.of(records)
    values = records.values
    if records.values_alone and None not in values:
        present = cast(list[bytes], values)
        if max(map(len, present)) + _REC_FIXED <= limit:
            # the same bytes as the loop below writes, a record's prefix shared by the values of
            # one length; a value too large goes through the loop, which names it
            return _batch(_value_parts(present, now_ms), len(records), now_ms, now_ms, now_ms)
    parts: list[bytes] = [b""]  # parts[0] becomes META once the timestamps are known
    append = parts.append
    pack = REC.pack
    max_ts = INT64_MIN
    first = records[0].timestamp
    first_ts = now_ms if first is None else first
    for key, value, record_headers, stamp in records.rows():
        ts = now_ms if stamp is None else stamp
        klen = -1 if key is None else len(key)
        vlen = -1 if value is None else len(value)
        rlen = _REC_FIXED + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
        if record_headers:
            hbytes = _encode_headers(record_headers)
            rlen += len(hbytes)
            hcount = len(record_headers)
        else:
            hbytes = b""
            hcount = 0
        if rlen > limit:
            raise RecordTooLarge(f"record of {rlen + 4} bytes exceeds max.message.bytes={max_record_bytes}")
        try:
            append(pack(rlen, ts, klen, vlen, hcount))
        except struct.error as exc:
            raise InvalidRecord(f"timestamp out of range: {ts}") from exc
        if key:
            append(key)
        if value:
            append(value)
        if hcount:
            append(hbytes)
        if ts > max_ts:
            max_ts = ts
    return _batch(parts, len(records), now_ms, first_ts, max_ts)


def _value_parts(values: list[bytes], now_ms: int) -> list[bytes]:
    """The records of ``values`` (a value each, timestamped ``now_ms``), after a first part left
    for META: a record's 24-byte prefix depends only on its value's length, so values of one
    length share one."""
    prefixes: dict[int, bytes] = {}
    parts: list[bytes] = [b""]
    append = parts.append
    pack = REC.pack
    for value in values:
        size = len(value)
        prefix = prefixes.get(size)
        if prefix is None:
            prefix = prefixes[size] = pack(_REC_FIXED + size, now_ms, -1, size, 0)
        append(prefix)
        append(value)
    return parts


def _batch(parts: list[bytes], count: int, now_ms: int, first_ts: int, max_ts: int) -> EncodedBatch:
    """The batch of ``count`` encoded records ``parts[1:]`` (``parts[0]`` becomes META)."""
    parts[0] = META.pack(MAGIC, 0, count, now_ms, first_ts, max_ts)
    body = b"".join(parts)
    if len(body) + 4 > MAX_BATCH_LENGTH:
        raise RecordTooLarge(f"batch of {len(body) + CRC_START} bytes exceeds the 2 GiB batch limit")
    return EncodedBatch(body, crc32c(body), count, now_ms, first_ts, max_ts)


def parse_header(buf: bytes, pos: int = 0) -> BatchHeader:
    """The header at ``buf[pos:]``, structurally checked (not the CRC); raises ``CorruptBatch``."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatch("short batch header")
    base, length, crc, magic, _attrs, count, append_time, first_ts, max_ts = HEADER.unpack_from(buf, pos)
    if magic < MAGIC:
        raise CorruptBatch(f"unknown batch magic {magic}")
    if base < 0 or count < 1 or length < MIN_BATCH_LENGTH:
        raise CorruptBatch(f"implausible batch header (base={base}, count={count}, length={length})")
    header = BatchHeader(base, length, crc, count, append_time, first_ts, max_ts)
    if magic > MAGIC:  # a layout of its own after the header: the CRC tells newer from damaged
        raise NewerBatch(header, magic)
    if count * REC_PREFIX > length:
        raise CorruptBatch(f"implausible batch header (base={base}, count={count}, length={length})")
    return header


def crc_ok(buf: bytes, pos: int, header: BatchHeader) -> bool:
    """Whether the batch at ``buf[pos:]`` (fully present) matches its CRC."""
    end = pos + LENGTH_PREFIX + header.length
    if end > len(buf):
        return False
    return crc32c(memoryview(buf)[pos + CRC_START : end]) == header.crc


def decode_records(
    buf: bytes,
    pos: int,
    header: BatchHeader,
    out: RecordColumns,
    *,
    min_offset: int = 0,
    budget: int = -1,
    force_first: bool = False,
    most: int = -1,
) -> tuple[int, bool]:
    """Append the records of the batch at ``buf[pos:]`` to the columns ``out``; return (bytes used,
    budget hit).

    Records below ``min_offset`` are skipped without being built. With
    ``budget >= 0`` decoding stops before the first record whose cost
    (``Record.size``, at least 1) would overrun it, except that with ``force_first`` the first record taken is
    always taken (a consumer must never stall on one big record); with ``most >= 0``, once
    ``most`` records are taken (a budget hit too, before the next is built). The CRC is the
    caller's business (``crc_ok``); the layout is checked here.
    """
    end = pos + LENGTH_PREFIX + header.length
    if end > len(buf):
        raise CorruptBatch("batch extends past the buffer")
    unpack = REC.unpack_from
    add_offset, add_ts, add_key = out.offsets.append, out.timestamps.append, out.keys.append
    add_value, add_headers, add_size = out.values.append, out.headers.append, out.sizes.append
    p = pos + HEADER_SIZE
    offset = header.base_offset
    used = 0
    taken = 0
    try:
        for _ in range(header.count):
            rlen, ts, klen, vlen, hcount = unpack(buf, p)
            nxt = p + 4 + rlen
            if rlen < _REC_FIXED or nxt > end:
                raise CorruptBatch(f"bad record length at offset {offset}")
            if offset < min_offset:
                p = nxt
                offset += 1
                continue
            if taken == most:
                return used, True
            q = p + REC_PREFIX
            if klen >= 0:
                key: bytes | None = buf[q : q + klen]
                q += klen
            else:
                key = None
            if vlen >= 0:
                value: bytes | None = buf[q : q + vlen]
                q += vlen
            else:
                value = None
            headers: tuple[Header, ...] = ()
            if hcount:
                headers, q = _decode_headers(buf, q, hcount)
            if q != nxt:
                raise CorruptBatch(f"record layout mismatch at offset {offset}")
            size = record_size(key, value, headers)
            cost = size or 1  # a record of nulls still costs something, or a budget would never fill
            if budget >= 0 and used + cost > budget and not (force_first and taken == 0):
                return used, True
            add_offset(offset)
            add_ts(ts)
            add_key(key)
            add_value(value)
            add_headers(headers)
            add_size(size)
            used += cost
            taken += 1
            p = nxt
            offset += 1
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptBatch(f"undecodable record at offset {offset}: {exc}") from exc
    if p != end:
        raise CorruptBatch("trailing bytes after the last record")
    return used, False


def _decode_headers(buf: bytes, q: int, count: int) -> tuple[tuple[Header, ...], int]:
    headers: list[Header] = []
    for _ in range(count):
        (nlen,) = HDR_NAME.unpack_from(buf, q)
        q += 2
        name = buf[q : q + nlen].decode("utf-8")
        q += nlen
        (hvlen,) = HDR_VALUE.unpack_from(buf, q)
        q += 4
        if hvlen >= 0:
            hvalue: bytes | None = buf[q : q + hvlen]
            q += hvlen
        else:
            hvalue = None
        headers.append((name, hvalue))
    return tuple(headers), q


def first_at_or_after(buf: bytes, pos: int, header: BatchHeader, timestamp: int) -> int | None:
    """The offset of the first record of the batch at ``buf[pos:]`` timestamped at or after
    ``timestamp`` (producers give timestamps: they need not grow with offsets), else None."""
    records = RecordColumns.empty()
    decode_records(buf, pos, header, records)
    found = (o for o, ts in zip(records.offsets, records.timestamps, strict=True) if ts >= timestamp)
    return next(found, None)


def decode_batch(buf: bytes, pos: int = 0, *, verify: bool = True) -> RecordColumns:
    """Every record of the batch at ``buf[pos:]``; raises ``CorruptBatch`` (incl. a CRC mismatch)."""
    header = parse_header(buf, pos)
    if verify and not crc_ok(buf, pos, header):
        raise CorruptBatch(f"CRC mismatch in batch at offset {header.base_offset}")
    out = RecordColumns.empty()
    decode_records(buf, pos, header, out)
    return out
