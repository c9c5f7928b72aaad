"""What every stream is made with and what every stream has.

``StreamLimits`` are a replica's bounds on streams (the ``max_open_streams`` and ``stream_*``
settings); a ``StreamContext`` is what one stream is made with (whose it is, the replica's
bounds, the draining event, a clock); ``Stream`` is the base of the instance's and the
partition's streams: its wake-up, its end (the gateway drains, its lifetime is over, its
credential lapsed), waits that a wake, the drain or the end of its lifetime cut short, and
riding out a backend that fails for a moment (``_ride_out``): a broker restarting, a leader
moving.

Collaborators: the ``Decision`` of the ACLs and the ``Credential`` that authenticated the
stream's client, asked before everything a stream does and, while it waits, by the replica's
``watch.AccessWatch``; ``events.End``, how a stream ends.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from service.errors import BackendUnavailable, GatewayError, Throttled

from ..acl import Decision
from ..credentials import Credential, CredentialLapsed
from ..credit import CreditLimits
from .events import ERROR, SHUTDOWN, End, Event

# A stream's poll waits at most this long (and to the end of its lifetime; an instance's lease is
# renewed meanwhile): records, a rebalance published through this replica, a wake, the drain, or its
# credential or the ACLs no longer letting it read (``watch.AccessWatch``) end it sooner, so the bound
# is only a backstop, long enough that an idle stream's poll is made again rarely (each costs about
# what a long-poll does: 10,000 idle streams make about five a second).
STEP_WAIT_MS: Final = 30 * 60_000

# A poll that failed with a 503 is made again after this back-off, doubled at each failure in a
# row up to the most: quick when a leader moved, one request a second while a broker is away.
RETRY_FIRST_S: Final = 0.1
RETRY_MOST_S: Final = 1.0

Decide = Callable[[], Awaitable[Decision]]  # what the stream's caller may do, by the bindings of now


Clock = Callable[[], float]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """A replica's bounds on streams: the ``max_open_streams`` and ``stream_*`` settings."""

    open: int = 1_000
    open_per_holder: int = 1_000  # of ``open``, one principal's (``fair.holder_of``)
    heartbeat_ms: int = 15_000
    lifetime_ms: int = 0  # 0: none
    send_timeout_ms: int = 30_000
    batch_bytes: int = 1024 * 1024
    message_bytes: int = 1024 * 1024
    credit: CreditLimits = field(default_factory=CreditLimits)
    held_bytes: int = 2 * 1024 * 1024  # of a WebSocket's messages read and not yet answered
    held_bytes_per_holder: int = 16 * 1024 * 1024  # of one principal's sockets together
    backend_retry_ms: int = 30_000  # polls failing with 503 are made again for this long; 0: end at once


@dataclass(frozen=True, slots=True)
class StreamContext:
    """What every stream is made with: whose it is (``decide``, what its caller may do by the
    bindings of now; ``client``, whom the consume quotas charge, "" without them; ``credential``,
    what authenticated it, which must still hold for anything it does) and what the
    replica bounds it with (its ``limits``, the gateway's ``draining`` event, which ends every
    stream, and the ``clock`` its lifetime and pauses are measured by)."""

    decide: Decide
    client: str
    limits: StreamLimits
    draining: asyncio.Event
    clock: Clock = time.monotonic
    credential: Credential | None = None  # None: authentication is off


class Stream:
    """What every stream has: its context, its wake-up, its end, and waits that a wake, the drain
    or the end of its lifetime cut short."""

    def __init__(self, context: StreamContext) -> None:
        # Set to end the current wait at once (a command or credit of the client, the client gone).
        self.wake = asyncio.Event()
        self.closed = False
        self._refused: End | None = None  # why its credential or the ACLs no longer let it read
        self._ctx = context
        lifetime = context.limits.lifetime_ms
        self._expires = context.clock() + lifetime / 1000 if lifetime else math.inf
        self._failing_since: float | None = None  # when the polls began to fail with 503, in a row
        self._failures = 0

    @property
    def credential(self) -> Credential | None:
        """What authenticated the stream's caller; None with authentication off."""
        return self._ctx.credential

    def close(self) -> None:
        """The client is gone: the current wait ends and nothing more is taken."""
        self.closed = True
        self.wake.set()

    async def decide(self) -> Decision:
        """What the stream's caller may do now, by the bindings of now, as a request would be
        decided; ``CredentialLapsed`` once the credential it was opened with no longer holds, so
        nothing a stream does (a poll, a commit, a seek, a produce) outlives its credential."""
        credential = self._ctx.credential
        if credential is not None and not await credential.still_valid():
            raise CredentialLapsed()
        return await self._ctx.decide()

    async def recheck(self) -> None:
        """Raise the error (``Forbidden``, ``CredentialLapsed``) its caller would now get for reading
        what the stream reads, by the bindings of now: ``watch.AccessWatch`` asks while it waits."""
        raise NotImplementedError

    def refuse(self, error: GatewayError) -> None:
        """End the stream with ``error``, as its credential or the ACLs no longer let it read: its
        wait ends, then the stream (``ended``, with ``error``)."""
        self._refused = End(ERROR, error)
        self.wake.set()

    def ended(self) -> End | None:
        """Why the stream must end now, if it must: the gateway drains, its credential or the ACLs
        no longer let it read, or its lifetime is over."""
        if self._ctx.draining.is_set():
            return End(SHUTDOWN)
        if self._refused is not None:
            return self._refused
        if self._ctx.clock() >= self._expires:
            message = (
                f"The stream was open for the longest time a stream may be ({self._ctx.limits.lifetime_ms} "
                "ms); reconnect to go on from its last position."
            )
            return End(ERROR, BackendUnavailable(message, retry_after=0))
        return None

    async def _ride_out(self, exc: GatewayError) -> list[Event]:
        """Handle a poll that failed with ``exc``, returning no events (to poll again) or the stream's end.

        If ``exc`` is a 503 a retry may fix and the polls have failed for less than
        ``backend_retry_ms`` in a row: nothing, once a back-off has passed (shorter if the stream
        is woken), so that the transport polls again. Else the stream's end with ``exc``. The
        transports keep the connection alive meanwhile."""
        now = self._ctx.clock()
        if self._failing_since is None:
            self._failing_since = now
        left = self._failing_since + self._ctx.limits.backend_retry_ms / 1000 - now
        if not (exc.retriable and exc.http_status == 503) or left <= 0:
            return [End(ERROR, exc)]
        backoff = min(RETRY_FIRST_S * 2**self._failures, RETRY_MOST_S, left)
        self._failures += 1
        await self._sleep(backoff)
        return []

    def _polled(self) -> None:
        """A poll succeeded: a later failure starts a new ``backend_retry_ms``."""
        self._failing_since = None
        self._failures = 0

    def _until(self, seconds: float) -> float:
        """When a wait of ``seconds`` from now must end: then, or at the end of the stream's lifetime."""
        return min(self._ctx.clock() + seconds, self._expires)

    def _within_lifetime(self, wait_ms: int) -> int:
        """``wait_ms``, or less: up to the end of the stream's lifetime (rounded up)."""
        if self._expires == math.inf:
            return wait_ms
        return max(0, min(wait_ms, math.ceil((self._expires - self._ctx.clock()) * 1000)))

    def _throttled_for(self, exc: Throttled) -> float:
        """How long to wait before polling again after a quota refused a poll: its Retry-After, but
        no longer than a heartbeat, so that the transport can show the client the stream lives."""
        return min(exc.retry_after or 1.0, self._ctx.limits.heartbeat_ms / 1000)

    async def _unless_woken(self, work: Awaitable[T]) -> T | None:
        """``work``'s result, or None if the stream is woken or the gateway drains first: ``work``
        is cancelled then, and done with before this returns (only for work that changes nothing,
        a read)."""
        doing = asyncio.ensure_future(work)
        try:
            await self._woken_or(doing)
            return doing.result() if doing.done() else None
        finally:
            if not doing.done():
                doing.cancel()
                try:
                    await doing
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # this stream's own task is cancelled as well

    async def _sleep(self, seconds: float) -> None:
        """``seconds``, or less if the stream is woken, the gateway drains or its lifetime ends."""
        seconds = self._until(seconds) - self._ctx.clock()
        if seconds > 0:
            await self._woken_or(timeout=seconds)

    async def _woken_or(self, *work: asyncio.Future[Any], timeout: float | None = None) -> None:
        """Until one of ``work`` is done, the stream is woken or the gateway drains (or ``timeout``)."""
        draining = self._ctx.draining
        if self.wake.is_set() or draining.is_set():
            return
        waiters = (asyncio.ensure_future(self.wake.wait()), asyncio.ensure_future(draining.wait()))
        try:
            await asyncio.wait((*work, *waiters), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
