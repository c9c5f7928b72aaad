"""A periodic background task with an owner: started and cancelled by the app lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from service.errors import GatewayError

log = logging.getLogger(__name__)

# How long stop() waits for a run in progress before leaving it behind.
STOP_GRACE_S = 5.0


class Periodic:
    """Runs ``job`` every ``interval_s`` until stopped; a failing run is logged, never fatal.

    ``wake``, when given, starts the next run at once when set (and is cleared by that run):
    the way a request that changed something asks for the job without running it itself.
    """

    def __init__(
        self,
        name: str,
        interval_s: float,
        job: Callable[[], Awaitable[object]],
        *,
        wake: asyncio.Event | None = None,
    ) -> None:
        self.name = name
        self._interval = interval_s
        self._job = job
        self._wake = wake
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    async def _pause(self) -> None:
        if self._wake is None:
            await asyncio.sleep(self._interval)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), self._interval)
        self._wake.clear()

    async def _run(self) -> None:
        # The flag, not only the cancellation, ends the loop: a client library deep inside a
        # job may swallow a CancelledError, and the loop must still end at its next turn.
        while not self._stopping:
            await self._pause()
            try:
                await self._job()
            except asyncio.CancelledError:
                raise
            except GatewayError as exc:  # a backend is down: expected, said in one line
                log.warning("background job %s: %s", self.name, exc)
            except Exception:
                log.exception("background job %s failed; retrying in %.1fs", self.name, self._interval)

    async def start(self) -> None:
        if self._task is None:
            self._stopping = False
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(task, STOP_GRACE_S)
        if not task.done():
            log.warning("background job %s did not stop within %.0fs; left behind", self.name, STOP_GRACE_S)
