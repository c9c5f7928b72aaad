"""The push worker: every replica's ``PushRunner``, ticked every ``push_refresh_ms`` and at once
when a subscription changed through this replica (``wake``); stopping it stops every deliverer
here (each waits for its requests in flight and lets the rest of what it holds go)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from service.core.push.runner import PushRunner

from .loop import Periodic


class PushWorker(Periodic):
    """``Periodic`` over ``runner.tick``, whose ``stop`` also stops the deliverers (and calls
    ``on_stop``: what was set up for them, undone)."""

    def __init__(
        self,
        runner: PushRunner,
        interval_ms: int,
        wake: asyncio.Event,
        on_stop: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__("push", interval_ms / 1000, runner.tick, wake=wake)
        self.runner = runner
        self._on_stop = on_stop

    async def stop(self) -> None:
        await super().stop()
        await self.runner.stop()
        self._on_stop()
