"""What keeps a client guessing passwords to itself: budgets of wrong guesses, fair hashing turns.

``GuessBudget`` counts failed password checks in token buckets (the pure math of
``service.core.buckets``): one per client address and one per user name. A name's bucket exists
for any name, in the file or not, so that neither its answers nor its cost tell whether a user
exists. While a bucket has no whole guess left, the checks it answers for are refused
(``TooManyGuesses``, 429) before any hashing. A check from an address the name signed in from
before answers to a bucket of that pair instead, so a guesser cannot keep a user from signing in
again where it works. A password already verified asks no bucket at all: the budgets gate the
hashing of passwords not known good, never a user's remembered one.

``HashLanes`` hands out the few hashing turns (argon2 costs tens of milliseconds and 64 MiB each)
round-robin over lanes, one lane per client address, lanes without recent failures first: a
client's correct sign-in waits for the hashes already running, never behind another client's
queue of guesses. ``service.security.users.Verifier`` puts the two together.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Final

from service.core.buckets import Limit, refill
from service.errors import Throttled

MAX_BUCKETS: Final = 100_000  # per kind; the least recently charged is forgotten beyond


class TooManyGuesses(Throttled):
    """Too many wrong passwords from this address or for this name: retry after ``retry_after``."""

    default_message = "Too many failed sign-ins; retry later."


class _Buckets:
    """Token buckets by key, at most ``MAX_BUCKETS``; a bucket never charged (or forgotten) is full."""

    def __init__(self, limit: Limit, clock: Callable[[], float]) -> None:
        self.limit = limit
        self._clock = clock
        self._levels: OrderedDict[bytes, tuple[float, float]] = OrderedDict()  # key → (level, at ms)

    def level(self, key: bytes) -> float:
        level, at_ms = self._levels.get(key, (None, 0.0))
        return refill(level, at_ms, self.limit, self._clock() * 1000)

    def wait_s(self, key: bytes) -> int:
        """Whole seconds until the bucket holds a whole guess again (0: it does now)."""
        level = self.level(key)
        if level >= 1:
            return 0
        seconds = max(1, math.floor((1 - level) / self.limit.rate))
        while refill(level, 0, self.limit, seconds * 1000) < 1:  # the float division may land short
            seconds += 1
        return seconds

    def charge(self, key: bytes) -> None:
        now_ms = self._clock() * 1000
        self._levels[key] = (self.level(key) - 1, now_ms)
        self._levels.move_to_end(key)
        while len(self._levels) > MAX_BUCKETS:
            # Forgetting the oldest: most have refilled long ago; a guesser cycling through this
            # many keys pays for every one with its address's budget.
            self._levels.popitem(last=False)


class GuessBudget:
    """Failed password checks per client address and per user name (token buckets, per replica),
    and per (name, address) for the places a user signed in from.

    A check from where the name signed in before answers to that pair's budget only: a user keeps
    working from there whatever others guess, from there for other names or from elsewhere for
    it, and a guesser sharing its address has the pair's budget to guess it with, no more.
    Any other check answers to the address's budget and the name's.
    """

    def __init__(
        self,
        *,
        per_address: int,
        per_name: int,
        refill_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._addresses = _Buckets(Limit(1 / refill_s, per_address * refill_s), clock)
        self._names = _Buckets(Limit(1 / refill_s, per_name * refill_s), clock)
        self._places = _Buckets(Limit(1 / refill_s, per_name * refill_s), clock)

    @staticmethod
    def _key(*parts: str) -> bytes:
        # names are the client's to choose: a bucket keeps a fixed-size digest of one
        data = b"\0".join(part.encode("utf-8", "surrogatepass") for part in parts)
        return hashlib.blake2b(data, digest_size=16).digest()

    def refusal(self, name: str, address: str, *, signed_in_here: bool) -> int | None:
        """Seconds until a check of ``name`` from ``address`` is allowed again; None if it is now."""
        if signed_in_here:
            wait = self._places.wait_s(self._key(name, address))
        else:
            wait = max(self._addresses.wait_s(self._key(address)), self._names.wait_s(self._key(name)))
        return wait or None

    def failed(self, name: str, address: str, *, signed_in_here: bool) -> None:
        """Count one wrong password (or unknown name: the same) against the address and the name,
        and against the pair when the name signed in from there before."""
        self._addresses.charge(self._key(address))
        self._names.charge(self._key(name))
        if signed_in_here:
            self._places.charge(self._key(name, address))

    def clean(self, address: str) -> bool:
        """True if no wrong password from ``address`` is still counted (its bucket is full)."""
        return self._addresses.level(self._key(address)) >= self._addresses.limit.capacity


class HashLanes:
    """``slots`` hashing turns, served round-robin over lanes, lanes ``clean`` says are clean first."""

    def __init__(self, slots: int, clean: Callable[[str], bool]) -> None:
        self._free = slots
        self._clean = clean
        self._lanes: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

    @asynccontextmanager
    async def turn(self, lane: str) -> AsyncIterator[None]:
        """Wait for a turn in ``lane`` and hold it for the block."""
        if self._free > 0 and not self._lanes:
            self._free -= 1
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._lanes.setdefault(lane, deque()).append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._release()  # granted as it was cancelled: the turn goes to the next
                else:
                    self._leave(lane, waiter)
                raise
        try:
            yield
        finally:
            self._release()

    def _leave(self, lane: str, waiter: asyncio.Future[None]) -> None:
        queue = self._lanes.get(lane)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._lanes[lane]

    def _release(self) -> None:
        if not self._lanes:
            self._free += 1
            return
        chosen = next((lane for lane in self._lanes if self._clean(lane)), next(iter(self._lanes)))
        queue = self._lanes.pop(chosen)
        waiter = queue.popleft()
        if queue:
            self._lanes[chosen] = queue  # to the back of the round
        waiter.set_result(None)
