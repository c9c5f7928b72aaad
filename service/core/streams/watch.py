"""One timer for all of a replica's streams: whether their credentials and the ACLs still let them read.

A stream's poll waits for as long as a long-poll does (until records, a rebalance, a wake, the
drain or the end of its lifetime), so an idle stream no longer asks before each poll whether it
may still read. ``AccessWatch`` asks for every open stream at once, every ``period_s``
(``RECHECK_S``), in one task: a stream its credential or the ACLs no longer let read is told why
(``Stream.refuse``), which ends its wait and then the stream. A stream registers while it is
open; the task runs only while one is.

Collaborators: ``stream.Stream`` (``recheck``, ``refuse``); ``StreamService`` owns the watch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, Protocol

from service.errors import GatewayError

log = logging.getLogger(__name__)

# How late an idle stream learns that its credential or the ACLs no longer let it read.
RECHECK_S: Final = 5.0


class Watched(Protocol):
    """What the watch needs of a stream: to ask it again, and to end it with why."""

    async def recheck(self) -> None: ...

    def refuse(self, error: GatewayError) -> None: ...


class AccessWatch:
    """Asks every registered stream, every ``period_s``, whether it may still read (``recheck``),
    in one task for all of them; a stream refused is told (``refuse``) and stops being asked."""

    def __init__(self, period_s: float = RECHECK_S) -> None:
        self._period_s = period_s
        self._streams: dict[Watched, None] = {}  # in the order they opened
        self._task: asyncio.Task[None] | None = None

    @property
    def watched(self) -> int:
        return len(self._streams)

    @contextmanager
    def watching(self, stream: Watched) -> Iterator[None]:
        """``stream`` asked again every period while the block runs."""
        self._streams[stream] = None
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="stream access watch")
        try:
            yield
        finally:
            self._streams.pop(stream, None)

    async def _run(self) -> None:
        while self._streams:
            await asyncio.sleep(self._period_s)
            for stream in list(self._streams):
                if stream not in self._streams:  # it ended meanwhile
                    continue
                try:
                    await stream.recheck()
                except GatewayError as exc:  # refused (403, 401) or a backend down: the stream ends
                    self._streams.pop(stream, None)
                    stream.refuse(exc)
        self._task = None

    async def close(self) -> None:
        """Stop asking (idempotent): the gateway stops."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
        log.debug("stream access watch stopped")
