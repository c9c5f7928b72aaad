"""``ByteBudget``: an asyncio semaphore counted in bytes, first come first served.

The producer holds records in memory from the moment a request hands them
over until Kafka acknowledges them (or gives up). Under load, or while a
broker is away, that memory would grow without bound; the budget caps it:
an append takes the bytes of its records before building batches and gives
them back when the batches complete. A request that cannot get its bytes
within its deadline gets ``TimeoutError`` (the log answers 503).

Waiters are served strictly in arrival order, so a large request is not
starved by a stream of small ones. A request larger than the whole budget
waits for the budget to be entirely free and then takes all of it, so it
still goes through, alone. Pure asyncio, no I/O.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field


@dataclass(slots=True, eq=False)  # identity: two waiters for the same amount are distinct
class _Waiter:
    amount: int
    future: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class ByteBudget:
    """At most ``capacity`` bytes taken at any time; ``acquire`` waits, ``release`` gives back."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        self._capacity = capacity
        self._available = capacity
        self._waiters: deque[_Waiter] = deque()

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def available(self) -> int:
        return self._available

    @property
    def in_use(self) -> int:
        return self._capacity - self._available

    def grant_for(self, amount: int) -> int:
        """What ``acquire(amount)`` takes: the amount, capped at the capacity."""
        return min(max(amount, 0), self._capacity)

    async def acquire(self, amount: int, timeout: float) -> int:
        """Take ``amount`` bytes (capped at the capacity), waiting at most ``timeout`` seconds.

        Returns what was taken (pass it to ``release``); raises ``TimeoutError``.
        """
        amount = self.grant_for(amount)
        if not self._waiters and amount <= self._available:
            self._available -= amount
            return amount
        waiter = _Waiter(amount)
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter.future
        except BaseException:
            if waiter.future.done() and not waiter.future.cancelled():
                self.release(amount)  # granted just as the timeout (or a cancel) hit: give it back
            else:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                self._wake()  # the head may have been blocking smaller waiters behind it
            raise
        return amount

    def release(self, amount: int) -> None:
        if amount <= 0:
            return
        self._available = min(self._available + amount, self._capacity)
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            head = self._waiters[0]
            if head.future.done():  # cancelled, its task not yet resumed: it takes nothing
                self._waiters.popleft()
                continue
            if head.amount > self._available:
                return
            self._waiters.popleft()
            self._available -= head.amount
            head.future.set_result(None)
