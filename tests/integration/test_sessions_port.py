"""The Sessions port's contract, run against every adapter: embedded, and Redis on a real server.

A gateway must not be able to tell its sessions store apart, so each adapter
gives the same answers to the same calls. What only one adapter has (Redis key
prefixes, outages, lifecycles) is tested beside it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from service.adapters.embedded.sessions import EmbeddedSessions
from service.adapters.redis import RedisSessions
from service.core.models import InstanceConfig, Subscription, TopicPartition
from service.core.ports import Sessions
from service.errors import ConsumerAlreadyExists, ConsumerInstanceNotFound
from tests.helpers import instance

TP = TopicPartition


@pytest.fixture(params=["embedded", "redis"])
async def sessions(request: pytest.FixtureRequest) -> AsyncIterator[Sessions]:
    store: EmbeddedSessions | RedisSessions
    if request.param == "embedded":
        store = EmbeddedSessions()
    else:  # a key prefix of its own: its own deployment on the shared server
        server = request.getfixturevalue("redis_server")
        store = RedisSessions(server.url, key_prefix=f"bgtest-{uuid.uuid4().hex[:10]}:")
    await store.start()
    try:
        yield store
    finally:
        await store.stop()


async def test_implements_the_port(sessions: Sessions) -> None:
    assert isinstance(sessions, Sessions)


async def test_create_load_delete(sessions: Sessions) -> None:
    await sessions.create(instance())
    loaded = await sessions.load("g", "c")
    assert (loaded.group, loaded.name, loaded.version) == ("g", "c", 0)
    with pytest.raises(ConsumerAlreadyExists):
        await sessions.create(instance())
    await sessions.create(instance("other-group", "c"))  # names are per group
    assert await sessions.delete("g", "c") is True
    assert await sessions.delete("g", "c") is False
    with pytest.raises(ConsumerInstanceNotFound):
        await sessions.load("g", "c")


async def test_count_counts_without_loading(sessions: Sessions) -> None:
    assert await sessions.count() == 0 and await sessions.count("g") == 0
    for group, name in (("g", "a"), ("g", "b"), ("h", "a")):
        await sessions.create(instance(group, name))
    assert (await sessions.count(), await sessions.count("g"), await sessions.count("h")) == (3, 2, 1)
    await sessions.delete("g", "a")
    assert (await sessions.count(), await sessions.count("g"), await sessions.count("nobody")) == (2, 1, 0)


async def test_count_of_an_owner_is_its_share_of_the_instances(sessions: Sessions) -> None:
    for group, name, owner in (("g", "a", "User:alice"), ("h", "a", "User:alice"), ("g", "b", "User:bob")):
        state = instance(group, name)
        state.owner = owner
        await sessions.create(state)
    counts = [await sessions.count(owner=o) for o in ("User:alice", "User:bob", "User:carol")]
    assert counts == [2, 1, 0]
    await sessions.delete("g", "a")
    assert await sessions.count(owner="User:alice") == 1
    state = instance("g", "a")
    state.owner = "User:alice"
    await sessions.create(state)  # the same name again: counted once
    assert await sessions.count(owner="User:alice") == 2


async def test_save_is_compare_and_set_and_bumps_the_version(sessions: Sessions) -> None:
    await sessions.create(instance())
    first = await sessions.load("g", "c")
    second = await sessions.load("g", "c")
    first.positions[TP("t", 0)] = 10
    assert await sessions.save(first) is True
    assert first.version == 1
    second.positions[TP("t", 0)] = 99
    assert await sessions.save(second) is False  # loaded before first's save
    stored = await sessions.load("g", "c")
    assert (stored.positions, stored.version) == ({TP("t", 0): 10}, 1)
    first.positions[TP("t", 0)] = 11
    assert await sessions.save(first) is True  # the bumped token lets the winner go on
    assert (await sessions.load("g", "c")).version == 2


async def test_concurrent_saves_only_one_wins(sessions: Sessions) -> None:
    await sessions.create(instance())
    copies = [await sessions.load("g", "c") for _ in range(10)]
    for i, c in enumerate(copies):
        c.positions[TP("t", 0)] = i
    results = await asyncio.gather(*(sessions.save(c) for c in copies))
    assert sum(results) == 1
    [winner] = [c for c, won in zip(copies, results, strict=True) if won]
    assert (await sessions.load("g", "c")).positions == winner.positions


async def test_save_of_a_deleted_instance_fails(sessions: Sessions) -> None:
    await sessions.create(instance())
    state = await sessions.load("g", "c")
    await sessions.delete("g", "c")
    assert await sessions.save(state) is False
    with pytest.raises(ConsumerInstanceNotFound):
        await sessions.load("g", "c")
    assert await sessions.instances() == []  # the failed save did not bring it back


async def test_callers_cannot_mutate_the_store(sessions: Sessions) -> None:
    original = instance()
    original.positions[TP("t", 0)] = 1
    original.manual = [TP("t", 0)]
    await sessions.create(original)
    original.positions[TP("t", 0)] = 666
    original.manual.append(TP("t", 1))
    original.config.format = "json"

    loaded = await sessions.load("g", "c")
    loaded.positions[TP("t", 0)] = 777
    assert loaded.manual is not None
    loaded.manual.clear()
    loaded.config.auto_commit = True
    loaded.generation = 9
    [listed] = await sessions.instances()
    listed.positions.clear()

    assert await sessions.save(loaded)
    loaded.positions[TP("t", 0)] = 888  # after the save

    stored = await sessions.load("g", "c")
    assert stored.positions == {TP("t", 0): 777}
    assert stored.manual == []
    assert stored.config.format == "binary" and stored.config.auto_commit is True
    assert stored.generation == 9


async def test_subscription_and_fields_round_trip(sessions: Sessions) -> None:
    state = instance()
    state.subscription = Subscription(pattern="t.*")
    state.generation = 4
    state.positions = {TP("a", 1): 5, TP("b", 0): 0}
    await sessions.create(state)
    loaded = await sessions.load("g", "c")
    assert loaded == state


async def test_every_field_round_trips(sessions: Sessions) -> None:
    state = instance("grüppe/with%odd names", "c.1_-x")
    state.config = InstanceConfig("json", "earliest", True, 1024, 2500, 45_000, "roundrobin")
    state.created_ms = 1_700_000_000_000
    state.last_seen_ms = 1_800_000_000_123  # wall-clock sized: no float formatting may creep in
    state.subscription = Subscription(topics=("orders", "päyments"))
    state.positions = {TP("orders", 0): 2**62, TP("päyments", 11): 0}
    await sessions.create(state)
    assert await sessions.load(state.group, state.name) == state
    state.subscription = None
    state.manual = [TP("orders", 3), TP("orders", 1)]
    state.last_seen_ms += 1
    assert await sessions.save(state)
    assert await sessions.load(state.group, state.name) == state
    assert [(s.group, s.name) for s in await sessions.instances(state.group)] == [(state.group, "c.1_-x")]


async def test_touch_renews_the_lease_without_taking_the_version(sessions: Sessions) -> None:
    await sessions.create(instance(last_seen_ms=1000, timeout_ms=500))
    state = await sessions.load("g", "c")
    await sessions.touch("g", "c", 5000)
    stored = await sessions.load("g", "c")
    assert (stored.last_seen_ms, stored.expires_ms, stored.version) == (5000, 5500, 0)
    # A save of a copy loaded before the touch does not move the lease back.
    state.positions[TP("t", 0)] = 3
    assert await sessions.save(state)
    assert (await sessions.load("g", "c")).last_seen_ms == 5000
    assert await sessions.expired(5500) == []  # nor the lease index
    assert await sessions.expired(5501) == [("g", "c")]
    await sessions.touch("g", "c", 4000)  # a late touch does not move it back either
    assert (await sessions.load("g", "c")).last_seen_ms == 5000
    with pytest.raises(ConsumerInstanceNotFound):
        await sessions.touch("g", "missing", 1)


async def test_expired_lists_instances_whose_lease_ran_out(sessions: Sessions) -> None:
    await sessions.create(instance("g", "old", last_seen_ms=1000, timeout_ms=500))  # expires 1500
    await sessions.create(instance("g", "edge", last_seen_ms=1500, timeout_ms=500))  # expires 2000
    await sessions.create(instance("h", "young", last_seen_ms=1900, timeout_ms=500))  # expires 2400
    assert await sessions.expired(2000) == [("g", "old")]
    assert await sessions.expired(2001) == [("g", "edge"), ("g", "old")]
    await sessions.touch("g", "old", 2000)
    assert await sessions.expired(2001) == [("g", "edge")]
    # load does not judge expiry: the caller, which owns the clock, does.
    assert (await sessions.load("g", "edge")).name == "edge"
    await sessions.delete("g", "edge")
    assert await sessions.expired(2001) == []


async def test_instances_by_group(sessions: Sessions) -> None:
    for group, name in [("h", "b"), ("g", "z"), ("g", "a")]:
        await sessions.create(instance(group, name))
    assert [(s.group, s.name) for s in await sessions.instances()] == [("g", "a"), ("g", "z"), ("h", "b")]
    assert [s.name for s in await sessions.instances("g")] == ["a", "z"]
    assert await sessions.instances("none") == []
    assert await sessions.instances("\x00readiness") == []  # what /readyz asks


async def test_lone_surrogates_round_trip(sessions: Sessions) -> None:
    """JSON can carry them ("\\ud800"); they must not turn a request into a 500."""
    state = instance("gr\ud800oup", "c")
    state.subscription = Subscription(pattern="t\udfff.*")
    await sessions.create(state)
    assert await sessions.load("gr\ud800oup", "c") == state
    assert await sessions.save(state)
    assert [s.group for s in await sessions.instances()] == ["gr\ud800oup"]
    assert [s.subscription for s in await sessions.instances("gr\ud800oup")] == [state.subscription]
    assert await sessions.expired(10**13) == [("gr\ud800oup", "c")]
    assert await sessions.delete("gr\ud800oup", "c")
