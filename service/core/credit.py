"""Credit: how much a WebSocket stream's client lets the gateway send before it asks for more.

The client grants records and bytes (``grant``, additive, as reactive streams' ``request(n)``);
every batch the gateway sends spends what it carries (``spend``). The gateway sends only while
both are left and never more than is left, so what it sends never passes what was granted: a
slow client is never overrun, and the gateway holds at most one batch for it. Bytes are counted
as ``max_bytes`` and quotas count them: keys, values and headers as stored (``Record.size``).

A grant that would leave more than the server's maxima outstanding is refused whole (42206):
clamping it instead would leave the client believing it had credit the gateway does not, and
both would wait for the other. Pure: no I/O.
"""

from __future__ import annotations

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
