"""Consumer records rendered as text equal, byte for byte, the same records rendered through dicts."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.core.models import Record, RecordColumns, TopicPartition
from service.errors import ConversionError
from service.wire.records import render_records, render_slices
from tests.unit.record_shapes import columns, record_dict
from tests.unit.stored_values import payloads, stored_json

_records = st.lists(
    st.builds(
        Record,
        st.integers(0, 2**63 - 1),
        st.integers(-1, 2**63 - 1),
        payloads,
        payloads,
        st.lists(st.tuples(st.text(max_size=8), payloads), max_size=2).map(tuple),
    ),
    max_size=6,
)
_partitions = st.lists(
    st.tuples(
        st.builds(TopicPartition, st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True), st.integers(0, 99)),
        _records,
    ),
    max_size=3,
)


@given(_partitions, st.sampled_from(["binary", "string"]))
def test_render_equals_the_dict_shape(polled: list[tuple[TopicPartition, list[Record]]], fmt: str) -> None:
    if fmt == "string":  # the string format shows UTF-8 text only
        polled = [
            (tp, [r for r in records if all(_utf8(b) for b in (r.key, r.value))]) for tp, records in polled
        ]
    rendered = orjson.loads(orjson.dumps(render_records(fmt, columns(polled))))  # type: ignore[arg-type]
    assert rendered == [record_dict(fmt, tp, r) for tp, records in polled for r in records]  # type: ignore[arg-type]


def _utf8(data: bytes | None) -> bool:
    try:
        data is None or data.decode()
    except UnicodeDecodeError:
        return False
    return True


@given(_partitions, st.sampled_from(["binary", "string"]), st.integers(1, 200))
def test_slices_join_to_the_whole(
    polled: list[tuple[TopicPartition, list[Record]]], fmt: str, slice_bytes: int
) -> None:
    if fmt == "string":
        polled = [
            (tp, [r for r in records if all(_utf8(b) for b in (r.key, r.value))]) for tp, records in polled
        ]
    slices = list(render_slices(fmt, columns(polled), slice_bytes=slice_bytes))  # type: ignore[arg-type]
    assert b"".join(slices) == bytes(orjson.dumps(render_records(fmt, columns(polled))))  # type: ignore[arg-type]
    count = sum(len(records) for _, records in polled)
    assert len(slices) <= count + 1  # at least one record a slice, plus the closing bracket
    if slice_bytes == 1:  # every record alone
        assert len(slices) == count + 1


_json_records = st.lists(
    st.builds(
        Record,
        st.integers(0, 2**63 - 1),
        st.integers(-1, 2**63 - 1),
        st.none() | stored_json,
        st.none() | stored_json,
        st.lists(st.tuples(st.text(max_size=8), payloads), max_size=2).map(tuple),
    ),
    max_size=6,
)
_json_partitions = st.lists(
    st.tuples(
        st.builds(TopicPartition, st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True), st.integers(0, 99)),
        _json_records,
    ),
    max_size=3,
)


def _through_dicts(fmt: str, polled: list[tuple[TopicPartition, list[Record]]]) -> bytes:
    """The answer as a dict per record and ``orjson`` write it: what the text must equal, byte for byte."""
    return bytes(orjson.dumps([record_dict(fmt, tp, r) for tp, records in polled for r in records]))  # type: ignore[arg-type]


@given(_json_partitions, st.integers(1, 10_000))
def test_json_text_is_byte_for_byte_the_dicts(
    polled: list[tuple[TopicPartition, list[Record]]], slice_bytes: int
) -> None:
    expected = _through_dicts("json", polled)
    assert bytes(orjson.dumps(render_records("json", columns(polled)))) == expected
    assert b"".join(render_slices("json", columns(polled), slice_bytes=slice_bytes)) == expected


@given(_partitions)
def test_string_text_is_byte_for_byte_the_dicts(polled: list[tuple[TopicPartition, list[Record]]]) -> None:
    polled = [(tp, [r for r in records if all(_utf8(b) for b in (r.key, r.value))]) for tp, records in polled]
    assert bytes(orjson.dumps(render_records("string", columns(polled)))) == _through_dicts("string", polled)


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
    polled = [(tp, [Record(0, 1, b"1", b"2"), Record(1, 1, key, value)])]
    for render in (lambda: render_records(fmt, columns(polled)), lambda: _through_dicts(fmt, polled)):  # type: ignore[arg-type]
        with pytest.raises(ConversionError, match=message):
            render()


@given(_partitions, _json_partitions, st.integers(1, 10_000))
def test_fetched_columns_render_as_the_dicts_of_their_records(
    polled: list[tuple[TopicPartition, list[Record]]],
    json_polled: list[tuple[TopicPartition, list[Record]]],
    slice_bytes: int,
) -> None:
    """A fetch's records, walked as columns without a ``Record`` each, render byte for byte as a
    dict per record does, whole and in slices, in every plain format."""
    text = [(tp, [r for r in records if all(_utf8(b) for b in (r.key, r.value))]) for tp, records in polled]
    for fmt, of in (("binary", polled), ("string", text), ("json", json_polled)):
        fetched = columns(of)
        expected = _through_dicts(fmt, of)
        assert bytes(orjson.dumps(render_records(fmt, fetched))) == expected  # type: ignore[arg-type]
        assert b"".join(render_slices(fmt, fetched, slice_bytes=slice_bytes)) == expected  # type: ignore[arg-type]
        assert [list(r) for _, r in fetched] == [records for _, records in of]


@pytest.mark.parametrize("fmt", ["json", "string"])
def test_a_fetched_value_the_format_cannot_show_is_never_embedded(fmt: str) -> None:
    columns = RecordColumns.of([Record(0, 1, None, b"1"), Record(1, 1, None, b"\xff{")])
    with pytest.raises(ConversionError):
        render_records(fmt, [(TopicPartition("t", 0), columns)])  # type: ignore[arg-type]
