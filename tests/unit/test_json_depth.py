"""The JSON depth limit: measured on the text without recursion, equal to the parsed value's depth."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.core.json_depth import check_depth, exceeds
from service.errors import InvalidPayload


def depth_of(value: Any) -> int:
    """The reference: how many objects and arrays enclose the deepest value (walked with a stack)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, above = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, above + 1)
            stack.extend((child, above + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


# Strings full of what a naive count would take for nesting: brackets, quotes, backslashes.
tricky = st.text(alphabet='[]{}"\\ax,:', max_size=8)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | tricky,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(tricky, inner, max_size=4),
    max_leaves=60,
)


@given(values, st.integers(min_value=0, max_value=12))
def test_the_measure_is_the_depth_of_the_value(value: Any, limit: int) -> None:
    text = json.dumps(value)
    assert exceeds(text, limit) == (depth_of(value) > limit)
    assert exceeds(text.encode(), limit) == (depth_of(value) > limit)


# Strings with brackets but nothing a writer escapes: their texts are measured without reading escapes.
bare = st.text(alphabet="[]{}ax,: ", max_size=8)
bare_values = st.recursive(
    st.none() | st.integers() | bare,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(bare, inner, max_size=6),
    max_leaves=80,
)


@given(bare_values, st.integers(min_value=0, max_value=6))
def test_texts_without_escapes_are_measured_alike(value: Any, limit: int) -> None:
    text = json.dumps(value)
    assert "\\" not in text
    assert exceeds(text, limit) == (depth_of(value) > limit)
    assert exceeds(text.encode(), limit) == (depth_of(value) > limit)


def test_a_string_holding_brackets_is_cut_out_between_strings_without() -> None:
    for text in ('["a","[[[",[],"b"]', '{"a":"{{{{","b":{"c":"]]]]"}}', '["x", "[", "", "]"]', '["", "[[["]'):
        assert exceeds(text, 1) == (depth_of(json.loads(text)) > 1), text
        assert not exceeds(text, 2)


@pytest.mark.parametrize("depth", [63, 64, 65, 400, 1023, 100_000])
@pytest.mark.parametrize("shape", ["chain", "objects", "siblings"])
def test_deep_texts_are_measured_without_recursion(depth: int, shape: str) -> None:
    if shape == "chain":
        text = "[" * depth + "]" * depth
    elif shape == "objects":
        text = '{"a":' * depth + "1" + "}" * depth
    else:  # many shallow neighbours before the one deep value
        text = "[" + "[1],{}," * 5000 + "[" * (depth - 1) + "]" * (depth - 1) + "]"
    assert exceeds(text, 64) == (depth > 64)


def test_brackets_inside_strings_are_text() -> None:
    deep_looking = json.dumps(["[" * 500, "{" * 500, '\\"[[[', "]]]"])
    assert not exceeds(deep_looking, 2)


def test_text_that_is_not_json_is_left_to_the_parser() -> None:
    for text in ("[" * 1000, "]" * 1000 + "[" * 1000, '"unterminated [[[[', "{[}]" * 100):
        exceeds(text, 8)  # an answer, no exception: the parser refuses these afterwards


def test_a_refusal_is_a_confluent_invalid_payload() -> None:
    with pytest.raises(InvalidPayload) as caught:
        check_depth(b"[" * 70 + b"]" * 70, 64)
    assert caught.value.http_status == 422
    assert int(caught.value.error_code) == 42206
    assert "64 levels" in caught.value.message
