"""One partition's delivery state in a share group: the state machine of Kafka's share-partitions.

A share group reads a partition with any number of consumers; what it has delivered is not one
offset but a state per record. ``SharePartition`` keeps it:

- ``start`` (Kafka's share-partition start offset): every record before it is done;
- ``end``: the first offset never acquired; records in ``[start, end)`` are done unless they are
  *in flight*, held in ``records``;
- an in-flight record is ``AVAILABLE`` (to be delivered again) or ``ACQUIRED`` by one member
  until its lock expires, with the number of times it was delivered. Done records (accepted, or
  archived: rejected, or out of delivery attempts) leave ``records`` at once — except, with
  ``ShareLimits.park``, a record out of delivery attempts: it stays ``ARCHIVING`` until its
  dead-letter copy is written (``bury``), so that neither a crash nor a failed copy loses it.

``acquire`` hands a member the available records first, then new ones from the log, never more
in flight than ``ShareLimits.max_in_flight`` (Kafka's ``group.share.partition.max.record.locks``).
``acknowledge`` ACCEPTs (done), RELEASEs (available again now), REJECTs (archived) or RENEWs
(locked a while longer) what a member holds. A lock that expires makes its record available
again. A record released or expired after ``ShareLimits.delivery_limit`` deliveries is archived
instead and reported as ``Exhausted``, for the dead-letter copy. An ``ARCHIVING`` record carries
a claim, as a lock: the operation that archived it holds it for ``lock_ms`` to write the copy;
past it, anyone may ``claim_archiving`` it and write the copy (a crash came between): a copy is
written once unless a writer dies between writing it and burying the record.

Pure logic, no I/O: the caller reads the log, keeps the state through the Coordinator port
(``to_json`` / ``from_json``) and says what time it is.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, NamedTuple


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


_DELIVERY: Final = {d.value: d for d in Delivery}  # a stored state's, read back (KeyError if unknown)

# The most of a member's error text a record keeps: a full window of records with errors must fit
# the coordinator's bound on a stored state.
MAX_ERROR_CHARS: Final = 120

# No lock expires before this (ms): the expiry floor of a partition holding none.
_NEVER: Final = sys.maxsize

# Why an acknowledgement or a renewal was refused, per offset.
NOT_HELD: Final = "not acquired by this consumer (its lock expired, or it was never delivered to it)"


class SharePartition:
    """The delivery state of one partition in one share group (see the module's docstring)."""

    __slots__ = ("_available", "_floor", "_touched", "_whole", "changes", "end", "limits", "records", "start")

    def __init__(
        self,
        start: int,
        *,
        limits: ShareLimits | None = None,
        end: int | None = None,
        records: Mapping[int, InFlight] | None = None,
    ) -> None:
        self.limits = limits or ShareLimits()
        # Changes made since this object was built or last stored: whether it must be stored (0: no),
        # the offsets they touched, and whether they are better stored whole (a reset, a truncation).
        self.changes = 0
        self._touched: set[int] = set()
        self._whole = False
        self.start = start
        self.end = start if end is None else end
        self.records: dict[int, InFlight] = dict(sorted((records or {}).items()))
        # Indexes of ``records``, so that a poll does not walk the whole window: the offsets of the
        # AVAILABLE records, and no ACQUIRED lock expires before ``_floor`` (a lower bound, made
        # exact again by the walk that expires locks once it is reached).
        self._available: set[int] = {o for o, r in self.records.items() if r.state is Delivery.AVAILABLE}
        self._floor = min(
            (r.lock_until_ms for r in self.records.values() if r.state is Delivery.ACQUIRED), default=_NEVER
        )
        self._advance()

    # --- what members do ----------------------------------------------------------------------

    def acquire(
        self,
        member: str,
        now_ms: int,
        *,
        max_records: int,
        log_offsets: Sequence[int] = (),
        readable: Container[int] | None = None,
    ) -> tuple[list[Acquired], list[Exhausted]]:
        """Give ``member`` up to ``max_records`` records: available ones first (oldest first; with
        ``readable``, only those it holds: the records the caller could read), then new ones of
        ``log_offsets`` (the offsets the log holds from ``end`` on, ascending; those not taken
        stay for a later call). Expired locks are released first; the records they archive at
        the delivery limit are returned for the dead-letter copy."""
        exhausted = self.expire(now_ms)
        taken: list[Acquired] = []
        until = now_ms + self.limits.lock_ms
        self._floor = min(self._floor, until)
        for offset in sorted(self._available) if self._available else ():
            if len(taken) >= max_records:
                break
            if readable is None or offset in readable:
                record = self.records[offset]
                record.state, record.owner, record.lock_until_ms = Delivery.ACQUIRED, member, until
                record.deliveries += 1
                self._available.discard(offset)
                self._touch(offset)
                taken.append(Acquired(offset, record.deliveries))
        room = min(max_records - len(taken), self.limits.max_in_flight - len(self.records))
        if room > 0:
            records, end = self.records, self.end
            fresh: list[int] = []
            for offset in log_offsets:
                if offset < end:
                    continue  # already acquired once: the state above knows it
                if len(fresh) >= room:
                    break
                records[offset] = InFlight(Delivery.ACQUIRED, 1, member, until)
                fresh.append(offset)
                end = offset + 1  # offsets skipped on the way (gaps in the log) are done
            if fresh:
                self.end = end
                self._touched.update(fresh)
                self.changes += len(fresh)
                taken += [Acquired(offset, 1) for offset in fresh]
        self._advance()
        return taken, exhausted

    def acknowledge(
        self,
        member: str,
        offsets: Iterable[int],
        kind: AckType,
        now_ms: int,
        *,
        error: str | None = None,
    ) -> tuple[dict[int, str], list[Exhausted]]:
        """Settle records ``member`` holds: refused offsets with the reason, and the records a
        RELEASE archived at the delivery limit. An offset settled earlier is refused too."""
        refused: dict[int, str] = {}
        exhausted: list[Exhausted] = []
        for offset in offsets:
            record = self._held(member, offset, now_ms)
            if record is None:
                refused[offset] = NOT_HELD
            elif kind is AckType.ACCEPT or kind is AckType.REJECT:
                del self.records[offset]
                self._touch(offset)
            elif kind is AckType.RENEW:
                record.lock_until_ms = now_ms + self.limits.lock_ms
                self._touch(offset)
            else:
                record.error = error[:MAX_ERROR_CHARS] if error is not None else record.error
                gone = self._make_available(offset, record, now_ms)
                if gone is not None:
                    exhausted.append(gone)
        self._advance()
        return refused, exhausted

    def renew(self, member: str, offsets: Iterable[int], now_ms: int) -> dict[int, str]:
        """Extend ``member``'s locks on ``offsets`` by a full lock duration; refused offsets with why."""
        refused: dict[int, str] = {}
        for offset in offsets:
            record = self._held(member, offset, now_ms)
            if record is None:
                refused[offset] = NOT_HELD
            else:
                record.lock_until_ms = now_ms + self.limits.lock_ms
                self._touch(offset)
        return refused

    def release_member(self, member: str, now_ms: int) -> list[Exhausted]:
        """Make everything ``member`` holds available again (it left, or was deleted)."""
        return self._release(lambda record: record.owner == member, now_ms)

    def expire(self, now_ms: int) -> list[Exhausted]:
        """Release every lock that has expired by ``now_ms`` (no walk before the first can have)."""
        if now_ms < self._floor:
            return []
        exhausted: list[Exhausted] = []
        floor = _NEVER
        for offset, record in list(self.records.items()):
            if record.state is not Delivery.ACQUIRED:
                continue
            if record.lock_until_ms <= now_ms:
                gone = self._make_available(offset, record, now_ms)
                if gone is not None:
                    exhausted.append(gone)
            elif record.lock_until_ms < floor:
                floor = record.lock_until_ms
        self._floor = floor
        self._advance()
        return exhausted

    # --- the dead-letter copy (``park``) ------------------------------------------------------

    def claim_archiving(self, now_ms: int) -> list[Exhausted]:
        """The ``ARCHIVING`` records whose claim expired (their copy was never written: a crash, a
        failed write), claimed again for ``lock_ms``: the caller stores this, then writes them."""
        claimed = []
        for offset, record in self.records.items():
            if record.state is Delivery.ARCHIVING and record.lock_until_ms <= now_ms:
                record.lock_until_ms = now_ms + self.limits.lock_ms
                self._touch(offset)
                claimed.append(Exhausted(offset, record.deliveries, record.error))
        return claimed

    def bury(self, offsets: Iterable[int]) -> None:
        """The dead-letter copies of ``offsets`` are written: those records are done."""
        for offset in offsets:
            record = self.records.get(offset)
            if record is not None and record.state is Delivery.ARCHIVING:
                del self.records[offset]
                self._touch(offset)
        self._advance()

    # --- what operators do --------------------------------------------------------------------

    def reset(self, offset: int) -> None:
        """Start over at ``offset``: nothing in flight, everything before it done."""
        self.records.clear()
        self._available.clear()
        self._floor = _NEVER
        self.start = self.end = offset
        self._rewrite()

    def truncate(self, log_start: int) -> None:
        """Forget records the log no longer holds (retention removed them)."""
        if log_start <= self.start:
            return
        for offset in [o for o in self.records if o < log_start]:
            del self.records[offset]
            self._available.discard(offset)
        self.end = max(self.end, log_start)
        self.start = log_start
        self._rewrite()
        self._advance()

    # --- what describing needs ----------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Records in flight by delivery state."""
        counts = dict.fromkeys(("available", "acquired", "archiving"), 0)
        for record in self.records.values():
            counts[record.state.value.lower()] += 1
        return counts

    def next_expiry(self) -> int | None:
        """When the first lock held now expires (ms), or None if none is held."""
        return min(
            (r.lock_until_ms for r in self.records.values() if r.state is Delivery.ACQUIRED), default=None
        )

    def first_available(self) -> int | None:
        """The lowest offset of an available record, or None if none is."""
        return min(self._available, default=None)

    def has_room(self) -> bool:
        """Whether a new record may be acquired: fewer than ``max_in_flight`` are in flight."""
        return len(self.records) < self.limits.max_in_flight

    def lag(self, log_end: int) -> int:
        """Records not done yet: in flight, and not yet acquired up to the log's end."""
        return len(self.records) + max(0, log_end - self.end)

    # --- storage ------------------------------------------------------------------------------

    def change_json(self) -> dict[str, Any]:
        """The changes since the state was built or ``stored``, as stored: the records they set
        (their new form, as in ``to_json``) and the offsets they dropped, and the new ``start`` and
        ``end``; with ``whole``, every record (what was stored before is replaced).
        ``apply_change`` of it to the state as last stored gives ``to_json()``."""
        if self._whole:
            return {**self.to_json(), "whole": True}
        records = self.records
        touched = sorted(self._touched)
        return {
            "start": self.start,
            "end": self.end,
            "records": [_row(o, records[o]) for o in touched if o in records],
            "drop": [o for o in touched if o not in records],
        }

    def stored(self) -> None:
        """The state as it is now is stored: count changes from here on."""
        self.changes = 0
        self._touched.clear()
        self._whole = False

    def to_json(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "records": [_row(o, r) for o, r in self.records.items()],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], limits: ShareLimits | None = None) -> SharePartition:
        records = {
            int(o): InFlight(_DELIVERY[state], int(deliveries), owner, int(until), error)
            for o, state, deliveries, owner, until, error in data["records"]
        }
        return cls(int(data["start"]), limits=limits, end=int(data["end"]), records=records)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SharePartition) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"SharePartition(start={self.start}, end={self.end}, in_flight={len(self.records)})"

    # --- internals ----------------------------------------------------------------------------

    def _touch(self, offset: int) -> None:
        self.changes += 1
        self._touched.add(offset)

    def _rewrite(self) -> None:
        self.changes += 1
        self._whole = True

    def _held(self, member: str, offset: int, now_ms: int) -> InFlight | None:
        record = self.records.get(offset)
        if record is None or record.state is not Delivery.ACQUIRED or record.owner != member:
            return None
        return record if record.lock_until_ms > now_ms else None

    def _make_available(self, offset: int, record: InFlight, now_ms: int) -> Exhausted | None:
        """A record back from a member: available again, or archived at the delivery limit
        (``ARCHIVING``, claimed by whoever stores this, with ``park``)."""
        if record.deliveries >= self.limits.delivery_limit:
            if self.limits.park:
                record.state, record.owner = Delivery.ARCHIVING, None
                record.lock_until_ms = now_ms + self.limits.lock_ms
                self._touch(offset)
            else:
                del self.records[offset]
                self._touch(offset)
            return Exhausted(offset, record.deliveries, record.error)
        record.state, record.owner, record.lock_until_ms = Delivery.AVAILABLE, None, 0
        self._available.add(offset)
        self._touch(offset)
        return None

    def _release(self, which: Callable[[InFlight], bool], now_ms: int) -> list[Exhausted]:
        exhausted: list[Exhausted] = []
        for offset, record in list(self.records.items()):
            if record.state is Delivery.ACQUIRED and which(record):
                gone = self._make_available(offset, record, now_ms)
                if gone is not None:
                    exhausted.append(gone)
        self._advance()
        return exhausted

    def _advance(self) -> None:
        self.start = next(iter(self.records), self.end)


def _row(offset: int, r: InFlight) -> list[Any]:
    """A record in flight as stored: ``[offset, state, deliveries, owner, lock_until_ms, error]``."""
    return [offset, r.state.value, r.deliveries, r.owner, r.lock_until_ms, r.error]


def apply_change(state: Mapping[str, Any] | None, change: Mapping[str, Any]) -> dict[str, Any]:
    """The stored form (``to_json``) a ``change_json`` makes of ``state`` (None: nothing stored)."""
    if change.get("whole") or state is None:
        rows = {}
    else:
        rows = {row[0]: row for row in state["records"]}
    for offset in change.get("drop", ()):
        rows.pop(offset, None)
    for row in change["records"]:
        rows[row[0]] = row
    return {"start": change["start"], "end": change["end"], "records": [rows[o] for o in sorted(rows)]}
