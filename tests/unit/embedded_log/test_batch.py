"""The record batch codec alone: no files."""

from __future__ import annotations

import pytest

from service.adapters.embedded.log.batch import (
    CRC_START,
    HEADER_SIZE,
    CorruptBatch,
    InvalidRecord,
    RecordTooLarge,
    crc_ok,
    decode_batch,
    decode_records,
    encode_batch,
    parse_header,
)
from service.core.models import NewRecord, NewRecords, Record, RecordColumns

NOW = 1_700_000_000_000


def encoded(records: list[NewRecord], base: int = 0, now: int = NOW) -> bytes:
    batch = encode_batch(records, now)
    return batch.head(base) + batch.body


def test_round_trip_keeps_every_field() -> None:
    records = [
        NewRecord(b"k1", b"v1", (), 5),
        NewRecord(None, b"value with null key"),
        NewRecord(b"key with null value", None, (("h", b"x"),), 7),
        NewRecord(None, None),
        NewRecord(b"", b""),  # empty is not null
        NewRecord(b"\x00\xff", "ünïcödé ✓".encode(), (("clé-✓", "välue".encode()), ("nul", None)), -1),
        NewRecord(b"k", b"v", (("dup", b"1"), ("dup", b"2"))),
    ]
    out = decode_batch(encoded(records, base=100))
    assert [r.offset for r in out] == list(range(100, 107))
    for new, got in zip(records, out, strict=True):
        assert got.key == new.key
        assert got.value == new.value
        assert got.headers == new.headers
        assert got.timestamp == (NOW if new.timestamp is None else new.timestamp)
    assert out[4].key == b"" and out[4].value == b""
    assert out[3].key is None and out[3].value is None
    assert isinstance(out[0], Record) and out[0] == Record(100, 5, b"k1", b"v1")


def test_header_fields() -> None:
    records = [
        NewRecord(None, b"a", timestamp=30),
        NewRecord(None, b"b", timestamp=90),
        NewRecord(None, b"c"),
    ]
    batch = encode_batch(records, NOW)
    header = parse_header(batch.head(42) + batch.body)
    assert header.base_offset == 42
    assert header.count == 3
    assert header.next_offset == 45
    assert header.first_timestamp == 30
    assert header.max_timestamp == NOW
    assert header.append_time == NOW
    assert header.size == batch.size == CRC_START + len(batch.body)
    assert header.size > HEADER_SIZE


def test_base_offset_is_outside_the_crc() -> None:
    batch = encode_batch([NewRecord(None, b"x")], NOW)
    a = batch.head(0) + batch.body
    b = batch.head(123456) + batch.body
    assert crc_ok(a, 0, parse_header(a)) and crc_ok(b, 0, parse_header(b))


@pytest.mark.parametrize("where", [HEADER_SIZE - 1, HEADER_SIZE + 3, -1])
def test_crc_detects_a_flipped_byte(where: int) -> None:
    raw = bytearray(encoded([NewRecord(b"key", b"value"), NewRecord(None, b"other")]))
    raw[where] ^= 0x01
    with pytest.raises(CorruptBatch):
        decode_batch(bytes(raw))


def test_structural_checks() -> None:
    raw = encoded([NewRecord(b"k", b"v")])
    with pytest.raises(CorruptBatch, match="short"):
        parse_header(raw[:20])
    bad_magic = bytearray(raw)
    bad_magic[16] = 9
    with pytest.raises(CorruptBatch, match="magic"):
        parse_header(bytes(bad_magic))
    bad_len = bytearray(raw)
    bad_len[8:12] = (3).to_bytes(4, "big")
    with pytest.raises(CorruptBatch):
        parse_header(bytes(bad_len))
    with pytest.raises(CorruptBatch):  # truncated: the batch runs past the buffer
        decode_batch(raw[:-1], verify=False)


def test_skip_and_budget() -> None:
    raw = encoded([NewRecord(None, bytes(10)) for _ in range(10)], base=50)
    header = parse_header(raw)
    out = RecordColumns.empty()
    used, hit = decode_records(raw, 0, header, out, min_offset=55)
    assert [r.offset for r in out] == [55, 56, 57, 58, 59] and used == 50 and not hit

    out = RecordColumns.empty()
    used, hit = decode_records(raw, 0, header, out, budget=35)
    assert [r.offset for r in out] == [50, 51, 52] and used == 30 and hit

    out = RecordColumns.empty()  # one record bigger than the budget still comes when forced, and alone
    used, hit = decode_records(raw, 0, header, out, budget=5, force_first=True)
    assert [r.offset for r in out] == [50] and used == 10 and hit

    out = RecordColumns.empty()
    used, hit = decode_records(raw, 0, header, out, budget=5)
    assert out == [] and hit

    out = RecordColumns.empty()  # a count stops it too, before the next record is built
    used, hit = decode_records(raw, 0, header, out, min_offset=52, budget=1000, most=3)
    assert [r.offset for r in out] == [52, 53, 54] and used == 30 and hit
    used, hit = decode_records(raw, 0, header, out, most=0)
    assert len(out) == 3 and used == 0 and hit


def test_null_records_still_cost_budget() -> None:
    raw = encoded([NewRecord(None, None) for _ in range(100)])
    out = RecordColumns.empty()
    _, hit = decode_records(raw, 0, parse_header(raw), out, budget=10)
    assert len(out) == 10 and hit


def test_decoding_at_a_position_inside_a_buffer() -> None:
    first = encoded([NewRecord(None, b"a")], base=0)
    second = encoded([NewRecord(None, b"b"), NewRecord(None, b"c")], base=1)
    buf = first + second
    assert [r.value for r in decode_batch(buf, len(first))] == [b"b", b"c"]


def test_record_size_limit() -> None:
    encode_batch([NewRecord(None, bytes(100))], NOW, max_record_bytes=124)  # 24 bytes of framing
    with pytest.raises(RecordTooLarge, match=r"max\.message\.bytes"):
        encode_batch([NewRecord(None, bytes(101))], NOW, max_record_bytes=124)


def test_values_alone_encode_to_the_bytes_of_their_records() -> None:
    """Values alone are encoded from their values: the same batch, byte for byte, as the same
    values as ``NewRecord``s timestamped as the batch is (which the loop of every other record
    encodes), and a value over the limit refused in the same words."""
    values: list[bytes | None] = [b"", b"a", bytes(100), bytes(100), b"\xff" * 7, bytes(100)]
    alone = encode_batch(NewRecords(values), NOW)
    assert alone == encode_batch([NewRecord(None, v, timestamp=NOW) for v in values], NOW)
    assert [(r.key, r.value, r.timestamp) for r in decode_batch(alone.head(5) + alone.body)] == [
        (None, v, NOW) for v in values
    ]
    encode_batch(NewRecords([bytes(100)]), NOW, max_record_bytes=124)
    with pytest.raises(RecordTooLarge) as alone_refused:
        encode_batch(NewRecords([b"x", bytes(101)]), NOW, max_record_bytes=124)
    with pytest.raises(RecordTooLarge) as refused:
        encode_batch([NewRecord(None, b"x"), NewRecord(None, bytes(101))], NOW, max_record_bytes=124)
    assert str(alone_refused.value) == str(refused.value)


def test_unencodable_records() -> None:
    with pytest.raises(InvalidRecord):
        encode_batch([], NOW)
    with pytest.raises(InvalidRecord, match="timestamp"):
        encode_batch([NewRecord(None, b"x", timestamp=2**63)], NOW)
    with pytest.raises(InvalidRecord, match="header name"):
        encode_batch([NewRecord(None, b"x", (("n" * 70000, b"v"),))], NOW)


def test_a_large_batch_round_trips() -> None:
    records = [NewRecord(f"k{i}".encode(), bytes([i % 256]) * 1024) for i in range(1000)]
    out = decode_batch(encoded(records))
    assert len(out) == 1000
    assert out[999].key == b"k999" and out[999].value == bytes([999 % 256]) * 1024
