"""What every adapter shares: one start/stop state machine, and ``async with adapter:``."""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import ClassVar, Literal, Self

LifecycleState = Literal["new", "starting", "started", "stopping", "stopped"]


class Lifecycle:
    """Base of every adapter: ``start()`` runs ``_open`` and ``stop()`` runs ``_close``, each once.

    - ``start()`` is idempotent: on a started adapter it does nothing, and
      concurrent calls wait for the one under way.
    - A failed (or cancelled) ``start()`` leaves the adapter ``"new"``: it may be retried.
    - ``stop()`` closes once however often and however concurrently it is
      called; later callers wait for the first. A stop that meets a start
      under way waits for it, then stops what it opened.
    - After a stop, ``start()`` opens again, unless the class sets
      ``restartable = False`` (then the adapter stays stopped).

    Subclasses override ``_open``/``_close`` and read ``_state`` where an
    operation needs a started adapter.
    """

    restartable: ClassVar[bool] = True
    _state: LifecycleState
    _settled: asyncio.Event | None

    def __init__(self) -> None:
        self._state = "new"
        self._settled = None  # set when the start or stop under way ends

    async def start(self) -> None:
        await self._wait_settled()
        if self._state == "started" or (self._state == "stopped" and not self.restartable):
            return
        self._state = "starting"
        settled = self._settled = asyncio.Event()
        try:
            await self._open()
        except BaseException:
            self._state = "new"
            raise
        else:
            self._state = "started"
        finally:
            settled.set()

    async def stop(self) -> None:
        await self._wait_settled()
        if self._state != "started":
            return
        self._state = "stopping"
        settled = self._settled = asyncio.Event()
        try:
            await self._close()
        finally:
            self._state = "stopped"
            settled.set()

    async def _open(self) -> None:
        """Open what the adapter needs; on failure, leave nothing open and raise."""

    async def _close(self) -> None:
        """Close what ``_open`` opened."""

    async def _wait_settled(self) -> None:
        while self._state in ("starting", "stopping"):
            assert self._settled is not None
            await self._settled.wait()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
