"""The adapter's pure parts (key names, the stored encoding, the URL) and how settings pick it.

No server needed: these are string and JSON work. They live beside the
Redis tests because they describe the same stored layout.
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.adapters.redis import RedisSessions
from service.adapters.redis.codec import decode_state, encode_state
from service.adapters.redis.connection import RedisURL
from service.adapters.redis.keys import KeyLayout
from service.core.models import InstanceConfig, InstanceState, Subscription, TopicPartition
from service.server.backends import BackendNotAvailable, build_sessions
from service.settings import Settings

_NAMES = st.text(st.characters(codec=None, exclude_categories=()), min_size=1)  # surrogates too


@given(_NAMES, _NAMES)
def test_members_split_back_into_the_same_names(group: str, name: str) -> None:
    layout = KeyLayout("p:")
    member = layout.member(group, name)
    assert layout.parse_member(member) == (group, name)
    assert layout.parse_member(member.encode("utf-8", "surrogatepass")) == (group, name)
    assert layout.instance(group, name) == layout.instance_of_member(member)


def test_ordinary_names_read_verbatim_in_keys() -> None:
    layout = KeyLayout("bg:")
    assert layout.instance("shipping", "ship-1") == "bg:instance:shipping/ship-1"
    assert layout.group("shipping") == "bg:group:shipping"
    assert layout.leases == "bg:leases"
    assert layout.instance("a/b", "100%") == "bg:instance:a%2Fb/100%25"
    assert layout.group("a/b") != layout.group("a%2Fb")
    with pytest.raises(ValueError):
        layout.parse_member("no-separator")


def _state() -> InstanceState:
    return InstanceState(
        group="g",
        name="c",
        config=InstanceConfig("json", "none", True, 10, 20, 30, "range"),
        created_ms=1,
        last_seen_ms=2,
        subscription=Subscription(topics=("a", "b")),
        manual=None,
        generation=7,
        positions={TopicPartition("a", 0): 5, TopicPartition("b", 2): 0},
        version=3,
        owner="User:alice",
    )


def test_codec_round_trip() -> None:
    state = _state()
    assert decode_state("g", "c", b"3", b"2", encode_state(state)) == state
    state.subscription, state.manual = None, [TopicPartition("x", 1)]
    assert decode_state("g", "c", b"3", b"2", encode_state(state)) == state
    state.subscription, state.manual = Subscription(pattern="a\ud800|b"), None  # orjson refuses it
    assert decode_state("g", "c", b"3", b"2", encode_state(state)) == state


def test_a_state_stored_before_instances_had_owners_is_anonymous() -> None:
    body = orjson.loads(encode_state(_state()))
    del body["owner"]
    assert decode_state("g", "c", b"3", b"2", orjson.dumps(body)).owner == "User:ANONYMOUS"


@pytest.mark.parametrize("body", [b"", b"{", b"[]", b"{}", b'{"config": {}}'])
def test_an_unreadable_body_is_a_value_error(body: bytes) -> None:
    with pytest.raises(ValueError, match="unreadable"):
        decode_state("g", "c", b"1", b"1", body)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://localhost", RedisURL("localhost")),
        ("redis://10.0.0.5:6380/3", RedisURL("10.0.0.5", 6380, 3)),
        ("redis://:pw@h:1/", RedisURL("h", 1, 0, None, "pw")),
        ("redis://me:p%40ss@h/1", RedisURL("h", 6379, 1, "me", "p@ss")),
        ("redis://[::1]:7000/0", RedisURL("::1", 7000, 0)),
    ],
)
def test_urls(url: str, expected: RedisURL) -> None:
    assert RedisURL.parse(url) == expected


@pytest.mark.parametrize(
    "url",
    ["rediss://", "redis://", "redis://h:port/0", "redis://h:99999", "redis://h/db0", "redis://h/0?x=1"],
)
def test_bad_urls_are_refused_in_one_line(url: str) -> None:
    with pytest.raises(ValueError) as caught:
        RedisURL.parse(url)
    assert "\n" not in str(caught.value)


def test_passwords_are_not_shown() -> None:
    assert str(RedisURL.parse("redis://u:secret@h:1/2")) == "redis://h:1/2"
    with pytest.raises(ValueError) as caught:
        RedisURL.parse("redis://u:secret@h:port/2")
    assert "secret" not in str(caught.value)


def test_settings_pick_the_redis_adapter() -> None:
    settings = Settings(
        sessions="redis://127.0.0.1:6390/4",
        redis_key_prefix="prod:",
        redis_connect_timeout_ms=300,
        redis_socket_timeout_ms=400,
    )
    sessions = build_sessions(settings)
    assert isinstance(sessions, RedisSessions)
    assert sessions.url == "redis://127.0.0.1:6390/4"
    assert sessions.request_bound_s == pytest.approx(0.7)


def test_a_malformed_url_is_one_line_for_the_cli() -> None:
    with pytest.raises(BackendNotAvailable, match="invalid port"):
        build_sessions(Settings(sessions="redis://h:port/0"))
