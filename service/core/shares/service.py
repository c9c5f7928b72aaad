"""Share groups over the ports: acquiring records for a member, settling them, describing, resetting.

``ShareGroups`` turns the state machine of ``state.SharePartition`` into operations on the log
and the stored states. Every change of a partition's state is stored through the ``ShareStates`` port's
compare-and-set (``change_share_states``, the change alone) before anything is returned, all
partitions of one operation at once — a poll's piggy-backed acknowledgements with its
acquisition (``poll``): two members — on one replica or on two — that race for the same
records both start from the same version, one store wins, and the other reads again and takes
what is left. So a record is never held by two members while its lock holds, and a crash loses
nothing a member was told it holds or settled: the coordinator has it. The states this
replica stored stay decoded here (``kept.KeptStates``) while the coordinator's version is the
one it gave them.

With ``DeadLetters``, a record out of delivery attempts is kept ``ARCHIVING`` (``ShareLimits.park``)
by the store that archived it; the operation that stored it then writes its dead-letter copy
and buries it (a second store). Only the winner of a store learns what it archived, so a copy
is written once however many replicas race; one whose writer died or failed is claimed again
by ``sweep`` (the reaper's) once its claim expired.

Collaborators: the ``Log`` (records, offsets), ``ShareStates`` (stored states),
``DeadLetters``, the clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Final, Literal

from service.errors import BackendUnavailable, GatewayError

from ..models import Record, RecordColumns, TopicPartition
from ..ports import Log, ShareStates
from ..rules import PUSH_GROUP_PREFIX
from .acks import Acknowledgement, by_partition, settle_acks, settle_acks_in
from .dead_letters import DeadLetters
from .delivered import Delivered
from .delivery import Exhausted, ShareLimits
from .kept import KeptStates
from .positions import fit_to_log, read_positions
from .state import SharePartition
from .stored import StoredState

log = logging.getLogger(__name__)

StartAt = Literal["earliest", "latest"]

# With members through other replicas, a wait for records is cut in slices of at most this long:
# what they settle is seen at the next one (what a member of this replica settles wakes it at once).
_WAIT_SLICE_MS: Final = 1000
# The most bytes one acquisition reads of the log (a record larger still comes alone); it reads
# no more records than it could hand out either (``_acquire_once``): whatever is read beyond them
# is decoded for nothing, and read again by the next poll.
_FETCH_BYTES: Final = 1024 * 1024
_MAX_RACES: Final = 50  # stores lost to another writer in a row before giving up (503)
_new_tuple: Final = tuple.__new__


@dataclass(frozen=True, slots=True)
class PartitionReport:
    """A share-partition as describing shows it."""

    tp: TopicPartition
    start: int
    end: int
    available: int
    acquired: int
    archiving: int
    lag: int


class ShareGroups:
    """Share-group operations over the ``Log`` and ``ShareStates`` (see the module docstring)."""

    def __init__(
        self,
        log: Log,
        store: ShareStates,
        *,
        limits: ShareLimits | None = None,
        dead_letters: DeadLetters | None = None,
        clock: Callable[[], float] = time.time,
        draining: asyncio.Event | None = None,
        shared: bool = True,
    ) -> None:
        """``shared``: whether members through other replicas share the groups' states (a
        coordinator other replicas use); a poll waiting for records then looks again every
        ``_WAIT_SLICE_MS``, else only an append, a settlement, a lock's expiry or the drain
        wakes it before its deadline."""
        self._log = log
        self._shared = shared
        self._store = store
        self.limits = limits or ShareLimits()
        if (dead_letters is not None) != self.limits.park:
            raise ValueError(
                "records are parked (ShareLimits.park) exactly when there are dead letters to write"
            )
        self.dead_letters = dead_letters
        # A lock per group with states being changed on this replica: its members' changes wait
        # their turn instead of racing one another to the coordinator's compare-and-set (which
        # still settles races with other replicas).
        self._turns: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        # Per group with members of this replica waiting for records: set when records are settled.
        self._settled: dict[str, asyncio.Event] = {}
        self._clock = clock
        self._draining = draining or asyncio.Event()
        # The states this replica stored, kept decoded while the coordinator's version says so.
        self._kept = KeptStates(store, self.limits)

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    # --- members ------------------------------------------------------------------------------

    async def acquire(
        self,
        group: str,
        member: str,
        tps: Sequence[TopicPartition],
        *,
        max_records: int,
        max_bytes: int,
        wait_ms: int,
        start_at: StartAt = "latest",
    ) -> tuple[list[Delivered], list[tuple[TopicPartition, Exhausted]]]:
        """Acquire up to ``max_records`` records of ``tps`` for ``member``: at once if some are
        available, else when some arrive, a lock expires, or ``wait_ms`` has passed (empty then).
        Also the records archived meanwhile at the delivery limit (for the dead-letter copy)."""
        delivered, exhausted, _ = await self.poll(
            group,
            member,
            tps,
            max_records=max_records,
            max_bytes=max_bytes,
            wait_ms=wait_ms,
            start_at=start_at,
        )
        return delivered, exhausted

    async def poll(
        self,
        group: str,
        member: str,
        tps: Sequence[TopicPartition],
        *,
        max_records: int,
        max_bytes: int,
        wait_ms: int,
        start_at: StartAt = "latest",
        acks: Sequence[Acknowledgement] = (),
    ) -> tuple[list[Delivered], list[tuple[TopicPartition, Exhausted]], dict[TopicPartition, dict[int, str]]]:
        """``acknowledge`` ``acks``, then ``acquire``, in one store: the settlements and the first
        acquisition are durable together (one write, not one each), before either is answered.
        Also the offsets refused per partition, as ``acknowledge`` answers them."""
        deadline = self.now_ms() + wait_ms
        refusals: dict[TopicPartition, dict[int, str]] = {}
        archived: list[tuple[TopicPartition, Exhausted]] = []  # by the acknowledgements
        while True:
            try:
                delivered, exhausted, states, settled = await self._acquire_once(
                    group, member, tps, max_records, max_bytes, start_at, acks
                )
            except GatewayError:
                if acks:  # the acquisition was refused: the acknowledgements are settled alone
                    await self.acknowledge(group, member, acks)
                raise
            if acks:
                (refusals, archived), acks = settled, ()  # settled once, by the first store
                await self._bury(group, archived)
            await self._bury(group, exhausted)
            remaining = deadline - self.now_ms()
            if delivered or exhausted or remaining <= 0 or self._draining.is_set():
                return delivered, archived + exhausted, refusals
            await self._wait(group, states, min(remaining, _WAIT_SLICE_MS) if self._shared else remaining)

    async def acknowledge(
        self, group: str, member: str, acks: Iterable[Acknowledgement]
    ) -> tuple[dict[TopicPartition, dict[int, str]], list[tuple[TopicPartition, Exhausted]]]:
        """Settle what ``member`` holds; the offsets refused per partition (with why), and the
        records a RELEASE archived at the delivery limit."""
        by_tp = by_partition(acks)

        def apply(sp: SharePartition, tp: TopicPartition, now: int) -> tuple[dict[int, str], list[Exhausted]]:
            return settle_acks(sp, member, by_tp[tp], now)

        results = await self._update(group, list(by_tp), apply)
        refusals = {tp: refused for tp, (refused, _) in results.items() if refused}
        exhausted = [(tp, e) for tp, (_, gone) in results.items() for e in gone]
        await self._bury(group, exhausted)
        return refusals, exhausted

    async def leave(
        self, group: str, member: str, tps: Sequence[TopicPartition] | None = None
    ) -> list[tuple[TopicPartition, Exhausted]]:
        """Release what ``member`` held, now that it is gone: what it held of ``tps`` (of every
        partition the group has a state of when None) is available again (or archived at the limit)."""

        def apply(sp: SharePartition, tp: TopicPartition, now: int) -> list[Exhausted]:
            return sp.release_member(member, now)

        results = await self._update(group, None if tps is None else list(tps), apply, only_stored=True)
        exhausted = [(tp, e) for tp, gone in results.items() for e in gone]
        await self._bury(group, exhausted)
        return exhausted

    async def sweep(self, groups: Iterable[str] | None = None) -> int:
        """Write the dead-letter copies nobody wrote (their writer crashed or failed, and their
        claim expired), in ``groups`` (default: every share group but the push subscriptions',
        which their deliverers sweep); how many. The reaper's, on every replica."""
        if self.dead_letters is None:
            return 0
        written = 0
        if groups is None:
            groups = [g for g in await self.stored_groups() if not g.startswith(PUSH_GROUP_PREFIX)]
        for group in groups:
            claimed = await self._update(
                group, None, lambda sp, tp, now: sp.claim_archiving(now), only_stored=True
            )
            items = [(tp, e) for tp, gone in claimed.items() for e in gone]
            await self._bury(group, items)
            written += len(items)
        return written

    # --- operators ----------------------------------------------------------------------------

    async def stored_groups(self) -> list[str]:
        """Groups with at least one stored delivery state, sorted."""
        return await self._store.share_groups()

    async def stored_partitions(self, group: str) -> list[TopicPartition]:
        """The partitions ``group`` has a stored delivery state for, sorted."""
        return sorted(await self._store.share_states(group))

    async def describe(self, group: str) -> list[PartitionReport]:
        """Every partition the group has state for: start and end offsets, records in flight, lag."""
        stored = await self._store.share_states(group)
        reports = []
        for tp, (data, _) in sorted(stored.items()):
            sp = SharePartition.from_json(data, self.limits)
            sp.expire(self.now_ms())  # expired locks count as available, as the next poll will see
            _, log_end = await self._log.offsets(tp)
            counts = sp.counts()
            reports.append(
                PartitionReport(
                    tp,
                    sp.start,
                    sp.end,
                    counts["available"],
                    counts["acquired"],
                    counts["archiving"],
                    sp.lag(log_end),
                )
            )
        return reports

    async def reset(
        self, group: str, tps: Sequence[TopicPartition], to: StartAt | Mapping[TopicPartition, int]
    ) -> None:
        """Start the group over on ``tps`` at the earliest or latest offsets, or the given ones:
        nothing in flight, everything before done (like ``kafka-share-groups --reset-offsets``;
        the caller makes sure no member is active)."""
        async with self._turn(group):  # one writer of the group's states at a time here
            self._kept.forget(group)
            for _ in range(_MAX_RACES):
                stored = await self._store.share_states(group, tps)
                updates: dict[TopicPartition, tuple[StoredState, int]] = {}
                for tp in tps:
                    begin, end = await self._log.offsets(tp)
                    if isinstance(to, Mapping):
                        offset = min(max(to[tp], begin), end)
                    else:
                        offset = begin if to == "earliest" else end
                    version = stored[tp][1] if tp in stored else -1
                    updates[tp] = (SharePartition(offset, limits=self.limits).to_json(), version)
                if await self._store.store_share_states(group, updates):
                    return
        raise BackendUnavailable(f"Share group {group!r} changed under every reset; retry.")

    async def delete(self, group: str) -> None:
        """Forget the group's delivery states (the caller makes sure it has no members)."""
        async with self._turn(group):
            self._kept.forget(group)  # versions start over after a delete: none kept may match
            await self._store.delete_share_states(group)

    # --- internals ----------------------------------------------------------------------------

    async def _states(
        self, group: str, tps: Sequence[TopicPartition], start_at: StartAt
    ) -> dict[TopicPartition, tuple[SharePartition, int]]:
        """The stored state of each partition, or a new one at ``start_at`` (version -1)."""
        stored = await self._kept.load(group, tps)
        states: dict[TopicPartition, tuple[SharePartition, int]] = {}
        for tp in tps:
            if tp in stored:
                states[tp] = stored[tp]
            else:
                begin, end = await self._log.offsets(tp)
                states[tp] = (
                    SharePartition(begin if start_at == "earliest" else end, limits=self.limits),
                    -1,
                )
        return states

    async def _acquire_once(
        self,
        group: str,
        member: str,
        tps: Sequence[TopicPartition],
        max_records: int,
        max_bytes: int,
        start_at: StartAt,
        acks: Sequence[Acknowledgement] = (),
    ) -> tuple[
        list[Delivered],
        list[tuple[TopicPartition, Exhausted]],
        dict[TopicPartition, SharePartition],
        tuple[dict[TopicPartition, dict[int, str]], list[tuple[TopicPartition, Exhausted]]],
    ]:
        by_tp = by_partition(acks)
        async with self._turn(group):  # one writer of the group's states at a time here
            for _ in range(_MAX_RACES):
                states = await self._states(group, tps, start_at)
                others = [tp for tp in by_tp if tp not in states]  # acknowledged, not acquired from
                acked = await self._kept.load(group, others) if others else {}
                now = self.now_ms()
                delivered: list[Delivered] = []
                exhausted: list[tuple[TopicPartition, Exhausted]] = []
                refusals, archived, settled = settle_acks_in(member, states, acked, by_tp, now, self.limits)
                for tp, (sp, _) in states.items():  # expired locks first: their records are available
                    exhausted += [(tp, e) for e in sp.expire(now)]
                positions = read_positions(states)
                budget = min(max_bytes, _FETCH_BYTES)
                # What a poll can hand out: ``max_records`` new records, past the windows read from
                # their first available record (the records between are in flight: read, not taken).
                most = max_records + sum(states[tp][0].end - at for tp, at in positions.items())
                data = (
                    await self._log.fetch(positions, max_bytes=budget, max_wait_ms=0, max_records=most)
                    if positions
                    else {}
                )
                for tp, (sp, _) in states.items():
                    part = data.get(tp)
                    records = part.records if part is not None else RecordColumns.empty()
                    offsets = records.offsets  # ascending
                    if part is not None:  # past the log end: start over; before its start: forget
                        fit_to_log(sp, positions[tp], part, start_at, where=f"share group {group!r}: {tp}")
                    taken, gone = sp.acquire_runs(
                        member,
                        now,
                        max_records=max_records - len(delivered),
                        log_offsets=offsets,
                        # only records to deliver again look for theirs among those read
                        readable=set(offsets) if sp.first_available() is not None else (),
                    )
                    for first, last, deliveries in taken:  # runs of consecutive records read
                        at = bisect_left(offsets, first)
                        run = records[at : at + last - first + 1]
                        # a Delivered per record, built in C (its Python constructor cost as much
                        # again as the rest of handing a record out)
                        delivered += map(
                            _new_tuple, repeat(Delivered), zip(repeat(tp), run, repeat(deliveries))
                        )
                    exhausted += [(tp, e) for e in gone]
                changed = [tp for tp, (sp, version) in states.items() if sp.changes or version == -1]
                changed += [tp for tp, (sp, _) in acked.items() if sp.changes]
                if await self._kept.store(group, {**states, **acked}, changed):
                    if settled:
                        self._settle(group)
                    acquired_from = {tp: sp for tp, (sp, _) in states.items()}
                    return delivered, exhausted, acquired_from, (refusals, archived)
        raise BackendUnavailable(f"Share group {group!r}: every attempt to acquire raced another; retry.")

    def _turn(self, group: str) -> asyncio.Lock:
        lock = self._turns.get(group)
        if lock is None:
            lock = self._turns[group] = asyncio.Lock()
        return lock

    async def _bury(self, group: str, items: Sequence[tuple[TopicPartition, Exhausted]]) -> None:
        """Write the dead-letter copies of ``items`` (records this replica archived and holds the
        claim on), then bury them. A copy that fails stays ``ARCHIVING`` for ``sweep``."""
        dead_letters = self.dead_letters
        if dead_letters is None or not items:
            return
        by_tp: dict[TopicPartition, list[Exhausted]] = {}
        for tp, one in items:
            by_tp.setdefault(tp, []).append(one)
        written: dict[TopicPartition, list[int]] = {}
        for tp, exhausted in by_tp.items():
            try:
                records = await self._read(tp, sorted(e.offset for e in exhausted))
                await dead_letters.write(
                    group, tp, [(records[e.offset], e) for e in exhausted if e.offset in records]
                )
            except GatewayError as exc:
                log.warning(
                    "share group %r: dead-letter copies of %s not written (retried later): %s", group, tp, exc
                )
                continue
            written[tp] = [e.offset for e in exhausted]  # a record retention removed has no copy to write

        def apply(sp: SharePartition, tp: TopicPartition, now: int) -> None:
            sp.bury(written[tp])

        if written:
            await self._update(group, list(written), apply, only_stored=True)

    async def _read(self, tp: TopicPartition, offsets: Sequence[int]) -> dict[int, Record]:
        """The records of ``tp`` at ``offsets`` (ascending) that the log still holds."""
        found: dict[int, Record] = {}
        wanted, sought = list(offsets), set(offsets)
        while wanted:
            part = (await self._log.fetch({tp: wanted[0]}, max_bytes=1024 * 1024, max_wait_ms=0))[tp]
            if not part.records:
                wanted.pop(0)  # gone from the log (or never there)
                continue
            last = part.records[-1].offset
            found.update((r.offset, r) for r in part.records if r.offset in sought)
            wanted = [o for o in wanted if o > last]
        return found

    async def _wait(self, group: str, states: Mapping[TopicPartition, SharePartition], wait_ms: int) -> None:
        """Wait up to ``wait_ms`` for records past every partition's end, the first lock expiry, a
        member of this replica settling records of the group, or the drain (a member of another
        notices at the next slice)."""
        expiries = [e for sp in states.values() if (e := sp.next_expiry()) is not None]
        if expiries:
            wait_ms = max(0, min(wait_ms, min(expiries) - self.now_ms() + 1))
        if wait_ms <= 0:
            return
        settled = self._settled.setdefault(group, asyncio.Event())
        # New records matter only where the window has room: a full one waits for a lock to expire,
        # or for a settlement, never on records it cannot take.
        room = {tp: sp.end for tp, sp in states.items() if sp.has_room()}
        waits: list[asyncio.Future[Any]] = [
            asyncio.ensure_future(settled.wait()),
            asyncio.ensure_future(self._draining.wait()),
        ]
        if room:
            waits.append(asyncio.ensure_future(self._log.fetch(room, max_bytes=1, max_wait_ms=wait_ms)))
        try:
            await asyncio.wait(waits, timeout=wait_ms / 1000, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)  # a read cancelled is done with

    def _settle(self, group: str) -> None:
        """Wake this replica's members waiting for records of ``group``, as some were settled here."""
        settled = self._settled.pop(group, None)
        if settled is not None:
            settled.set()

    async def _update(
        self,
        group: str,
        tps: list[TopicPartition] | None,
        apply: Callable[[SharePartition, TopicPartition, int], Any],
        *,
        only_stored: bool = False,
    ) -> dict[TopicPartition, Any]:
        """Apply ``apply`` to the stored state of each of ``tps`` (every partition the group has a
        state of when None) and store the changes at once, again from fresh states if another
        writer stored first. Partitions without a stored state have nothing in flight: ``apply``
        sees an empty state there (unless ``only_stored``)."""
        async with self._turn(group):  # one writer of the group's states at a time here
            for _ in range(_MAX_RACES):
                wanted = list(await self._store.share_states(group)) if tps is None else tps
                stored = await self._kept.load(group, wanted)
                now = self.now_ms()
                results: dict[TopicPartition, Any] = {}
                for tp in wanted:
                    if tp in stored:
                        sp = stored[tp][0]
                    elif only_stored:
                        continue
                    else:
                        sp = SharePartition(0, limits=self.limits)  # nothing held: nothing to store
                    results[tp] = apply(sp, tp, now)
                changed = [tp for tp, (sp, _) in stored.items() if sp.changes]
                if await self._kept.store(group, stored, changed):
                    if changed:
                        self._settle(group)
                    return results
        raise BackendUnavailable(f"Share group {group!r} changed under every attempt; retry.")
