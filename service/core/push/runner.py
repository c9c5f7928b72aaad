"""Which replica delivers which subscription: a named lock each, and a deliverer while it is held.

Every replica runs a ``PushRunner``; each ``tick`` (the ``push`` worker's, and at once after a
subscription changed through this replica) reads the subscriptions, stops the deliverers of
those deleted, paused or changed, asks which of the other subscriptions' locks ``push.<name>``
someone holds (a read each, all at once), and tries for a moment, one at a time, to take each
lock no one holds: subscriptions delivered by other replicas cost a tick a read, not a wait.
Whoever holds the lock delivers: one replica at a time. The lock is the coordinator's: a
ZooKeeper lock is released when its holder's session ends, so when a replica dies another takes
the subscription over within the session timeout and a tick; the records the dead one held come
back as their locks expire (twice the deadline). A change of secrets only is given to the
running deliverer.

Collaborators: ``PushStore``, ``Locks``, and a factory of ``Deliverer``s (the composition
root's, which gives each its own share limits).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from service.errors import GatewayError, LockTimeout

from ..ports import Locks
from .deliverer import Deliverer
from .ports import PushStore
from .spec import PushSubscription
from .stats import PushStats
from .stored import from_stored

log = logging.getLogger(__name__)

CONTEND_S: Final = 0.2  # how long a tick waits for one subscription's lock
STOP_S: Final = 65.0  # the most a deliverer is waited for when the runner stops (a deadline and more)

DelivererFactory = Callable[[PushSubscription, PushStats], Deliverer]


@dataclass(slots=True)
class _Running:
    deliverer: Deliverer | None
    stop: asyncio.Event
    task: asyncio.Task[None]


class PushRunner:
    """The subscriptions this replica delivers (see the module docstring)."""

    def __init__(
        self, store: PushStore, locks: Locks, make: DelivererFactory, stats: dict[str, PushStats]
    ) -> None:
        self._store = store
        self._locks = locks
        self._make = make
        self.stats = stats  # by name, of the deliverers running here: what describing shows
        self._running: dict[str, _Running] = {}

    @property
    def delivering(self) -> list[str]:
        """The subscriptions delivered from this replica, by name."""
        return sorted(n for n, r in self._running.items() if r.deliverer is not None and not r.task.done())

    async def tick(self) -> None:
        """Stop what must stop, then contend for every active subscription not delivered here."""
        subs = {
            name: from_stored(data, version)
            for name, (data, version) in (await self._store.push_subscriptions()).items()
        }
        for name, running in list(self._running.items()):
            sub = subs.get(name)
            if running.task.done():
                del self._running[name]
                self.stats.pop(name, None)
                with contextlib.suppress(asyncio.CancelledError):
                    if (exc := running.task.exception()) is not None:
                        log.warning("push %s: its deliverer stopped: %s", name, exc)
                continue
            d = running.deliverer
            if sub is None or sub.paused or (d is not None and d.sub.spec != sub.spec):
                running.stop.set()
            elif d is not None and d.sub.version != sub.version:
                d.sub = replace(sub)  # new secrets only: the deliverer signs with them from now on
        free = [sub for name, sub in sorted(subs.items()) if not sub.paused and name not in self._running]
        # Held elsewhere, most of them, with many replicas: only those no one holds are waited for.
        contended = await asyncio.gather(
            *(self._locks.contended(_lock(sub)) for sub in free), return_exceptions=True
        )
        for sub, taken in zip(free, contended, strict=True):
            if taken is not True:  # free, or not known (then the wait says)
                await self._contend(sub)

    async def stop(self) -> None:
        """Stop every deliverer here: each waits for its requests and lets the rest go."""
        for running in self._running.values():
            running.stop.set()
        tasks = [r.task for r in self._running.values()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self._running.clear()
        self.stats.clear()

    async def _contend(self, sub: PushSubscription) -> None:
        held = asyncio.Event()
        running = _Running(None, asyncio.Event(), asyncio.ensure_future(asyncio.sleep(0)))
        running.task = asyncio.ensure_future(self._deliver(sub, running, held))
        waiting = asyncio.ensure_future(held.wait())
        try:
            await asyncio.wait({running.task, waiting}, return_when="FIRST_COMPLETED")
        except BaseException:  # the tick was cancelled: no deliverer may run that nobody tracks
            running.stop.set()
            running.task.cancel()
            raise
        finally:
            waiting.cancel()
        if held.is_set():
            self._running[sub.name] = running
        elif not running.task.cancelled() and (exc := running.task.exception()) is not None:
            if not isinstance(exc, LockTimeout):
                log.warning("push %s: not taken: %s", sub.name, exc)

    async def _deliver(self, sub: PushSubscription, running: _Running, held: asyncio.Event) -> None:
        async with self._locks.lock(_lock(sub), timeout_s=CONTEND_S):
            stats = self.stats[sub.name] = PushStats()
            running.deliverer = self._make(sub, stats)
            held.set()
            log.info("push %s: delivering from this replica", sub.name)
            try:
                await running.deliverer.run(running.stop)
            except GatewayError as exc:
                log.warning("push %s: delivery stopped: %s", sub.name, exc)


def _lock(sub: PushSubscription) -> str:
    return f"push.{sub.name}"
