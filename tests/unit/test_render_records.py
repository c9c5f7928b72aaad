"""Consumer records rendered as text equal the same records rendered through dicts."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from api_schemas.records import record_dict, render_records, render_slices
from service.core.models import Record, TopicPartition

_payload = st.none() | st.binary(max_size=40)
_records = st.lists(
    st.builds(
        Record,
        st.integers(0, 2**63 - 1),
        st.integers(-1, 2**63 - 1),
        _payload,
        _payload,
        st.lists(st.tuples(st.text(max_size=8), _payload), max_size=2).map(tuple),
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
    rendered = orjson.loads(orjson.dumps(render_records(fmt, polled)))  # type: ignore[arg-type]
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
    slices = list(render_slices(fmt, polled, slice_bytes=slice_bytes))  # type: ignore[arg-type]
    assert b"".join(slices) == bytes(orjson.dumps(render_records(fmt, polled)))  # type: ignore[arg-type]
    count = sum(len(records) for _, records in polled)
    assert len(slices) <= count + 1  # at least one record a slice, plus the closing bracket
    if slice_bytes == 1:  # every record alone
        assert len(slices) == count + 1
