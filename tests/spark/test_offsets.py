"""Offset specs, range planning and splitting, topic selection, lag rows, time specs: pure logic, no Spark."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.core.models import TopicPartition
from spark_jobs.offsets import (
    EARLIEST,
    LATEST,
    Committed,
    Explicit,
    LagRow,
    OffsetRange,
    OptionError,
    lag_rows,
    named_offset,
    offsets_json,
    parse_offset_spec,
    parse_offsets_json,
    plan_ranges,
    resolve,
    select_topics,
    split_ranges,
)
from spark_jobs.timespec import parse_duration, parse_instant

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_offset_specs_parse() -> None:
    assert parse_offset_spec("earliest", option="o") == EARLIEST
    assert parse_offset_spec(" LATEST ", option="o") == LATEST
    assert parse_offset_spec("committed:billing", option="o") == Committed("billing")
    assert parse_offset_spec('{"a": {"0": 5, "1": -2}}', option="o") == Explicit({A0: 5, A1: -2})


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("soon", "is not earliest, latest"),
        ("committed:", "needs a group name"),
        ("{not json", "not valid JSON"),
        ('{"a": 3}', "must be an object"),
        ('{"a": {"x": 3}}', "not a partition number"),
        ('{"a": {"0": -3}}', "is not an offset"),
        ('{"a": {"0": "7"}}', "is not an offset"),
    ],
)
def test_bad_offset_specs_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(OptionError, match=says) as info:
        parse_offset_spec(text, option="startingOffsets")
    assert str(info.value).startswith("startingOffsets:")


def test_offsets_json_round_trips() -> None:
    offsets = {B0: 3, A1: 10, A0: 0}
    assert offsets_json(offsets) == '{"a":{"0":0,"1":10},"b":{"0":3}}'
    assert parse_offsets_json(offsets_json(offsets), option="o") == offsets


def test_resolve_raises_an_offset_below_the_log_start_to_it() -> None:
    bounds = (5, 20)  # retention removed 0..4; 20 is the next offset
    assert resolve(EARLIEST, A0, bounds, side="start") == 5
    assert resolve(LATEST, A0, bounds, side="start") == 20
    assert resolve(Explicit({A0: 2}), A0, bounds, side="start") == 5
    assert resolve(Explicit({A0: 20}), A0, bounds, side="end") == 20
    assert resolve(Explicit({A0: -1}), A0, bounds, side="start") == 20
    assert resolve(Explicit({A0: -2}), A0, bounds, side="end") == 5
    # A partition the JSON leaves out: from the earliest, to the latest.
    assert resolve(Explicit({}), A0, bounds, side="start") == 5
    assert resolve(Explicit({}), A0, bounds, side="end") == 20


def test_committed_bounds_a_range_by_what_the_group_processed() -> None:
    bounds = {A0: (0, 10), A1: (0, 4)}
    committed = {"g": {A0: 6}}  # nothing committed on a-1: nothing of it processed
    upto = plan_ranges([A0, A1], bounds, EARLIEST, Committed("g"), committed=committed)
    assert upto == [OffsetRange("a", 0, 0, 6), OffsetRange("a", 1, 0, 0)]
    rest = plan_ranges([A0, A1], bounds, Committed("g"), LATEST, committed=committed)
    assert rest == [OffsetRange("a", 0, 6, 10), OffsetRange("a", 1, 0, 4)]
    with pytest.raises(OptionError, match="committed offsets"):
        resolve(Committed("g"), A0, (0, 1), side="start")


def test_a_commit_past_the_log_end_is_refused_naming_it_on_either_side() -> None:
    committed = {A0: 12, A1: 10}  # a-1's commit is at its end, which is in range
    assert resolve(Committed("g"), A1, (0, 10), side="start", committed=committed) == 10
    for side in ("start", "end"):
        with pytest.raises(OptionError, match=r"a-0 is committed at 12, past .*log start 0, log end 10"):
            resolve(Committed("g"), A0, (0, 10), side=side, committed=committed)  # type: ignore[arg-type]


def test_a_json_offset_past_the_log_end_is_refused_naming_it_on_either_side() -> None:
    """Spark's Kafka source fails a batch whose beginning offset is after its ending one, or whose
    records up to its ending offset cannot be fetched; no offset is clamped to the end silently."""
    for side, option in (("start", "startingOffsets"), ("end", "endingOffsets")):
        says = rf"^{option}: a-0 is given offset 11, past its log end \(log start 0, log end 10\)"
        with pytest.raises(OptionError, match=says):
            resolve(Explicit({A0: 11}), A0, (0, 10), side=side)  # type: ignore[arg-type]
    assert named_offset(Explicit({A0: 11}), A0, (0, 10), side="start") == 11  # what a stream is told


def test_a_start_after_the_end_is_refused_naming_the_partition() -> None:
    with pytest.raises(OptionError, match=r"^startingOffsets: a-0 begins at 8, after its ending offset 3"):
        plan_ranges([A0], {A0: (0, 10)}, Explicit({A0: 8}), Explicit({A0: 3}))
    assert plan_ranges([A0], {A0: (0, 10)}, Explicit({A0: 3}), Explicit({A0: 3})) == [
        OffsetRange("a", 0, 3, 3)
    ]


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 500)), min_size=1, max_size=5),
    st.integers(1, 100),
)
def test_splits_cover_each_range_in_even_pieces(spans: list[tuple[int, int]], max_records: int) -> None:
    ranges = [OffsetRange("t", p, start, start + n) for p, (start, n) in enumerate(spans)]
    pieces = split_ranges(ranges, max_records)
    for r in ranges:
        mine = [s for s in pieces if s.partition == r.partition]
        if r.size == 0:
            assert mine == []
            continue
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))
        sizes = [s.size for s in mine]
        assert max(sizes) <= max_records and max(sizes) - min(sizes) <= 1
        assert len(mine) == -(-r.size // max_records)


def test_topic_selection() -> None:
    existing = ["orders", "orders.eu", "payments", "__consumer_offsets"]
    assert select_topics("orders", existing) == ["orders"]
    assert select_topics("payments, orders", existing) == ["orders", "payments"]
    assert select_topics("orders.*", existing) == ["orders", "orders.eu"]
    assert select_topics(".*", existing) == ["orders", "orders.eu", "payments"]  # no internal topics
    with pytest.raises(OptionError, match="no such topic: refunds"):
        select_topics("orders,refunds", existing)
    with pytest.raises(OptionError, match="not a valid regular expression"):
        select_topics("orders(", existing)


def test_lag_rows_cover_every_partition_of_a_committed_topic() -> None:
    committed = {"g": {A0: 4, TopicPartition("gone", 0): 1}}
    rows = lag_rows(committed, {"a": 2}, {A0: 10, A1: 3})
    assert rows == [LagRow("g", "a", 0, 4, 10), LagRow("g", "a", 1, None, 3)]
    assert [r.lag for r in rows] == [6, 3]
    assert LagRow("g", "a", 0, 12, 10).lag == -2  # committed past the end, as the lag endpoint shows it


def test_durations() -> None:
    assert parse_duration("15m") == 900
    assert parse_duration("1h30m") == 5400
    assert parse_duration("500ms") == 0.5
    assert parse_duration("42") == 42
    for bad in ("", "15x", "m", "0s", "1h 30m"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_instants() -> None:
    now = datetime(2024, 5, 2, 12, 0, tzinfo=UTC)
    assert parse_instant("now", now=now) == now
    assert parse_instant("24h", now=now) == now - timedelta(days=1)
    assert parse_instant("2024-05-01", now=now) == datetime(2024, 5, 1, tzinfo=UTC)
    assert parse_instant("2024-05-01T10:00:00+02:00", now=now) == datetime(2024, 5, 1, 8, tzinfo=UTC)
    assert parse_instant("2024-05-01T10:00:00Z", now=now) == datetime(2024, 5, 1, 10, tzinfo=UTC)
    with pytest.raises(ValueError, match="neither"):
        parse_instant("yesterday", now=now)
