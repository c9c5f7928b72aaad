"""Topic patterns (``service.core.patterns``): full-match semantics, linear time, refusals, caching."""

from __future__ import annotations

import logging
import re
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.core.models import Subscription
from service.core.patterns import MAX_PATTERN_CHARS, compile_pattern, matches, resolve
from service.errors import ErrorCode, InvalidConsumerConfig

# Patterns users write, all valid for Python's ``re`` and Java's ``java.util.regex`` alike.
ORDINARY = [
    "orders",
    "orders-.*",
    "orders.*",
    r"orders\..*",
    "(a|b)-\\d+",
    r"(orders|payments)-v[0-9]+",
    "[a-z]+",
    "[a-zA-Z0-9._-]+",
    r"[\w.-]+",
    "[^-]+-[^-]+",
    "t-[0-9a-f]{10}(-.*)?",
    "x{2,3}",
    "x{2,}",
    "x?y*z+",
    ".*-dlq",
    "^orders-.*$",
    "(?i)ORDERS-.*",
    "(?:a|b)c",
    "(?P<env>dev|prod)\\.events",
    r"a\-b",
    "[]a]+",
    "a{",
    "",
    ".",
    "(a+)+$",
]
TOPICS = [
    "orders",
    "orders-1",
    "orders-",
    "orders.eu",
    "Orders-EU",
    "ordersx",
    "xorders-1",
    "a-12",
    "b-1",
    "c-1",
    "a-",
    "payments-v2",
    "payments-v",
    "t-0123456789",
    "t-0123456789-x",
    "xx",
    "xxx",
    "xxxx",
    "yz",
    "z",
    "in-dlq",
    "ac",
    "bc",
    "prod.events",
    "a-b",
    "]a",
    "a{",
    "aaaa",
    "aaaa-",
    "-",
    "a",
]


@pytest.mark.parametrize("pattern", ORDINARY)
def test_full_match_semantics_as_before(pattern: str) -> None:
    """Every ordinary pattern covers exactly the topics ``re.fullmatch`` (and Java's
    ``Matcher.matches()``) covered."""
    expected = {t for t in TOPICS if re.fullmatch(pattern, t)}
    assert {t for t in TOPICS if matches(pattern, t)} == expected
    assert resolve(Subscription(pattern=pattern), TOPICS) == expected
    compile_pattern(pattern)  # accepted at subscribe time


@given(st.text(alphabet="abz01-._AZ", min_size=1, max_size=12))
def test_full_match_semantics_on_any_topic_name(topic: str) -> None:
    for pattern in ORDINARY:
        assert matches(pattern, topic) == bool(re.fullmatch(pattern, topic)), (pattern, topic)


def test_a_prefix_or_a_substring_is_not_a_match() -> None:
    assert not matches("orders", "orders-1")
    assert not matches("rders-1", "orders-1")
    assert not matches("orders|payments", "orders-payments")  # alternation is anchored as a whole
    assert matches("orders|payments", "payments")


@pytest.mark.timeout(10)  # Python's re takes hours here: 2**100 ways to split the a's
def test_catastrophic_pattern_answers_at_once() -> None:
    topic = "a" * 100 + "-"
    assert not matches("(a+)+$", topic)
    assert not matches("(a|aa)+", topic)
    assert not matches("(a*)*b", "a" * 100)
    assert matches("(a+)+-", topic)
    assert resolve(Subscription(pattern="(a+)+$"), [topic, "a" * 100]) == {"a" * 100}


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"(a)\1", r"backreference \1"),
        (r"(?P<x>a)-(?P=x)", "named backreference"),
        (r"orders(?=-eu)", "lookahead"),
        (r"orders-(?!test).*", "negative lookahead"),
        (r".*(?<=-eu)", "lookbehind"),
        (r".*(?<!-test)", "negative lookbehind"),
        (r"(?>a+)", "atomic group"),
        (r"a++", "possessive quantifier"),
        (r"(?#why)orders", "comment"),
    ],
)
def test_backtracking_constructs_are_refused_by_name(pattern: str, named: str) -> None:
    re.compile(pattern)  # valid for Python's re: these are what RE2 lacks, not typos
    with pytest.raises(InvalidConsumerConfig) as info:
        compile_pattern(pattern)
    assert info.value.error_code == ErrorCode.INVALID_CONSUMER_CONFIG == 42204
    assert named in str(info.value) and repr(pattern) in str(info.value)


@pytest.mark.parametrize("pattern", ["(", "[a-", "a{2,1}", "*", "a**", "t\udfff.*"])
def test_invalid_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(InvalidConsumerConfig) as info:
        compile_pattern(pattern)
    assert info.value.error_code == 42204
    assert "not a valid regular expression" in str(info.value) or "not valid Unicode" in str(info.value)


def test_end_of_text_escape_gets_a_hint() -> None:
    with pytest.raises(InvalidConsumerConfig, match=r"use \$ or \\z"):
        compile_pattern(r"orders\Z")
    assert matches(r"orders\z", "orders")


def test_pattern_length_is_bounded() -> None:
    compile_pattern("a" * MAX_PATTERN_CHARS)
    assert matches("a" * MAX_PATTERN_CHARS, "a" * MAX_PATTERN_CHARS)
    with pytest.raises(InvalidConsumerConfig, match=f"limit is {MAX_PATTERN_CHARS}") as info:
        compile_pattern("a" * (MAX_PATTERN_CHARS + 1))
    assert info.value.error_code == 42204
    assert not matches("a" * (MAX_PATTERN_CHARS + 1), "a")


def test_pattern_program_size_is_bounded() -> None:
    """Short but huge once expanded: a thousand copies of every Unicode letter."""
    with pytest.raises(InvalidConsumerConfig, match="pattern too large") as info:
        compile_pattern(r"\pL{1000}")
    assert info.value.error_code == 42204
    compile_pattern("[a-z0-9]{1000}")


def test_cached_answers_are_the_same() -> None:
    prefix = f"c-{uuid.uuid4().hex[:8]}"  # a pattern not seen before in this process
    pattern = f"{prefix}-.+"
    topics = [f"{prefix}-x", f"{prefix}-", "other"]
    first = resolve(Subscription(pattern=pattern), topics)
    hits = matches.cache_info().hits
    for _ in range(3):
        assert resolve(Subscription(pattern=pattern), topics) == first == {topics[0]}
    assert matches.cache_info().hits >= hits + 3 * len(topics)
    assert matches.cache_info().currsize <= matches.cache_info().maxsize


def test_topic_list_subscription_is_untouched() -> None:
    assert resolve(Subscription(topics=("a", "b", "a.*")), ["a", "c", "a.x"]) == {"a"}


def test_refused_pattern_stored_earlier_covers_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """A subscription stored before patterns were matched with RE2 may hold a lookahead: it covers
    no topic (and says so once in the log) instead of failing every rebalance of its group."""
    pattern = f"(?=x){uuid.uuid4().hex[:8]}"
    with caplog.at_level(logging.WARNING, logger="service.core.patterns"):
        for _ in range(3):
            assert resolve(Subscription(pattern=pattern), ["x", "y", pattern]) == set()
    warnings = [r for r in caplog.records if pattern in r.getMessage()]
    assert len(warnings) == 1 and "lookahead" in warnings[0].getMessage()
