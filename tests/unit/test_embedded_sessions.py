"""Embedded sessions: compare-and-set saves, copies that protect the store, leases."""

from __future__ import annotations

import asyncio

import pytest

from service.adapters.embedded.sessions import EmbeddedSessions
from service.core.models import InstanceConfig, InstanceState, Subscription, TopicPartition
from service.core.ports import Sessions
from service.errors import ConsumerAlreadyExists, ConsumerInstanceNotFound

TP = TopicPartition


def instance(
    group: str = "g", name: str = "c", *, last_seen_ms: int = 1000, timeout_ms: int = 500
) -> InstanceState:
    return InstanceState(
        group=group,
        name=name,
        config=InstanceConfig(instance_timeout_ms=timeout_ms),
        created_ms=last_seen_ms,
        last_seen_ms=last_seen_ms,
    )


@pytest.fixture
async def sessions() -> EmbeddedSessions:
    s = EmbeddedSessions()
    await s.start()
    return s


def test_implements_the_port() -> None:
    assert isinstance(EmbeddedSessions(), Sessions)


async def test_create_load_delete(sessions: EmbeddedSessions) -> None:
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


async def test_save_is_compare_and_set_and_bumps_the_version(sessions: EmbeddedSessions) -> None:
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


async def test_concurrent_saves_only_one_wins(sessions: EmbeddedSessions) -> None:
    await sessions.create(instance())
    copies = [await sessions.load("g", "c") for _ in range(10)]
    for i, c in enumerate(copies):
        c.positions[TP("t", 0)] = i
    results = await asyncio.gather(*(sessions.save(c) for c in copies))
    assert sum(results) == 1


async def test_save_of_a_deleted_instance_fails(sessions: EmbeddedSessions) -> None:
    await sessions.create(instance())
    state = await sessions.load("g", "c")
    await sessions.delete("g", "c")
    assert await sessions.save(state) is False
    with pytest.raises(ConsumerInstanceNotFound):
        await sessions.load("g", "c")


async def test_callers_cannot_mutate_the_store(sessions: EmbeddedSessions) -> None:
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


async def test_subscription_and_fields_round_trip(sessions: EmbeddedSessions) -> None:
    state = instance()
    state.subscription = Subscription(pattern="t.*")
    state.generation = 4
    state.positions = {TP("a", 1): 5, TP("b", 0): 0}
    await sessions.create(state)
    loaded = await sessions.load("g", "c")
    assert loaded == state


async def test_touch_renews_the_lease_without_taking_the_version(sessions: EmbeddedSessions) -> None:
    await sessions.create(instance(last_seen_ms=1000, timeout_ms=500))
    state = await sessions.load("g", "c")
    await sessions.touch("g", "c", 5000)
    stored = await sessions.load("g", "c")
    assert (stored.last_seen_ms, stored.expires_ms, stored.version) == (5000, 5500, 0)
    # A save of a copy loaded before the touch does not move the lease back.
    state.positions[TP("t", 0)] = 3
    assert await sessions.save(state)
    assert (await sessions.load("g", "c")).last_seen_ms == 5000
    with pytest.raises(ConsumerInstanceNotFound):
        await sessions.touch("g", "missing", 1)


async def test_expired_lists_instances_whose_lease_ran_out(sessions: EmbeddedSessions) -> None:
    await sessions.create(instance("g", "old", last_seen_ms=1000, timeout_ms=500))  # expires 1500
    await sessions.create(instance("g", "edge", last_seen_ms=1500, timeout_ms=500))  # expires 2000
    await sessions.create(instance("h", "young", last_seen_ms=1900, timeout_ms=500))  # expires 2400
    assert await sessions.expired(2000) == [("g", "old")]
    assert await sessions.expired(2001) == [("g", "edge"), ("g", "old")]
    await sessions.touch("g", "old", 2000)
    assert await sessions.expired(2001) == [("g", "edge")]
    # load does not judge expiry: the caller, which owns the clock, does.
    assert (await sessions.load("g", "edge")).name == "edge"


async def test_instances_by_group(sessions: EmbeddedSessions) -> None:
    for group, name in [("h", "b"), ("g", "z"), ("g", "a")]:
        await sessions.create(instance(group, name))
    assert [(s.group, s.name) for s in await sessions.instances()] == [("g", "a"), ("g", "z"), ("h", "b")]
    assert [s.name for s in await sessions.instances("g")] == ["a", "z"]
    assert await sessions.instances("none") == []


async def test_lifecycle_is_idempotent() -> None:
    async with EmbeddedSessions() as s:
        await s.create(instance())
        await s.stop()
        await s.stop()
