"""Which replica delivers which push subscription, on each real coordinator: a runner takes every
subscription no one holds, waits for none another runner holds, and takes them over once the
holder lets go. (The deliverers here deliver nothing: what is judged is who holds what.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import pytest

from service.core.ports import Coordinator
from service.core.push.deliverer import Deliverer
from service.core.push.runner import PushRunner
from service.core.push.spec import PushSpec, PushSubscription
from service.core.push.stats import PushStats
from service.core.push.stored import to_stored
from tests.integration.test_coordinator_port import build

SUBSCRIPTIONS = 12


@pytest.fixture(params=["embedded", "zookeeper"])
async def coord(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Coordinator]:
    c = build(request, tmp_path)
    await c.start()
    try:
        yield c
    finally:
        await c.stop()


class Idle:
    """A deliverer that holds its subscription and delivers nothing until it is stopped."""

    def __init__(self, sub: PushSubscription, stats: PushStats) -> None:
        self.sub = sub

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


def idle(sub: PushSubscription, stats: PushStats) -> Deliverer:
    return cast(Deliverer, Idle(sub, stats))


class Watched:
    """The coordinator's locks, with the names a runner waited on written down."""

    def __init__(self, coord: Coordinator) -> None:
        self._coord = coord
        self.waited: list[str] = []

    @asynccontextmanager
    async def lock(self, name: str, *, timeout_s: float = 10.0) -> AsyncIterator[None]:
        self.waited.append(name)
        async with self._coord.lock(name, timeout_s=timeout_s):
            yield

    async def contended(self, name: str) -> bool:
        return await self._coord.contended(name)


def names() -> Iterator[str]:
    return (f"sub-{n:02d}" for n in range(SUBSCRIPTIONS))


async def test_a_runner_waits_for_no_subscription_another_holds_and_takes_them_when_let_go(
    coord: Coordinator,
) -> None:
    for name in names():
        sub = PushSubscription(
            name, f"uid-{name}", "User:alice", PushSpec("https://h.example.com/", ("t",)), 0
        )
        assert await coord.put_push_subscription(name, to_stored(sub), expected_version=None) is not None
    a = PushRunner(coord, coord, idle, {})
    await a.tick()
    assert a.delivering == list(names())
    watched = Watched(coord)
    b = PushRunner(coord, watched, idle, {})
    await b.tick()
    assert b.delivering == [] and watched.waited == []  # a read each, no 0.2 s wait on any
    await a.stop()  # (a replica gone lets go of its locks as its session ends)
    await b.tick()
    assert b.delivering == list(names())
    assert watched.waited == [f"push.{n}" for n in names()]
    await b.stop()
