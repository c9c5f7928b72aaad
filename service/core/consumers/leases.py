"""The leases of the instances whose polls are waiting on this replica, renewed together.

A consumer instance's lease runs out ``consumer.instance.timeout.ms`` after its last request. A
poll (or a push stream's poll) that waits longer than a third of that must renew it meanwhile,
or another replica's reaper would take the instance from under it. Rather than end its wait on
a timer of its own to do so, a waiting poll registers here (``WaitingLeases.holding``) and one
task for them all touches the leases of the waits that are due, a third of the lease after their
last renewal (``renew``): a heap ordered by when each is due, so the task sleeps until the first
and looks only at those, and a waiting poll costs nothing until there is something for it. The
task runs only while a wait is open.

Collaborators: the ``Sessions`` port (``touch``); ``instances.Instances`` owns one.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from service.errors import ConsumerInstanceNotFound, GatewayError

from ..models import InstanceState
from ..ports import Sessions

log = logging.getLogger(__name__)

_Key = tuple[str, str]
_RETRY_MS = 200  # after a failed renewal


class WaitingLeases:
    """The waiting instances of this replica, each with when its lease is next renewed."""

    def __init__(self, sessions: Sessions, now_ms: Callable[[], int]) -> None:
        self._sessions = sessions
        self._now_ms = now_ms
        self._waits: dict[_Key, int] = {}  # how many waits each instance has open
        self._timeouts: dict[_Key, int] = {}  # its lease's length, as its last wait saw it
        self._next: dict[_Key, int] = {}  # when each waiting instance is next renewed
        # (renew at, tie-break, instance); an entry whose time is not the instance's ``_next`` is
        # one it no longer has (renewed sooner, or no wait open): dropped when reached
        self._due: list[tuple[int, int, _Key]] = []
        self._seq = itertools.count()
        self._sooner = asyncio.Event()  # a wait came or went: the task looks at the heap again
        self._task: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """Instances with a wait open."""
        return len(self._waits)

    @property
    def scheduled(self) -> int:
        """How many renewals are in the heap, live or not: at most one live per waiting instance,
        and the others gone within a third of a lease."""
        return len(self._due)

    @contextmanager
    def holding(self, state: InstanceState, wait_ms: int) -> Iterator[None]:
        """While the block (a wait of at most ``wait_ms``) runs, ``state``'s lease is renewed a
        third of its length after it was last renewed (at once, if that is past), and every third
        of its length after that; a wait that ends before the first renewal is due needs none."""
        key = (state.group, state.name)
        timeout = state.config.instance_timeout_ms
        now = self._now_ms()
        at = max(now, state.last_seen_ms + _third(timeout))
        if now + wait_ms < at and key not in self._waits:
            yield
            return
        self._waits[key] = self._waits.get(key, 0) + 1
        self._timeouts[key] = timeout
        if at < self._next.get(key, at + 1):
            self._schedule(key, at)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="waiting leases")
        try:
            yield
        finally:
            left = self._waits[key] - 1
            if left:
                self._waits[key] = left
            else:
                del self._waits[key], self._timeouts[key], self._next[key]
                if not self._waits:
                    self._sooner.set()  # the task ends

    def _schedule(self, key: _Key, at_ms: int) -> None:
        if not self._due or at_ms < self._due[0][0]:
            self._sooner.set()
        self._next[key] = at_ms
        heapq.heappush(self._due, (at_ms, next(self._seq), key))

    async def _run(self) -> None:
        try:
            while self._waits:
                self._sooner.clear()
                wait_s = (self._due[0][0] - self._now_ms()) / 1000 if self._due else None
                if wait_s is None or wait_s > 0:
                    try:
                        async with asyncio.timeout(wait_s):
                            await self._sooner.wait()
                    except TimeoutError:
                        pass
                    continue
                await self.renew()
        finally:
            self._task = None

    async def renew(self) -> int:
        """Touch the lease of every waiting instance that is due; how many were touched."""
        now = self._now_ms()
        due: dict[_Key, None] = {}  # in the order they came due, each once
        while self._due and self._due[0][0] <= now:
            at, _, key = heapq.heappop(self._due)
            if self._next.get(key) == at:  # its live entry
                due[key] = None
        touched = 0
        for key in due:
            try:
                await self._sessions.touch(*key, now)
                touched += 1
                again = now + _third(self._timeouts.get(key, 0))
            except ConsumerInstanceNotFound:  # deleted meanwhile: its wait ends by itself
                continue
            except GatewayError as exc:  # the store is down: asked again shortly
                log.warning("cannot renew the lease of %r/%s while it waits: %s", *key, exc)
                again = now + _RETRY_MS
            if key in self._waits:
                self._schedule(key, again)
        return touched


def _third(timeout_ms: int) -> int:
    return max(1, timeout_ms // 3)
