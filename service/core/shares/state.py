"""One partition's delivery state in a share group: the state machine of Kafka's share-partitions.

A share group reads a partition with any number of consumers; what it has delivered is not one
offset but a state per record. ``SharePartition`` keeps it:

- ``start`` (Kafka's share-partition start offset): every record before it is done;
- ``end``: the first offset never acquired; records in ``[start, end)`` are done unless they are
  *in flight*, kept as runs of consecutive offsets in one state (``Run``: a poll's records are one
  run until what is done to them differs), as Kafka keeps in-flight batches;
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

Pure logic, no I/O: the caller reads the log, keeps the state through the ``ShareStates`` port
(``to_json`` / ``from_json``) and says what time it is.
"""

from __future__ import annotations

import sys
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Final

from .delivery import (
    DELIVERY,
    MAX_ERROR_CHARS,
    NOT_HELD,
    AckType,
    Acquired,
    Delivery,
    Exhausted,
    InFlight,
    InFlightView,
    Run,
    ShareLimits,
)
from .spans import merged_spans, stretches
from .stored import StateChange, StoredState, canonical, state_rows

# No lock expires before this (ms): the expiry floor of a partition holding none.
_NEVER: Final = sys.maxsize

_FIRST_OF: Final = attrgetter("first")
_LAST_OF: Final = attrgetter("last")


class SharePartition:
    """The delivery state of one partition in one share group (see the module's docstring)."""

    __slots__ = (
        "_available",
        "_floor",
        "_runs",
        "_touched",
        "_whole",
        "changes",
        "end",
        "in_flight",
        "limits",
        "start",
    )

    def __init__(
        self,
        start: int,
        *,
        limits: ShareLimits | None = None,
        end: int | None = None,
        records: Mapping[int, InFlight] | None = None,
        runs: Iterable[Run] = (),
    ) -> None:
        self.limits = limits or ShareLimits()
        # Changes made since this object was built or last stored: whether it must be stored (0: no),
        # the offsets they touched (ranges), and whether they are better stored whole (a reset).
        self.changes = 0
        self._touched: list[tuple[int, int]] = []
        self._whole = False
        self.start = start
        self.end = start if end is None else end
        self._runs: list[Run] = sorted(
            [
                *runs,
                *(
                    Run(o, o, r.state, r.deliveries, r.owner, r.lock_until_ms, r.error)
                    for o, r in (records or {}).items()
                ),
            ],
            key=_FIRST_OF,
        )
        self.in_flight = sum(map(len, self._runs))  # records in flight
        # Indexes of the runs, so that a poll does not walk them all: how many records are
        # AVAILABLE, and no ACQUIRED lock expires before ``_floor`` (a lower bound, made exact
        # again by the walk that expires locks once it is reached).
        self._available = sum(len(r) for r in self._runs if r.state is Delivery.AVAILABLE)
        self._floor = min(
            (r.lock_until_ms for r in self._runs if r.state is Delivery.ACQUIRED), default=_NEVER
        )
        self._advance()

    @property
    def runs(self) -> Sequence[Run]:
        """The runs in flight, ascending (read-only)."""
        return self._runs

    @property
    def records(self) -> InFlightView:
        """The records in flight by offset, ascending (read-only)."""
        return InFlightView(self)

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
        """Acquire as ``acquire_runs`` does, but list what it took record by record."""
        runs, exhausted = self.acquire_runs(
            member, now_ms, max_records=max_records, log_offsets=log_offsets, readable=readable
        )
        return [Acquired(o, n) for first, last, n in runs for o in range(first, last + 1)], exhausted

    def acquire_runs(
        self,
        member: str,
        now_ms: int,
        *,
        max_records: int,
        log_offsets: Sequence[int] = (),
        readable: Container[int] | None = None,
    ) -> tuple[list[tuple[int, int, int]], list[Exhausted]]:
        """Give ``member`` up to ``max_records`` records: available ones first (oldest first; with
        ``readable``, only those it holds: the records the caller could read), then new ones of
        ``log_offsets`` (the offsets the log holds from ``end`` on, ascending; those not taken
        stay for a later call). Expired locks are released first; the records they archive at
        the delivery limit are returned for the dead-letter copy. What it took, as runs of
        offsets: ``(first, last, deliveries)``."""
        exhausted = self.expire(now_ms)
        taken: list[tuple[int, int, int]] = []
        count = 0
        until = now_ms + self.limits.lock_ms
        self._floor = min(self._floor, until)
        runs = self._runs
        i = 0
        while self._available and count < max_records and i < len(runs):
            run = runs[i]
            if run.state is not Delivery.AVAILABLE:
                i += 1
                continue
            first, last = run.first, min(run.last, run.first + max_records - count - 1)
            if readable is not None:  # the first stretch of it the caller could read
                while first <= run.last and first not in readable:
                    first += 1
                if first > run.last:
                    i += 1
                    continue
                last = first
                while last < run.last and last - first + 1 < max_records - count and last + 1 in readable:
                    last += 1
            i = self._carve(i, first, last)
            piece = runs[i]
            piece.state, piece.owner, piece.lock_until_ms = Delivery.ACQUIRED, member, until
            piece.deliveries += 1
            self._available -= len(piece)
            self._touch(first, last)
            taken.append((first, last, piece.deliveries))
            count += len(piece)
            i += 1
        room = min(max_records - count, self.limits.max_in_flight - self.in_flight)
        if room > 0:
            at = bisect_left(log_offsets, self.end)
            fresh = log_offsets[at : at + room]
            if fresh:
                for first, last in stretches(fresh):
                    runs.append(Run(first, last, Delivery.ACQUIRED, 1, member, until))
                    taken.append((first, last, 1))
                # offsets skipped on the way (gaps in the log) are done
                self._touch(self.end, fresh[-1])
                self.end = fresh[-1] + 1
                self.in_flight += len(fresh)
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
        if error is not None:
            error = error[:MAX_ERROR_CHARS]
        for first, last in stretches(offsets):
            self._settle(member, first, last, kind, now_ms, error, refused, exhausted)
        self._advance()
        return refused, exhausted

    def renew(self, member: str, offsets: Iterable[int], now_ms: int) -> dict[int, str]:
        """Extend ``member``'s locks on ``offsets`` by a full lock duration; refused offsets with why."""
        refused, _ = self.acknowledge(member, offsets, AckType.RENEW, now_ms)
        return refused

    def release_member(self, member: str, now_ms: int) -> list[Exhausted]:
        """Make everything ``member`` holds available again (it left, or was deleted)."""
        return self._release(lambda run: run.owner == member, now_ms)

    def expire(self, now_ms: int) -> list[Exhausted]:
        """Release every lock that has expired by ``now_ms`` (the runs are not walked before the first
        lock can have expired)."""
        if now_ms < self._floor:
            return []
        exhausted = self._release(lambda run: run.lock_until_ms <= now_ms, now_ms)
        self._floor = min(
            (r.lock_until_ms for r in self._runs if r.state is Delivery.ACQUIRED), default=_NEVER
        )
        return exhausted

    # --- the dead-letter copy (``park``) ------------------------------------------------------

    def claim_archiving(self, now_ms: int) -> list[Exhausted]:
        """The ``ARCHIVING`` records whose claim expired (their copy was never written: a crash, a
        failed write), claimed again for ``lock_ms``: the caller stores this, then writes them."""
        claimed = []
        for run in self._runs:
            if run.state is Delivery.ARCHIVING and run.lock_until_ms <= now_ms:
                run.lock_until_ms = now_ms + self.limits.lock_ms
                self._touch(run.first, run.last)
                claimed += [Exhausted(o, run.deliveries, run.error) for o in range(run.first, run.last + 1)]
        return claimed

    def bury(self, offsets: Iterable[int]) -> None:
        """The dead-letter copies of ``offsets`` are written: those records are done."""
        runs = self._runs
        for first, last in stretches(offsets):
            i = bisect_left(runs, first, key=_LAST_OF)
            while i < len(runs) and runs[i].first <= last:
                run = runs[i]
                if run.state is not Delivery.ARCHIVING:
                    i += 1
                    continue
                i = self._carve(i, max(first, run.first), min(last, run.last))
                self._drop(i)
        self._advance()

    # --- what operators do --------------------------------------------------------------------

    def reset(self, offset: int) -> None:
        """Start over at ``offset``: nothing in flight, everything before it done."""
        self._runs.clear()
        self.in_flight = self._available = 0
        self._floor = _NEVER
        self.start = self.end = offset
        self._rewrite()

    def truncate(self, log_start: int) -> None:
        """Forget records the log no longer holds (retention removed them)."""
        if log_start <= self.start:
            return
        runs = self._runs
        while runs and runs[0].first < log_start:
            if runs[0].last >= log_start:
                runs.insert(1, runs[0].cut(log_start))
            gone = runs.pop(0)
            self.in_flight -= len(gone)
            if gone.state is Delivery.AVAILABLE:
                self._available -= len(gone)
        self.end = max(self.end, log_start)
        self.start = log_start
        self._rewrite()
        self._advance()

    # --- what describing needs ----------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Records in flight by delivery state."""
        counts = dict.fromkeys(("available", "acquired", "archiving"), 0)
        for run in self._runs:
            counts[run.state.value.lower()] += len(run)
        return counts

    def next_expiry(self) -> int | None:
        """When the first lock held now expires (ms), or None if none is held."""
        return min((r.lock_until_ms for r in self._runs if r.state is Delivery.ACQUIRED), default=None)

    def first_available(self) -> int | None:
        """The lowest offset of an available record, or None if none is."""
        if not self._available:
            return None
        return next(r.first for r in self._runs if r.state is Delivery.AVAILABLE)

    def has_room(self) -> bool:
        """Whether a new record may be acquired: fewer than ``max_in_flight`` are in flight."""
        return self.in_flight < self.limits.max_in_flight

    def lag(self, log_end: int) -> int:
        """Records not done yet (in flight, unread to the log end); past the end: log end - ``end``."""
        return self.in_flight + log_end - self.end if log_end >= self.end else log_end - self.end

    # --- storage ------------------------------------------------------------------------------

    def change_json(self) -> StateChange:
        """The changes since the state was built or ``stored``, as stored: per span of offsets
        they touched, the runs now in flight there (``stored.change_spans``), and the new ``start``
        and ``end``; with ``whole``, every run (what was stored before is replaced).
        ``apply_change`` of it to the state as last stored gives ``to_json()``."""
        if self._whole:
            rows = canonical(run.row() for run in self._runs)
            return {"start": self.start, "end": self.end, "runs": rows, "whole": True}
        runs = self._runs
        spans = []
        for first, last in merged_spans(self._touched):  # each costs the runs it touched
            i = bisect_left(runs, first, key=_LAST_OF)
            rows = []
            while i < len(runs) and runs[i].first <= last:
                run = runs[i]
                rows.append(run.row(max(first, run.first), min(last, run.last)))
                i += 1
            spans.append([first, last, canonical(rows)])
        return {"start": self.start, "end": self.end, "spans": spans}

    def stored(self) -> None:
        """The state as it is now is stored: count changes from here on."""
        self.changes = 0
        self._touched.clear()
        self._whole = False

    def to_json(self) -> StoredState:
        return {"start": self.start, "end": self.end, "runs": canonical(run.row() for run in self._runs)}

    @classmethod
    def from_json(cls, data: StoredState, limits: ShareLimits | None = None) -> SharePartition:
        """A stored state, of this version (``runs``) or the previous (a row per record)."""
        runs = [
            Run(f, t, DELIVERY[s], n, owner, until, error)
            for f, t, s, n, owner, until, error in state_rows(data)
        ]
        return cls(int(data["start"]), limits=limits, end=int(data["end"]), runs=runs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SharePartition) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"SharePartition(start={self.start}, end={self.end}, in_flight={self.in_flight})"

    # --- internals ----------------------------------------------------------------------------

    def _touch(self, first: int, last: int) -> None:
        self.changes += 1
        self._touched.append((first, last))

    def _rewrite(self) -> None:
        self.changes += 1
        self._whole = True

    def run_at(self, offset: int) -> Run | None:
        """The run holding ``offset``, if it is in flight."""
        runs = self._runs
        i = bisect_right(runs, offset, key=_FIRST_OF) - 1
        return runs[i] if i >= 0 and runs[i].last >= offset else None

    def _carve(self, i: int, first: int, last: int) -> int:
        """Split run ``i`` so that ``first``..``last`` (inside it) is a run of its own: its index."""
        runs = self._runs
        run = runs[i]
        if last < run.last:
            runs.insert(i + 1, run.cut(last + 1))
        if first > run.first:
            runs.insert(i + 1, run.cut(first))
            i += 1
        return i

    def _drop(self, i: int) -> None:
        """Run ``i`` is done: it leaves the window."""
        run = self._runs.pop(i)
        self.in_flight -= len(run)
        if run.state is Delivery.AVAILABLE:
            self._available -= len(run)
        self._touch(run.first, run.last)

    def _settle(
        self,
        member: str,
        first: int,
        last: int,
        kind: AckType,
        now_ms: int,
        error: str | None,
        refused: dict[int, str],
        exhausted: list[Exhausted],
    ) -> None:
        """Settle the offsets ``first``..``last`` as ``acknowledge`` does."""
        runs = self._runs
        i = bisect_left(runs, first, key=_LAST_OF)
        offset = first
        while offset <= last:
            run = runs[i] if i < len(runs) else None
            if run is None or run.first > last:
                refused.update(dict.fromkeys(range(offset, last + 1), NOT_HELD))
                return
            if run.first > offset:
                refused.update(dict.fromkeys(range(offset, run.first), NOT_HELD))
                offset = run.first
            upto = min(run.last, last)
            if run.state is not Delivery.ACQUIRED or run.owner != member or run.lock_until_ms <= now_ms:
                refused.update(dict.fromkeys(range(offset, upto + 1), NOT_HELD))
                offset = upto + 1
                i += 1
                continue
            i = self._carve(i, offset, upto)
            piece = runs[i]
            if kind is AckType.ACCEPT or kind is AckType.REJECT:
                self._drop(i)
            elif kind is AckType.RENEW:
                piece.lock_until_ms = now_ms + self.limits.lock_ms
                self._touch(offset, upto)
                i += 1
            else:
                piece.error = error if error is not None else piece.error
                gone = self._make_available(i, now_ms)
                if gone is None:
                    i += 1
                else:
                    exhausted += gone
                    i += 1 if piece.state is Delivery.ARCHIVING else 0
            offset = upto + 1

    def _make_available(self, i: int, now_ms: int) -> list[Exhausted] | None:
        """Run ``i``, back from a member: available again, or archived at the delivery limit
        (``ARCHIVING``, claimed by whoever stores this, with ``park``): then its records."""
        run = self._runs[i]
        if run.deliveries >= self.limits.delivery_limit:
            gone = [Exhausted(o, run.deliveries, run.error) for o in range(run.first, run.last + 1)]
            if self.limits.park:
                run.state, run.owner = Delivery.ARCHIVING, None
                run.lock_until_ms = now_ms + self.limits.lock_ms
                self._touch(run.first, run.last)
            else:
                self._drop(i)
            return gone
        run.state, run.owner, run.lock_until_ms = Delivery.AVAILABLE, None, 0
        self._available += len(run)
        self._touch(run.first, run.last)
        return None

    def _release(self, which: Callable[[Run], bool], now_ms: int) -> list[Exhausted]:
        exhausted: list[Exhausted] = []
        runs = self._runs
        i = 0
        while i < len(runs):
            run = runs[i]
            if run.state is Delivery.ACQUIRED and which(run):
                gone = self._make_available(i, now_ms)
                if gone is not None:
                    exhausted += gone
                    if run.state is not Delivery.ARCHIVING:
                        continue  # dropped: the next run is at ``i`` now
            i += 1
        self._advance()
        return exhausted

    def _advance(self) -> None:
        self.start = self._runs[0].first if self._runs else self.end
