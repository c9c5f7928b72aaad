"""The vocabulary of a share-partition's delivery state: what a record in flight is, what a member
says of it, what a poll hands out, and the runs the state keeps (``state.SharePartition``).

Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, NamedTuple, Protocol

from .stored import Row


class Delivery(StrEnum):
    AVAILABLE = "AVAILABLE"
    ACQUIRED = "ACQUIRED"
    ARCHIVING = "ARCHIVING"  # out of delivery attempts; its dead-letter copy is not written yet


class AckType(StrEnum):
    """What a member says of a record it holds: done, deliver it again, never deliver it again, or
    (Kafka's RENEW, KIP-1222) keep it a full lock duration longer."""

    ACCEPT = "ACCEPT"
    RELEASE = "RELEASE"
    REJECT = "REJECT"
    RENEW = "RENEW"


@dataclass(frozen=True, slots=True)
class ShareLimits:
    """Kafka's share-group settings: records in flight per partition, deliveries per record, and
    how long an acquired record stays a member's (``group.share.record.lock.duration.ms``)."""

    max_in_flight: int = 2000
    delivery_limit: int = 5
    lock_ms: int = 30_000
    park: bool = False  # records out of delivery attempts wait ARCHIVING for their dead-letter copy


@dataclass(slots=True)
class InFlight:
    """A record handed out and not done yet."""

    state: Delivery
    deliveries: int
    owner: str | None = None  # the member holding it, while ACQUIRED
    lock_until_ms: int = 0  # ACQUIRED: when its lock expires; ARCHIVING: when its claim does
    error: str | None = None  # the last error text a member gave when it released the record


class Acquired(NamedTuple):
    """A record a member now holds: its offset and how many times it has been delivered (1: first).
    A tuple: one is made per record a poll hands out."""

    offset: int
    deliveries: int


@dataclass(frozen=True, slots=True)
class Exhausted:
    """A record archived because it was delivered ``delivery_limit`` times without being accepted."""

    offset: int
    deliveries: int
    error: str | None


DELIVERY: Final = {d.value: d for d in Delivery}  # a stored state's, read back (KeyError if unknown)

# The most of a member's error text a record keeps: a full window of records with errors must fit
# the coordinator's bound on a stored state.
MAX_ERROR_CHARS: Final = 120

# Why an acknowledgement or a renewal was refused, per offset.
NOT_HELD: Final = "not acquired by this consumer (its lock expired, or it was never delivered to it)"


class Run:
    """Consecutive offsets in flight in one delivery state (what ``InFlight`` says of each): a
    poll's records are one run until what is done to them differs, and then it is split."""

    __slots__ = ("deliveries", "error", "first", "last", "lock_until_ms", "owner", "state")

    def __init__(
        self,
        first: int,
        last: int,
        state: Delivery,
        deliveries: int,
        owner: str | None = None,
        lock_until_ms: int = 0,
        error: str | None = None,
    ) -> None:
        self.first, self.last, self.state, self.deliveries = first, last, state, deliveries
        self.owner, self.lock_until_ms, self.error = owner, lock_until_ms, error

    def __len__(self) -> int:
        return self.last - self.first + 1

    def cut(self, at: int) -> Run:
        """Split off the offsets from ``at`` on (``first < at <= last``): this run ends before it."""
        rest = Run(at, self.last, self.state, self.deliveries, self.owner, self.lock_until_ms, self.error)
        self.last = at - 1
        return rest

    def row(self, first: int | None = None, last: int | None = None) -> Row:
        """As stored (``runs``), between ``first`` and ``last`` if given."""
        return [
            self.first if first is None else first,
            self.last if last is None else last,
            self.state.value,
            self.deliveries,
            self.owner,
            self.lock_until_ms,
            self.error,
        ]


class Window(Protocol):
    """What ``InFlightView`` reads of a ``state.SharePartition``."""

    in_flight: int

    @property
    def runs(self) -> Sequence[Run]: ...

    def run_at(self, offset: int) -> Run | None: ...


class InFlightView(Mapping[int, InFlight]):
    """The records in flight one by one, read-only (``SharePartition.records``): what describing,
    tests and tools look at; the state itself keeps runs."""

    __slots__ = ("_sp",)

    def __init__(self, sp: Window) -> None:
        self._sp = sp

    def __getitem__(self, offset: int) -> InFlight:
        run = self._sp.run_at(offset)
        if run is None:
            raise KeyError(offset)
        return InFlight(run.state, run.deliveries, run.owner, run.lock_until_ms, run.error)

    def __contains__(self, offset: object) -> bool:
        return isinstance(offset, int) and self._sp.run_at(offset) is not None

    def __iter__(self) -> Iterator[int]:
        for run in self._sp.runs:
            yield from range(run.first, run.last + 1)

    def __len__(self) -> int:
        return self._sp.in_flight
