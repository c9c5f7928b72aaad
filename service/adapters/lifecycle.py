"""What every adapter shares: ``async with adapter:`` means start, then stop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Literal, Self

LifecycleState = Literal["new", "starting", "started", "stopping", "stopped"]


class AsyncLifecycle:
    """Mixin for adapters with ``start()``/``stop()``: makes them async context managers."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


class StatefulLifecycle(AsyncLifecycle):
    """An adapter with a start/stop state: ``stop()`` runs its closing once, however often and
    however concurrently it is called; later callers wait for the first to finish."""

    _state: LifecycleState
    _stopped: asyncio.Event | None

    def __init__(self) -> None:
        self._state = "new"
        self._stopped = None

    async def _stop_once(self, close: Callable[[], Awaitable[None]]) -> None:
        if self._state in ("new", "stopped"):
            return
        if self._state == "stopping":
            assert self._stopped is not None
            await self._stopped.wait()
            return
        self._state = "stopping"
        self._stopped = asyncio.Event()
        try:
            await close()
        finally:
            self._state = "stopped"
            self._stopped.set()
