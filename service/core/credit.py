"""Credit, both ways: what a WebSocket stream's client lets the gateway send, and what the gateway
lets it have sent and not yet answered.

The client grants records and bytes (``grant``, additive, as reactive streams' ``request(n)``);
every batch the gateway sends spends what it carries (``spend``). The gateway sends only while
both are left and never more than is left, so what it sends never passes what was granted: a
slow client is never overrun, and the gateway holds at most one batch for it. Bytes are counted
as ``max_bytes`` and quotas count them: keys, values and headers as stored (``Record.size``).

A grant that would leave more than the server's maxima outstanding is refused whole (42206):
clamping it instead would leave the client believing it had credit the gateway does not, and
both would wait for the other.

The other way, ``HeldBytes`` bounds what the gateway holds of a client's messages: read off the
socket and not yet answered (a produce waiting for its turn to be stored, a commit waiting for
the next batch). Each message reserves its raw bytes before it is parsed (``ByteBudget.reserve``)
and gives them back once answered, from two budgets: the socket's own and its holder's (one
principal's sockets together). When either is spent, the next message is not read until some
are given back: the client's messages wait in its own TCP connection (backpressure), not in the
gateway's memory, as the HTTP produce path holds at most one request body per connection. No
I/O: the waits are the event loop's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from service.errors import InvalidPayload


@dataclass(frozen=True, slots=True)
class CreditLimits:
    """The most records and bytes a client may have granted and not yet received."""

    records: int = 100_000
    bytes: int = 64 * 1024 * 1024


class Credit:
    """What the gateway may still send on one stream; the totals granted and sent, for the record."""

    __slots__ = (
        "bytes",
        "granted_bytes",
        "granted_records",
        "limits",
        "records",
        "sent_bytes",
        "sent_records",
    )

    def __init__(self, limits: CreditLimits) -> None:
        self.limits = limits
        self.records = 0
        self.bytes = 0
        self.granted_records = self.granted_bytes = 0
        self.sent_records = self.sent_bytes = 0

    @property
    def open(self) -> bool:
        """Whether a batch may be sent: some records and some bytes are left."""
        return self.records > 0 and self.bytes > 0

    def grant(self, records: int, size: int) -> None:
        """Add ``records`` and ``size`` bytes; ``InvalidPayload`` (nothing added) if either is
        negative or the outstanding credit would pass the limits."""
        if records < 0 or size < 0:
            raise InvalidPayload("Credit is granted in records and bytes from 0.")
        most = self.limits
        if self.records + records > most.records or self.bytes + size > most.bytes:
            raise InvalidPayload(
                f"Credit outstanding may be at most {most.records} records and {most.bytes} bytes; "
                f"{self.records} records and {self.bytes} bytes are outstanding, so this grant of "
                f"{records} records and {size} bytes is refused."
            )
        self.records += records
        self.bytes += size
        self.granted_records += records
        self.granted_bytes += size

    def spend(self, records: int, size: int) -> None:
        """Take what a batch carried; ``ValueError`` if it carried more than is left (a bug: the
        batch was bounded by ``records`` and ``bytes``)."""
        if records > self.records or size > self.bytes:
            raise ValueError(f"a batch of {records} records, {size} bytes, is over the credit left")
        self.records -= records
        self.bytes -= size
        self.sent_records += records
        self.sent_bytes += size


class HeldBytes:
    """Bytes held within ``limit``: ``take`` waits until they fit, ``give_back`` returns them."""

    __slots__ = ("_freed", "held", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._freed = asyncio.Event()

    async def take(self, size: int) -> int:
        """Hold ``size`` bytes once they fit (at most ``limit``: a message larger than the whole
        budget is held alone, once nothing else is); what was taken, to give back."""
        size = min(size, self.limit)
        while self.held + size > self.limit:
            self._freed.clear()  # safe: nothing gives back between the check above and the wait
            await self._freed.wait()
        self.held += size
        return size

    def give_back(self, size: int) -> None:
        self.held -= size
        self._freed.set()


class Reserved:
    """What one message holds of a ``ByteBudget``; ``release`` gives it back (once, however often called)."""

    __slots__ = ("_budget", "_own", "_shared")

    def __init__(self, budget: ByteBudget, own: int, shared: int) -> None:
        self._budget = budget
        self._own = own
        self._shared = shared

    def release(self) -> None:
        outstanding = self._budget._outstanding
        if self in outstanding:
            outstanding.discard(self)
            self._budget.own.give_back(self._own)
            self._budget.shared.give_back(self._shared)


class ByteBudget:
    """One socket's bound on the bytes of its messages held unanswered: its ``own`` budget and the
    ``shared`` one of its holder's sockets together. ``close`` gives back what is still held (the
    messages dropped unanswered when a stream ends)."""

    def __init__(self, own: HeldBytes, shared: HeldBytes) -> None:
        self.own = own
        self.shared = shared
        self._outstanding: set[Reserved] = set()

    async def reserve(self, size: int) -> Reserved:
        """Hold ``size`` bytes of both budgets, waiting until they fit in each."""
        own = await self.own.take(size)
        try:
            shared = await self.shared.take(size)
        except BaseException:
            self.own.give_back(own)
            raise
        reserved = Reserved(self, own, shared)
        self._outstanding.add(reserved)
        return reserved

    def close(self) -> None:
        for reserved in list(self._outstanding):
            reserved.release()


class HeldBudgets:
    """The ``ByteBudget`` of every socket of a replica: ``per_socket`` bytes of its own, and the
    ``per_holder`` bytes its holder's sockets share (``fair.holder_of``: a principal, an address
    with authentication off), kept while one of them is open."""

    def __init__(self, per_socket: int, per_holder: int) -> None:
        self.per_socket = per_socket
        self.per_holder = per_holder
        self._shared: dict[str, tuple[HeldBytes, int]] = {}  # holder → its budget, sockets using it

    @contextmanager
    def budget(self, holder: str) -> Iterator[ByteBudget]:
        """A socket's budget while the block runs; what it still holds is given back after."""
        shared, users = self._shared.get(holder) or (HeldBytes(self.per_holder), 0)
        self._shared[holder] = (shared, users + 1)
        budget = ByteBudget(HeldBytes(self.per_socket), shared)
        try:
            yield budget
        finally:
            budget.close()
            shared, users = self._shared[holder]
            if users == 1:
                del self._shared[holder]
            else:
                self._shared[holder] = (shared, users - 1)

    def held(self, holder: str) -> int:
        """The bytes ``holder``'s sockets hold now."""
        found = self._shared.get(holder)
        return found[0].held if found is not None else 0
