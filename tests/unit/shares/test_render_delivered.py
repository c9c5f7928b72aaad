"""A share consumer's poll rendered as text equals, byte for byte, the same records rendered
through a dict per record (``delivered_dicts``), in every format."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.core.models import Record, TopicPartition
from service.core.shares.delivered import Delivered, by_partition_run
from service.errors import ConversionError
from service.wire.records import records_array
from tests.unit.record_shapes import delivered_dicts
from tests.unit.stored_values import payloads, stored_json


def render_delivered(
    fmt: str, delivered: list[Delivered], decoded: list[tuple[object, object]] | None = None
) -> bytes:
    """The share poll's answer, as the route renders it (``decoded``: each record's JSON)."""
    polled = by_partition_run(delivered)
    if decoded is not None:
        polled = [
            (tp, records.with_decoded(*map(list, zip(*decoded, strict=True)))) for tp, records in polled
        ]
    return records_array(fmt, polled)  # type: ignore[arg-type]


_headers = st.lists(st.tuples(st.text(max_size=8), payloads), max_size=2).map(tuple)
_utf8 = st.none() | st.text(max_size=20).map(str.encode)
_topics = st.builds(
    TopicPartition, st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True), st.integers(0, 2**31 - 1)
)


def _delivered(payload: st.SearchStrategy[bytes | None]) -> st.SearchStrategy[list[Delivered]]:
    record = st.builds(
        Record, st.integers(0, 2**63 - 1), st.integers(-1, 2**63 - 1), payload, payload, _headers
    )
    run = st.tuples(_topics, st.lists(st.tuples(record, st.integers(1, 1000)), max_size=5))
    return st.lists(run, max_size=3).map(
        lambda runs: [Delivered(tp, r, n) for tp, records in runs for r, n in records]
    )


@given(_delivered(payloads))
def test_binary_text_is_byte_for_byte_the_dicts(delivered: list[Delivered]) -> None:
    assert render_delivered("binary", delivered) == delivered_dicts("binary", delivered)


@given(_delivered(st.none() | stored_json))
def test_json_text_is_byte_for_byte_the_dicts(delivered: list[Delivered]) -> None:
    assert render_delivered("json", delivered) == delivered_dicts("json", delivered)


@given(_delivered(_utf8))
def test_string_text_is_byte_for_byte_the_dicts(delivered: list[Delivered]) -> None:
    assert render_delivered("string", delivered) == delivered_dicts("string", delivered)


def test_a_poll_of_nothing_is_an_empty_array() -> None:
    for fmt in ("binary", "json", "string", "avro"):
        assert render_delivered(fmt, []) == b"[]"


def test_the_schema_formats_render_their_decoded_json_through_dicts() -> None:
    tp = TopicPartition("t", 3)
    record = Record(7, 9, b"\x00k", b"\x00v", (("h", b"x"),))
    delivered = [Delivered(tp, record, 2)]
    decoded = [({"id": 1}, [1.5, "x"])]
    rendered = render_delivered("avro", delivered, decoded)
    assert rendered == delivered_dicts("avro", delivered, decoded)
    assert json.loads(rendered) == [
        {
            "topic": "t",
            "key": {"id": 1},
            "value": [1.5, "x"],
            "partition": 3,
            "offset": 7,
            "timestamp": 9,
            "headers": [{"name": "h", "value": "eA=="}],
            "delivery_count": 2,
        }
    ]


def test_a_decoded_value_orjson_cannot_write_is_written_exactly() -> None:
    # A record another client produced may decode, in a schema format, to what ``orjson.dumps``
    # refuses: nesting past its 255 levels, an integer beyond 64 bits.
    deep: object = []
    for _ in range(300):
        deep = [deep]
    record = Record(0, 1, None, b"\x00v", ())
    decoded = [(None, {"deep": deep, "big": 2**70})]
    rendered = render_delivered("jsonschema", [Delivered(TopicPartition("t", 0), record, 1)], decoded)
    assert json.loads(rendered)[0]["value"] == {"deep": deep, "big": 2**70}


@pytest.mark.parametrize(
    ("fmt", "key", "value", "message"),
    [
        ("json", None, b"{not json", "not valid JSON"),
        ("json", b"[1", b"1", "not valid JSON"),
        ("json", None, b"", "not valid JSON"),
        ("string", None, b"\xff", "not valid UTF-8"),
        ("string", b"\xc3", None, "not valid UTF-8"),
    ],
)
def test_a_value_the_format_cannot_show_is_never_embedded(
    fmt: str, key: bytes | None, value: bytes | None, message: str
) -> None:
    tp = TopicPartition("t", 0)
    delivered = [Delivered(tp, Record(0, 1, b"1", b"2"), 1), Delivered(tp, Record(1, 1, key, value), 3)]
    for render in (render_delivered, delivered_dicts):
        with pytest.raises(ConversionError, match=message):
            render(fmt, delivered)  # type: ignore[arg-type]
