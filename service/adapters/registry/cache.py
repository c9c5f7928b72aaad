"""What the external registry's client keeps so that a produce does not ask the registry each time.

``LruCache`` holds answers that do not change (a schema id names one schema for good), within a
budget of weight (the characters of the schema texts) and of entries, the least recently used
out first. ``SingleFlight`` makes concurrent calls for one key share one request: a burst of
produces with a schema not yet known asks the registry once, not once per produce.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["LruCache", "SingleFlight"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """At most ``max_weight`` of values and ``max_entries`` of them; the least recently used go first.

    A value heavier than the whole budget is not kept at all.
    """

    def __init__(self, *, max_weight: int, max_entries: int) -> None:
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._max_weight = max_weight
        self._max_entries = max_entries
        self.weight = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        found = self._items.get(key)
        if found is None:
            return None
        self._items.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V, weight: int) -> None:
        self.discard(key)
        if weight > self._max_weight or self._max_entries < 1:
            return
        self._items[key] = (value, weight)
        self.weight += weight
        while self.weight > self._max_weight or len(self._items) > self._max_entries:
            _, (_, dropped) = self._items.popitem(last=False)
            self.weight -= dropped

    def discard(self, key: K) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self.weight -= old[1]

    def clear(self) -> None:
        self._items.clear()
        self.weight = 0


class SingleFlight(Generic[K, V]):
    """Concurrent ``run`` calls with one key share the one call the first of them started.

    The call runs in a task of its own: a caller that goes away (its client disconnected) does
    not cancel it for the others. ``cancel`` ends every call under way (the client is stopping).
    """

    def __init__(self) -> None:
        self._calls: dict[K, asyncio.Task[V]] = {}

    async def run(self, key: K, call: Callable[[], Awaitable[V]]) -> V:
        task = self._calls.get(key)
        if task is None:
            task = asyncio.ensure_future(call())
            self._calls[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        return await asyncio.shield(task)

    def _forget(self, key: K, done: asyncio.Task[V]) -> None:
        if self._calls.get(key) is done:
            del self._calls[key]
        _retrieve(done)

    async def cancel(self) -> None:
        calls = list(self._calls.values())
        for task in calls:
            task.cancel()
        await asyncio.gather(*calls, return_exceptions=True)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a failure as seen: every waiter may have gone away before it came."""
    if not task.cancelled():
        task.exception()
