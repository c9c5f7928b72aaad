"""Assignors share partitions the way Kafka's do, and the balanced one moves as little as it can."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.core.assignors import STRATEGIES, assign, normalize_strategy
from service.core.models import TopicPartition

TP = TopicPartition
CANONICAL = ["range", "roundrobin", "balanced"]


def tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TP(topic, p) for p in partitions]


# --- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("range", "range"),
        ("roundrobin", "roundrobin"),
        ("balanced", "balanced"),
        ("sticky", "balanced"),
        ("cooperative-sticky", "balanced"),
        ("RoundRobin", "roundrobin"),
        ("org.apache.kafka.clients.consumer.RangeAssignor", "range"),
        ("org.apache.kafka.clients.consumer.RoundRobinAssignor", "roundrobin"),
        ("org.apache.kafka.clients.consumer.StickyAssignor", "balanced"),
        ("org.apache.kafka.clients.consumer.CooperativeStickyAssignor", "balanced"),
    ],
)
def test_strategy_names_and_kafka_aliases(name: str, canonical: str) -> None:
    assert normalize_strategy(name) == canonical
    assert assign(name, {"a": ["t"]}, {"t": 2}) == {"a": tps("t", 0, 1)}


@pytest.mark.parametrize("name", ["", "fair", "org.apache.kafka.clients.consumer.FooAssignor"])
def test_unknown_strategy_is_a_value_error(name: str) -> None:
    with pytest.raises(ValueError, match="unknown partition assignment strategy"):
        assign(name, {"a": ["t"]}, {"t": 1})


def test_strategies_lists_every_accepted_name() -> None:
    for name in STRATEGIES:
        normalize_strategy(name)


# --- Kafka's documented examples -----------------------------------------------------------


def test_range_matches_kafka_javadoc_example() -> None:
    # RangeAssignor javadoc: two consumers, two topics of three partitions each.
    result = assign("range", {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    assert result == {"C0": [*tps("t0", 0, 1), *tps("t1", 0, 1)], "C1": [*tps("t0", 2), *tps("t1", 2)]}


def test_range_gives_the_extra_partitions_to_the_first_members() -> None:
    result = assign("range", {"c": ["t"], "a": ["t"], "b": ["t"]}, {"t": 10})
    assert result == {"a": tps("t", 0, 1, 2, 3), "b": tps("t", 4, 5, 6), "c": tps("t", 7, 8, 9)}


def test_range_only_counts_the_subscribers_of_each_topic() -> None:
    result = assign("range", {"a": ["x"], "b": ["x", "y"], "c": ["y"]}, {"x": 3, "y": 2})
    assert result == {"a": tps("x", 0, 1), "b": [*tps("x", 2), *tps("y", 0)], "c": tps("y", 1)}


def test_roundrobin_matches_kafka_javadoc_examples() -> None:
    same = assign("roundrobin", {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    assert same == {"C0": [*tps("t0", 0, 2), *tps("t1", 1)], "C1": [*tps("t0", 1), *tps("t1", 0, 2)]}
    # Unequal subscriptions: members not subscribed to a topic are skipped.
    mixed = assign(
        "roundrobin",
        {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]},
        {"t0": 1, "t1": 2, "t2": 3},
    )
    assert mixed == {"C0": tps("t0", 0), "C1": tps("t1", 0), "C2": [*tps("t1", 1), *tps("t2", 0, 1, 2)]}


@pytest.mark.parametrize("strategy", CANONICAL)
def test_more_members_than_partitions_leaves_the_extras_idle(strategy: str) -> None:
    result = assign(strategy, {m: ["t"] for m in "abcde"}, {"t": 2})
    assert sorted(len(v) for v in result.values()) == [0, 0, 0, 1, 1]
    assert set(result) == set("abcde")


@pytest.mark.parametrize("strategy", CANONICAL)
def test_unknown_topics_and_empty_subscriptions(strategy: str) -> None:
    result = assign(strategy, {"a": ["gone", "t"], "b": [], "c": ["empty"]}, {"t": 2, "empty": 0})
    assert result == {"a": tps("t", 0, 1), "b": [], "c": []}
    assert assign(strategy, {}, {"t": 3}) == {}


# --- balanced: stickiness ------------------------------------------------------------------


def test_balanced_from_scratch_is_even() -> None:
    result = assign("balanced", {m: ["t", "u"] for m in "abc"}, {"t": 4, "u": 3})
    assert sorted(len(v) for v in result.values()) == [2, 2, 3]


def test_balanced_keeps_previous_and_moves_only_to_the_new_member() -> None:
    subs = {m: ["t"] for m in "abc"}
    before = assign("balanced", subs, {"t": 12})
    after = assign("balanced", {**subs, "d": ["t"]}, {"t": 12}, before)
    assert all(set(after[m]) <= set(before[m]) for m in "abc")
    assert len(after["d"]) == 3
    assert all(len(after[m]) == 3 for m in "abc")


def test_balanced_gives_a_leavers_partitions_to_the_others_without_other_moves() -> None:
    subs = {m: ["t"] for m in "abcd"}
    before = assign("balanced", subs, {"t": 10})
    del subs["b"]
    after = assign("balanced", subs, {"t": 10}, before)
    assert all(set(before[m]) <= set(after[m]) for m in subs)
    assert sorted(len(v) for v in after.values()) == [3, 3, 4]


def test_balanced_drops_partitions_that_are_no_longer_valid() -> None:
    previous = {"a": [*tps("t", 0, 1, 7), *tps("old", 0)], "b": tps("t", 1, 2), "ghost": tps("t", 3)}
    result = assign("balanced", {"a": ["t"], "b": ["t"]}, {"t": 4}, previous)
    # t-7 and old-0 no longer exist for a; t-1 is claimed twice and stays with a (first in order).
    assert result == {"a": tps("t", 0, 1), "b": tps("t", 2, 3)}


def test_balanced_new_partitions_go_to_the_least_loaded() -> None:
    previous = {"a": tps("t", 0, 1), "b": tps("t", 2)}
    result = assign("balanced", {"a": ["t"], "b": ["t"]}, {"t": 4}, previous)
    assert result == {"a": tps("t", 0, 1), "b": tps("t", 2, 3)}


def test_balanced_moves_through_a_chain_when_subscriptions_differ() -> None:
    # a can only take x, c only y; b takes either. Balance needs b to pass y on to c.
    subs = {"a": ["x"], "b": ["x", "y"], "c": ["y"]}
    previous = {"a": tps("x", 0, 1, 2, 3), "b": tps("y", 0), "c": tps("y", 1)}
    result = assign("balanced", subs, {"x": 4, "y": 2}, previous)
    assert sorted(len(v) for v in result.values()) == [2, 2, 2]
    assert set(result["a"]) <= set(previous["a"])


def test_balanced_result_is_a_fixed_point() -> None:
    subs = {"a": ["x"], "b": ["x", "y"], "c": ["y", "z"], "d": ["z"]}
    counts = {"x": 5, "y": 3, "z": 7}
    first = assign("balanced", subs, counts)
    assert assign("balanced", subs, counts, first) == first


# --- properties ----------------------------------------------------------------------------


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool = False) -> tuple[dict[str, list[str]], dict[str, int]]:
    topics = [f"t{i}" for i in range(draw(st.integers(1, 4)))]
    counts = {t: draw(st.integers(0, 12)) for t in topics}
    members = [f"m{i:02d}" for i in draw(st.sets(st.integers(0, 40), min_size=1, max_size=8))]
    if homogeneous:
        chosen = draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
        subs = {m: list(chosen) for m in members}
    else:
        subs = {m: draw(st.lists(st.sampled_from([*topics, "missing"]), unique=True)) for m in members}
    return subs, counts


@st.composite
def previous_assignments(
    draw: st.DrawFn, subs: dict[str, list[str]], counts: dict[str, int]
) -> dict[str, list[TopicPartition]]:
    """Arbitrary previous generations: stale members, invalid and doubly-claimed partitions."""
    pool = [TP(t, p) for t, n in counts.items() for p in range(n + 2)] + [TP("gone", 0)]
    owners = [*subs, "left"]
    return {m: draw(st.lists(st.sampled_from(pool), max_size=10)) for m in owners}


def check_valid(
    result: dict[str, list[TopicPartition]], subs: dict[str, list[str]], counts: dict[str, int]
) -> None:
    assert set(result) == set(subs)
    expected = {TP(t, p) for m in subs for t in subs[m] if t in counts for p in range(counts[t])}
    seen = [tp for member_tps in result.values() for tp in member_tps]
    assert sorted(seen) == sorted(expected)  # every subscribed partition exactly once
    for member, member_tps in result.items():
        assert all(tp.topic in subs[member] for tp in member_tps)  # only to subscribers
        assert member_tps == sorted(member_tps)


def spread(result: dict[str, list[TopicPartition]]) -> int:
    sizes = [len(v) for v in result.values()]
    return max(sizes) - min(sizes)


@settings(max_examples=300, deadline=None)
@given(group=groups(), strategy=st.sampled_from(CANONICAL), seed=st.integers(0, 1000))
def test_every_partition_once_only_to_subscribers_deterministically(
    group: tuple[dict[str, list[str]], dict[str, int]], strategy: str, seed: int
) -> None:
    subs, counts = group
    result = assign(strategy, subs, counts)
    check_valid(result, subs, counts)
    # The same inputs in another order give the same answer (any replica computes the same).
    members = list(subs)
    random.Random(seed).shuffle(members)
    shuffled = {m: list(reversed(subs[m])) for m in members}
    assert assign(strategy, shuffled, dict(reversed(counts.items()))) == result


@settings(max_examples=300, deadline=None)
@given(group=groups(homogeneous=True), strategy=st.sampled_from(["roundrobin", "balanced"]))
def test_homogeneous_subscriptions_are_balanced_within_one(
    group: tuple[dict[str, list[str]], dict[str, int]], strategy: str
) -> None:
    subs, counts = group
    assert spread(assign(strategy, subs, counts)) <= 1


@settings(max_examples=200, deadline=None)
@given(group=groups(homogeneous=True))
def test_range_is_balanced_within_one_per_topic(group: tuple[dict[str, list[str]], dict[str, int]]) -> None:
    subs, counts = group
    result = assign("range", subs, counts)
    for topic in counts:
        per_member = [sum(1 for tp in v if tp.topic == topic) for v in result.values()]
        assert max(per_member) - min(per_member) <= 1


@settings(max_examples=300, deadline=None)
@given(data=st.data(), group=groups())
def test_balanced_from_any_previous_is_valid_and_locally_balanced(
    data: st.DataObject, group: tuple[dict[str, list[str]], dict[str, int]]
) -> None:
    subs, counts = group
    previous = data.draw(previous_assignments(subs, counts))
    result = assign("balanced", subs, counts, previous)
    check_valid(result, subs, counts)
    # Nobody could take a partition straight from a member holding two or more more than it.
    for given_tps in result.values():
        for taker, taken in result.items():
            if len(given_tps) >= len(taken) + 2:
                assert not any(tp.topic in subs[taker] for tp in given_tps)
    assert assign("balanced", subs, counts, result) == result


@settings(max_examples=300, deadline=None)
@given(data=st.data(), group=groups(homogeneous=True))
def test_balanced_moves_the_fewest_partitions(
    data: st.DataObject, group: tuple[dict[str, list[str]], dict[str, int]]
) -> None:
    subs, counts = group
    all_tps = sorted({TP(t, p) for t in next(iter(subs.values())) if t in counts for p in range(counts[t])})
    # A valid previous generation: a random subset of the partitions split among the members.
    members = sorted(subs)
    owners = data.draw(
        st.lists(st.sampled_from([*members, None]), min_size=len(all_tps), max_size=len(all_tps))
    )
    previous: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp, owner in zip(all_tps, owners, strict=True):
        if owner is not None:
            previous[owner].append(tp)

    result = assign("balanced", subs, counts, previous)
    assert spread(result) <= 1
    kept = sum(len(set(result[m]) & set(previous[m])) for m in members)
    # Best possible: the members that held most keep ceil(P/M), the others floor(P/M).
    floor, extra = divmod(len(all_tps), len(members))
    held = sorted((len(v) for v in previous.values()), reverse=True)
    best = sum(min(h, floor + (1 if i < extra else 0)) for i, h in enumerate(held))
    assert kept == best


@settings(max_examples=200, deadline=None)
@given(group=groups(homogeneous=True), joiners=st.integers(1, 3))
def test_balanced_join_moves_partitions_only_to_the_joiners(
    group: tuple[dict[str, list[str]], dict[str, int]], joiners: int
) -> None:
    subs, counts = group
    before = assign("balanced", subs, counts)
    topics = next(iter(subs.values()))
    grown = {**subs, **{f"new{i}": topics for i in range(joiners)}}
    after = assign("balanced", grown, counts, before)
    assert spread(after) <= 1
    assert all(set(after[m]) <= set(before[m]) for m in subs)


@settings(max_examples=200, deadline=None)
@given(group=groups(homogeneous=True), data=st.data())
def test_balanced_leave_moves_only_the_leavers_partitions(
    group: tuple[dict[str, list[str]], dict[str, int]], data: st.DataObject
) -> None:
    subs, counts = group
    before = assign("balanced", subs, counts)
    leaver = data.draw(st.sampled_from(sorted(subs)))
    rest = {m: t for m, t in subs.items() if m != leaver}
    after = assign("balanced", rest, counts, before)
    assert spread(after) <= 1 if rest else after == {}
    assert all(set(before[m]) <= set(after[m]) for m in rest)
