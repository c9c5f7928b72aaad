"""Two adapters on one Redis behave as one store: what two gateway replicas need.

A consumer instance created through replica A is polled through B and
committed through C; their load → change → compare-and-set save loops must
never lose an update nor let two requests advance the same version.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from redis.asyncio import Redis

from deploy.local.redis_server import RedisServer
from service.adapters.redis import RedisSessions
from service.adapters.redis.keys import KeyLayout
from service.adapters.redis.scripts import CREATE, SAVE
from service.core.models import Subscription, TopicPartition
from service.errors import ConsumerAlreadyExists, ConsumerInstanceNotFound
from tests.helpers import instance

from .conftest import SessionsFactory

TP = TopicPartition


async def test_two_replicas_see_the_same_instances(make_sessions: SessionsFactory) -> None:
    a, b = await make_sessions(), await make_sessions()
    await a.create(instance("g", "c"))
    with pytest.raises(ConsumerAlreadyExists):
        await b.create(instance("g", "c"))

    state = await b.load("g", "c")
    state.subscription = Subscription(topics=("t",))
    state.positions[TP("t", 0)] = 5
    assert await b.save(state)
    assert (await a.load("g", "c")).positions == {TP("t", 0): 5}

    stale = await a.load("g", "c")
    await b.touch("g", "c", 9000)
    assert await a.save(stale)  # a touch elsewhere does not take the version
    assert (await b.load("g", "c")).last_seen_ms == 9000

    assert [(s.group, s.name) for s in await a.instances()] == [("g", "c")]
    assert await b.expired(9501) == [("g", "c")]
    assert await b.delete("g", "c") is True
    with pytest.raises(ConsumerInstanceNotFound):
        await a.load("g", "c")
    assert await a.delete("g", "c") is False


async def test_concurrent_read_modify_write_loses_nothing(make_sessions: SessionsFactory) -> None:
    """20 requests through two replicas, each retrying until its increment lands, as the core does."""
    replicas = [await make_sessions(), await make_sessions()]
    await replicas[0].create(instance())
    tp = TP("t", 0)
    won_versions: list[int] = []
    conflicts = 0

    async def request(sessions: RedisSessions) -> None:
        nonlocal conflicts
        while True:
            state = await sessions.load("g", "c")
            state.positions[tp] = state.positions.get(tp, 0) + 1
            await asyncio.sleep(0)  # let the others load the same version
            if await sessions.save(state):
                won_versions.append(state.version)
                return
            conflicts += 1

    await asyncio.gather(*(request(r) for r, _ in zip(itertools.cycle(replicas), range(20), strict=False)))

    stored = await replicas[1].load("g", "c")
    assert stored.positions[tp] == 20  # no increment lost
    assert stored.version == 20
    assert sorted(won_versions) == list(range(1, 21))  # no version won twice
    assert conflicts > 0  # they did collide; otherwise the test proves nothing


async def test_a_retried_write_recognises_itself(redis_server: RedisServer, prefix: str) -> None:
    """What redis-py's retry after a dropped reply sends: the same script call, token and all."""
    layout = KeyLayout(prefix)
    keys = (layout.instance("g", "c"), layout.leases, layout.group("g"))
    member = layout.member("g", "c")

    def create(token: str) -> tuple[int | str | bytes, ...]:
        return (0, 1000, 500, 60_000, member, "c", b"{}", token)

    def save(expected: int, token: str) -> tuple[int | str | bytes, ...]:
        return (expected, 2000, 500, 60_000, member, "c", b"{}", token)

    client = Redis.from_url(redis_server.url)
    try:
        assert await CREATE(client, keys, create("replica-a:0")) == 1
        assert await CREATE(client, keys, create("replica-a:0")) == 1  # the retry: created, not a clash
        assert await CREATE(client, keys, create("replica-b:3")) == 0  # anyone else's: it exists
        assert await SAVE(client, keys, save(0, "replica-a:1")) == 1
        assert await SAVE(client, keys, save(0, "replica-a:1")) == 1  # the retry: success, not a conflict
        assert await SAVE(client, keys, save(0, "replica-b:7")) == -1  # anyone else's: a conflict
        assert await SAVE(client, keys, save(1, "replica-b:7")) == 2
        assert await SAVE(client, keys, save(0, "replica-a:1")) == -1  # too late to claim it now
        assert await client.hget(keys[0], "v") == b"2"
    finally:
        await client.aclose()
