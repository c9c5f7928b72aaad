"""The start/stop state every adapter shares (``service.adapters.lifecycle``) and the task helpers."""

from __future__ import annotations

import asyncio

import pytest

from service.adapters.lifecycle import Lifecycle
from service.adapters.tasks import uncancellable


class Adapter(Lifecycle):
    """Counts its opens and closes; ``gate`` holds them half way, ``fail`` makes the next open fail."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = 0
        self.closed = 0
        self.fail = False
        self.gate: asyncio.Event | None = None

    async def _open(self) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            self.fail = False
            raise OSError("refused")
        self.opened += 1

    async def _close(self) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.closed += 1


class OneShot(Adapter):
    restartable = False


async def test_start_and_stop_are_idempotent() -> None:
    a = Adapter()
    await a.stop()  # never started: nothing to close
    await a.start()
    await a.start()
    assert a.opened == 1
    await a.stop()
    await a.stop()
    assert a.closed == 1


async def test_concurrent_starts_open_once_and_all_wait_for_it() -> None:
    a = Adapter()
    a.gate = asyncio.Event()
    starts = [asyncio.create_task(a.start()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(t.done() for t in starts)
    a.gate.set()
    await asyncio.gather(*starts)
    assert a.opened == 1 and a._state == "started"


async def test_concurrent_stops_close_once_and_all_wait_for_it() -> None:
    a = Adapter()
    await a.start()
    a.gate = asyncio.Event()
    stops = [asyncio.create_task(a.stop()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(t.done() for t in stops)
    a.gate.set()
    await asyncio.gather(*stops)
    assert a.closed == 1 and a._state == "stopped"


async def test_a_failed_start_can_be_retried() -> None:
    a = Adapter()
    a.fail = True
    with pytest.raises(OSError):
        await a.start()
    assert a._state == "new"
    await a.stop()  # nothing was opened
    assert a.closed == 0
    await a.start()
    assert a.opened == 1 and a._state == "started"


async def test_a_stop_during_a_start_waits_for_it_then_closes() -> None:
    a = Adapter()
    a.gate = asyncio.Event()
    start = asyncio.create_task(a.start())
    await asyncio.sleep(0)
    stop = asyncio.create_task(a.stop())
    await asyncio.sleep(0)
    assert not stop.done()
    a.gate.set()
    await asyncio.gather(start, stop)
    assert (a.opened, a.closed, a._state) == (1, 1, "stopped")


async def test_restart_after_stop_unless_the_adapter_is_one_shot() -> None:
    again = Adapter()
    async with again:
        pass
    await again.start()
    assert again.opened == 2 and again._state == "started"

    once = OneShot()
    async with once:
        pass
    await once.start()
    assert once.opened == 1 and once._state == "stopped"


async def test_uncancellable_finishes_the_operation_when_the_caller_goes_away() -> None:
    release = asyncio.Event()
    done: list[str] = []

    async def operation() -> str:
        await release.wait()
        done.append("yes")
        return "yes"

    caller = asyncio.create_task(uncancellable(operation()))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    release.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert done == ["yes"]
    assert await uncancellable(operation()) == "yes"
