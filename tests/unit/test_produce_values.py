"""Binary values alone, the most common produce: read without a JSON parser
(``service.wire.values_body``), kept as values (``NewRecords`` of values alone) and stored as they are.

What may never change: a body the reader takes gives the records the general way
(``http.loads`` then ``parse_produce``) gives, and every other body is left to the general way,
which refuses it in its own words.
"""

from __future__ import annotations

import base64
import json
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.adapters.embedded.log import EmbeddedLog
from service.api.bodies import loads
from service.core.acl import GATEWAY
from service.core.models import NewRecord, NewRecords, PlainFormat, TopicPartition
from service.core.partitioner import Partitioner
from service.core.producer import ProduceService
from service.core.topics import TopicService
from service.errors import BadRequest, GatewayError, PayloadTooLarge
from service.wire.formats import loads_exact
from service.wire.records import ParsedProduce, parse_produce
from service.wire.values_body import binary_values

LIMIT = 1000
MAX_RECORDS = 50
DEPTH = 64  # max_json_depth's default


def general(body: bytes) -> ParsedProduce:
    """The body read the general way: the depth measure, orjson, the record loops."""
    data = loads(body, records=True, max_depth=DEPTH)
    return parse_produce(data, "binary", max_record_bytes=LIMIT, max_records=MAX_RECORDS)


def fast(body: bytes) -> ParsedProduce | None:
    return binary_values(body, max_record_bytes=LIMIT, max_records=MAX_RECORDS)


def shown(parsed: ParsedProduce) -> tuple[Any, ...]:
    records = [(r.key, r.value, r.headers, r.timestamp) for r in parsed.records]
    return records, parsed.partitions, parsed.payload_bytes


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


VALUES = [b"", b"a", b"ab", b"abc", bytes(range(256))[:100], b"\xff\xfe/+", b"x" * LIMIT]
TAKEN = {
    "orjson": orjson.dumps({"records": [{"value": b64(v)} for v in VALUES]}),
    "json.dumps": json.dumps({"records": [{"value": b64(v)} for v in VALUES]}).encode(),
    "indented": json.dumps({"records": [{"value": b64(v)} for v in VALUES]}, indent=2).encode(),
    "one": b'{"records":[{"value":"YQ=="}]}',
    "spaced": b' \r\n{ "records" :\t[ { "value" : "YQ==" } , {"value":""}\n]\n} \n',
}


@pytest.mark.parametrize("body", TAKEN.values(), ids=TAKEN.keys())
def test_a_body_of_values_alone_gives_the_records_of_the_general_way(body: bytes) -> None:
    parsed = fast(body)
    assert parsed is not None
    assert parsed.records.values_alone
    assert shown(parsed) == shown(general(body))


LEFT = {
    "an escaped slash": b'{"records":[{"value":"YS8\\/"}]}',  # the general way takes it
    "an escaped name": b'{"records":[{"\\u0076alue":"YQ=="}]}',
    "a key": b'{"records":[{"key":"YQ==","value":"YQ=="}]}',
    "a partition": b'{"records":[{"value":"YQ==","partition":0}]}',
    "a null": b'{"records":[{"value":null}]}',
    "two records, one null": b'{"records":[{"value":"YQ=="},{"value":null}]}',
    "not base64": b'{"records":[{"value":"!!!not base64"}]}',
    "bad padding": b'{"records":[{"value":"YQ="}]}',
    "over the size limit": orjson.dumps({"records": [{"value": b64(b"x" * (LIMIT + 1))}]}),
    "too many records": orjson.dumps({"records": [{"value": "YQ=="}] * (MAX_RECORDS + 1)}),
    "no records": b'{"records":[]}',
    "records not a list": b'{"records":"YQ=="}',
    "another field": b'{"records":[{"value":"YQ=="}],"other":1}',
    "a trailing comma": b'{"records":[{"value":"YQ=="},]}',
    "cut short": b'{"records":[{"value":"YQ=="}]',
    "trailing text": b'{"records":[{"value":"YQ=="}]}x',
    "a byte order mark": b'\xef\xbb\xbf{"records":[{"value":"YQ=="}]}',
    "a quote too many": b'{"records":[{"value":"YQ=="}"]}',
    "not whitespace": b'{"records":[{"value"\x0b:"YQ=="}]}',
}


@pytest.mark.parametrize("body", LEFT.values(), ids=LEFT.keys())
def test_any_other_body_is_left_to_the_general_way(body: bytes) -> None:
    assert fast(body) is None


def test_a_body_of_quotes_is_refused_before_it_is_cut() -> None:
    """A body with more quotes than ``max_records`` records have is not cut at every quote: a
    million quotes would be a list of a million (8 MB of pointers for a 1 MB body)."""
    body = b'{"records":[' + b'{"value":"YQ=="},' * 50 + b'""' * 500_000 + b"]}"
    tracemalloc.start()
    try:
        assert fast(body) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * len(body)


def test_what_the_general_way_takes_of_the_left_bodies_is_unchanged() -> None:
    """The escaped slash is a value the general way decodes; the records go that way."""
    assert shown(general(LEFT["an escaped slash"]))[0] == [(None, base64.b64decode("YS8/"), (), None)]


_NOISE = st.sampled_from(list(b' \t\n\r\x0b"\\{}[],:/=+aAYQ0\x00\xc3\xa9'))


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """A body of values alone, spaced at random, then maybe changed at one place."""
    values = draw(st.lists(st.binary(max_size=40), min_size=1, max_size=5))
    space = st.sampled_from(["", " ", "\n", "\t ", "\r\n"])
    records = [f'{draw(space)}{{{draw(space)}"value"{draw(space)}:{draw(space)}"{b64(v)}"}}' for v in values]
    text = f'{draw(space)}{{"records"{draw(space)}:[{",".join(records)}]{draw(space)}}}{draw(space)}'
    body = bytearray(text.encode())
    change = draw(st.sampled_from(["none", "replace", "insert", "delete"]))
    where = draw(st.integers(0, len(body) - 1))
    if change == "replace":
        body[where] = draw(_NOISE)
    elif change == "insert":
        body.insert(where, draw(_NOISE))
    elif change == "delete":
        del body[where]
    return bytes(body)


@settings(max_examples=400, deadline=None)
@given(bodies())
def test_a_taken_body_is_always_one_the_general_way_takes_alike(body: bytes) -> None:
    parsed = fast(body)
    try:
        expected = general(body)
    except GatewayError:
        assert parsed is None
        return
    if parsed is not None:
        assert shown(parsed) == shown(expected)


def test_values_alone_are_records_to_every_other_reader() -> None:
    values: list[bytes | None] = [b"a", b"", b"c"]
    records = NewRecords(values)
    assert len(records) == 3 and records.values is values and records.values_alone
    assert records[0] == NewRecord(None, b"a")
    assert list(records[1:]) == [NewRecord(None, b""), NewRecord(None, b"c")]
    assert list(records) == [NewRecord(None, v) for v in values]
    assert NewRecords.of(records) is records
    assert NewRecords.of(list(records)).values_alone  # columns no record uses are left out


async def test_values_alone_spread_over_partitions_as_records_do(tmp_path: Path) -> None:
    log = EmbeddedLog(tmp_path / "data")
    await log.start()
    try:
        await log.create_topic("t", 3, 1, {})
        topics = TopicService(log, auto_create=False, default_partitions=1)
        values = [f"v{i}".encode() for i in range(7)]
        outcome = await ProduceService(log, topics, Partitioner()).produce(
            "t", NewRecords(list(values)), who=GATEWAY
        )
        assert sorted(len(p.offsets) for p in outcome.partitions) == [2, 2, 3]  # round-robin
        stored: dict[int, bytes | None] = {}
        for part in outcome.partitions:
            tp = TopicPartition("t", part.partition)
            fetched = (await log.fetch({tp: 0}, max_bytes=1 << 20, max_wait_ms=0))[tp].records
            assert [r.offset for r in fetched] == list(part.offsets)
            assert all(r.key is None and not r.headers for r in fetched)
            stored.update(zip(part.indexes, (r.value for r in fetched), strict=True))
        assert [stored[i] for i in range(7)] == values
    finally:
        await log.stop()


TEXT_VALUES = [
    {"a": [1, 2.5, None]},
    "ünï",
    0,
    False,
    "",
    [],
    12345678901234567890123,
    3.14159265358979323846,
]


@pytest.mark.parametrize("fmt", ["json", "string"])
def test_json_and_string_values_alone_are_the_records_of_the_careful_loop(fmt: PlainFormat) -> None:
    """Text values alone are kept as values, each what the careful loop (which a record with any
    other field goes through) makes of it; a null, or a value the format refuses, is the careful
    loop's, refused in its words."""
    values = TEXT_VALUES if fmt == "json" else [json.dumps(v) for v in TEXT_VALUES]
    body = json.dumps({"records": [{"value": v} for v in values]}).encode()
    data = loads_exact(body)
    parsed = parse_produce(data, fmt, max_record_bytes=LIMIT)
    careful = {"records": [{**r, "partition": None} for r in data["records"]]}
    assert parsed.records.values_alone
    assert shown(parsed) == shown(parse_produce(careful, fmt, max_record_bytes=LIMIT))
    with_null = parse_produce({"records": [{"value": "1"}, {"value": None}]}, fmt, max_record_bytes=LIMIT)
    assert [r.value for r in with_null.records] == [b'"1"' if fmt == "json" else b"1", None]
    if fmt == "string":
        with pytest.raises(BadRequest, match=r"records\[1\]\.value"):
            parse_produce({"records": [{"value": "a"}, {"value": 1}]}, fmt, max_record_bytes=LIMIT)
    with pytest.raises(PayloadTooLarge, match=r"records\[1\]"):
        parse_produce(
            {"records": [{"value": "a"}, {"value": "x" * (LIMIT + 1)}]}, fmt, max_record_bytes=LIMIT
        )
