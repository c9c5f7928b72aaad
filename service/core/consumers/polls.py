"""One poll of a consumer instance: its records fetched from its positions, and what it handed out.

A poll sleeps until there is something for it, and costs nothing meanwhile: its wait on the log
ends when the log has records for it (the append wakes it), when its group's next generation is
published through this replica (``Instances.changed``: a rebalance is noticed at once, and a
partition the instance lost is never handed out), when the gateway drains, or at its deadline;
no timer wakes it before. While it waits its lease is renewed with the other waiting instances'
(``leases.WaitingLeases``, one task for them all). It fills the positions it lacks from the
committed offsets (or ``auto.offset.reset``), resets by ``auto.offset.reset`` a position out of
range (before what retention left, or past the log end, as Kafka's consumer does), decodes
the schema formats (moving a position past what decodes only), saves the positions with a
compare-and-set (another request that moved them first makes it look again) and auto-commits
if the instance asked to. A poll of a push stream is bounded (``Allowance``): in records and,
exactly, in bytes for a client's credit (a record alone over the bytes is ``Blocked``); its
wait ends early when the stream is woken or the gateway drains, before any position moved.

Collaborators: ``instances.Instances`` (load, view, save and commit an instance), the ``Log``
(fetch, offsets), ``ConsumerGroups`` (committed offsets, the group's generation), the consume
``Quotas`` and ``Serde`` for the schema formats. ``service.ConsumerService`` is its caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from service.errors import (
    ConsumerFormatMismatch,
    ConversionError,
    IllegalState,
    OffsetOutOfRange,
)

from ..acl import Decision, Operation, ResourceType
from ..models import EmbeddedFormat, InstanceState, PartitionData, Polled, RecordColumns, TopicPartition
from ..ports import ConsumerGroups, Log, Sessions
from ..quotas import Quotas
from ..schemas.serde import SCHEMA_TYPES, Serde, decode_in
from .instances import Instances

log = logging.getLogger(__name__)

_IDLE_SLICE_S = 0.1  # after a fetch that answered early with nothing, before the next


@dataclass(frozen=True, slots=True)
class Blocked:
    """The record a poll bounded exactly in bytes could not hand out: alone, it weighs more than
    the bytes allowed (a stream's client must grant more credit to get past it)."""

    tp: TopicPartition
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class Batch:
    """What one poll took, and the instance as the poll saw it: the partitions it owned, where
    each stood before the records (``before``) and after them (``after``), and its lease.
    ``weight`` is what the records weigh (``Record.size``), when the poll had to count it."""

    format: EmbeddedFormat
    polled: Polled
    partitions: tuple[TopicPartition, ...]
    before: dict[TopicPartition, int]
    after: dict[TopicPartition, int]
    lease_ms: int
    blocked: Blocked | None = None
    weight: int | None = None


@dataclass(frozen=True, slots=True)
class Bound:
    """A stream's limits on one poll: at most ``records`` records (none: no limit; 0: read nothing,
    only where the instance stands) and at most ``bytes`` bytes in all, exactly."""

    records: int | None = None
    bytes: int | None = None


@dataclass(frozen=True, slots=True)
class _Ask:
    """What one call of ``Poller.poll`` asks, the same on every pass."""

    deadline_ms: int
    max_bytes: int
    bound: Bound | None
    wake: asyncio.Event | None

    @property
    def peek(self) -> bool:
        """A stream asking where it stands, reading nothing."""
        return self.bound is not None and self.bound.records == 0


@dataclass(slots=True)
class _Step:
    """One pass of a poll: what the instance owned, and what reading from it found."""

    owned: list[TopicPartition]
    generation: int | None
    changes: asyncio.Future[None] | None  # resolves at the group's next generation
    regrouped: bool  # a stream's partitions changed since its last pass
    before: dict[TopicPartition, int] = field(default_factory=dict)
    moved: bool = False  # a position moved: the instance must be saved
    woken: bool = False
    remaining: int = 0  # ms the read could wait
    left: Allowance | None = None
    polled: Polled = field(default_factory=list)
    blocked: Blocked | None = None
    undecodable: ConversionError | None = None


class Allowance:
    """How many more records, and (``exact``) bytes, a bounded poll may hand out; ``spent``: the
    bytes it handed out."""

    __slots__ = ("bytes", "exact", "records", "spent")

    def __init__(self, records: int | None, byte_limit: int | None) -> None:
        self.records = records
        self.bytes = byte_limit
        self.exact = byte_limit is not None
        self.spent = 0

    def take(self, records: RecordColumns) -> RecordColumns:
        """The leading ``records`` that fit, spent from the allowance."""
        end = len(records) if self.records is None else min(len(records), self.records)
        if self.bytes is not None and end:
            # the running totals of the records' sizes, and where they pass the bytes left: a
            # batch is thousands of records
            totals = list(accumulate(records.sizes[:end]))
            end = bisect_right(totals, self.bytes)  # sizes are never negative: totals only grow
            spent = totals[end - 1] if end else 0
            self.spent += spent
            self.bytes -= spent
        if self.records is not None:
            self.records -= end
        return records if end == len(records) else records[:end]


class Poller:
    """Polls consumer instances (``poll``), long-polls and push streams' bounded polls alike.

    Collaborators: ``Instances``, the ``Log``, ``ConsumerGroups`` and ``Sessions`` ports, the consume
    ``Quotas``, ``Serde`` (schema formats) and the gateway's draining event, which ends every wait.
    """

    def __init__(
        self,
        log: Log,
        store: ConsumerGroups,
        sessions: Sessions,
        instances: Instances,
        quotas: Quotas,
        draining: asyncio.Event,
        serde: Serde | None,
    ) -> None:
        self._log = log
        self._store = store
        self._sessions = sessions
        self._instances = instances
        self._quotas = quotas
        # Set when the gateway is shutting down: long-polls answer with what they have, at once.
        self._draining = draining
        self._serde = serde
        self._drain_task: asyncio.Future[Any] | None = None  # ``_drained``

    async def poll(
        self,
        group: str,
        name: str,
        timeout_ms: int | None,
        max_bytes: int,
        accept: set[EmbeddedFormat] | None,
        client: str,
        who: Decision | None,
        *,
        bound: Bound | None = None,
        wake: asyncio.Event | None = None,
    ) -> Batch:
        """One poll of instance ``name`` of ``group``, in its format (one of ``accept``, if given):
        what ``ConsumerService.poll`` and ``ConsumerService.take`` promise, ``bound`` being
        ``take``'s limits and ``wake`` what ends its wait early.

        Each pass looks at what the instance owns, reads from its positions, waits if there was
        nothing to read, then saves what moved; a pass that lost a race (a rebalance, another
        request saving first) is run again on the instance as it now is.
        """
        state = await self._instances.load(group, name, who)
        fmt = state.config.format
        if accept is not None and fmt not in accept:
            raise ConsumerFormatMismatch()
        wait_ms = state.config.request_timeout_ms if timeout_ms is None or timeout_ms < 0 else timeout_ms
        ask = _Ask(self._instances.now_ms() + wait_ms, max_bytes, bound, wake)
        admitted = not self._quotas.consume or ask.peek
        seen: list[TopicPartition] | None = None
        while True:
            step = await self._look(state, who, seen, ask)
            seen = step.owned
            if not admitted:
                await self._quotas.admit_consume(client, {tp.topic for tp in step.owned})
                admitted = True
            step.moved = await self._fill_positions(state, step.owned)
            step.before = {tp: state.positions[tp] for tp in step.owned}
            await self._read(state, step, ask)
            if step.undecodable is not None and not step.polled:
                raise step.undecodable
            await self._idle(state, step, ask)
            if not await self._settle(state, step):
                state = await self._instances.load(group, name, who)
                continue
            if step.polled or step.blocked or step.woken or step.regrouped or self._over(ask):
                if self._quotas.consume and not ask.peek:
                    await self._quotas.consumed(client, step.polled)
                return self._batch(state, step, fmt)
            state = await self._instances.load(group, name, who)

    async def _look(
        self, state: InstanceState, who: Decision | None, seen: list[TopicPartition] | None, ask: _Ask
    ) -> _Step:
        """What the instance owns now, in which generation; whether a stream's partitions changed
        since its last pass (it answers at once, to report the rebalance); ``who`` let READ them."""
        changes = self._instances.changed(state)  # taken before the view: a publish after it wakes
        owned, generation = await self._instances.view(state)
        regrouped = ask.wake is not None and seen is not None and owned != seen
        if who is not None:
            who.check(ResourceType.TOPIC, {tp.topic for tp in owned}, Operation.READ)
        return _Step(owned, generation, changes, regrouped)

    async def _read(self, state: InstanceState, step: _Step, ask: _Ask) -> None:
        """Fetch from the step's positions, waiting up to what is left of the deadline, and hand
        out what the bound lets through and decodes; a woken stream reads nothing."""
        # a stream woken takes nothing more (its client may be gone); a long-poll answers what is there
        skip = ask.peek or (ask.wake is not None and (ask.wake.is_set() or self._draining.is_set()))
        step.woken = skip or self._draining.is_set()
        step.remaining = (
            0 if step.woken or step.regrouped else max(0, ask.deadline_ms - self._instances.now_ms())
        )
        if not step.owned or skip:
            return
        step.left = None if ask.bound is None else Allowance(ask.bound.records, ask.bound.bytes)
        with self._instances.waiting.holding(state, step.remaining):
            data = await self._fetch(
                step.before,
                max_bytes=ask.max_bytes,
                max_wait_ms=step.remaining,  # the lease renewed meanwhile
                min_bytes=state.config.fetch_min_bytes,
                wake=ask.wake,
                changes=step.changes,
            )
        for tp, part in data.items():
            if part.out_of_range:  # before what retention left, or a seek or commit past the end
                state.positions[tp] = await self._reset(state, tp, step.before[tp])
                step.moved = True
            elif part.records:
                await self._hand_out(state, step, tp, part.records)
        if step.polled:
            step.blocked = None
        step.woken = step.woken or self._draining.is_set() or (ask.wake is not None and ask.wake.is_set())

    async def _hand_out(
        self, state: InstanceState, step: _Step, tp: TopicPartition, fetched: RecordColumns
    ) -> None:
        """Hand out the leading records of ``fetched`` that the bound lets through and that decode,
        moving ``tp``'s position past them; a first record alone over an exact bound is ``Blocked``."""
        records = fetched if step.left is None else step.left.take(fetched)
        if (
            not records
            and not step.polled
            and step.blocked is None
            and step.left is not None
            and step.left.exact
        ):
            step.blocked = Blocked(tp, fetched.offsets[0], fetched.sizes[0])
        fmt = state.config.format
        if records and fmt in SCHEMA_TYPES:  # the position moves past what decodes only
            records, error = await self._decode(fmt, tp, records)
            step.undecodable = step.undecodable or error
        if records:
            step.polled.append((tp, records))
            state.positions[tp] = records.offsets[-1] + 1
            step.moved = True

    async def _idle(self, state: InstanceState, step: _Step, ask: _Ask) -> None:
        """After a pass that found nothing: wait for the group's next generation if the instance
        owns nothing, or a slice if the fetch answered early, so that the next pass is no busy loop."""
        if step.woken or not step.remaining:
            return
        if not step.owned:
            with self._instances.waiting.holding(state, step.remaining):
                await self._until_woken(step.remaining / 1000, ask.wake, step.changes)
        elif not step.polled and step.blocked is None and not _done(step.changes):
            await asyncio.sleep(min(step.remaining / 1000, _IDLE_SLICE_S))

    async def _settle(self, state: InstanceState, step: _Step) -> bool:
        """Keep what the pass did: False if it lost a race (a rebalance while it read, or another
        request that saved the instance first), and the pass must be run again."""
        if step.polled and step.generation is not None:
            # a rebalance during the wait: never hand out a partition the instance lost
            if (await self._store.state(state.group)).generation != step.generation:
                return False
        state.last_seen_ms = self._instances.now_ms()
        if step.moved:
            if not await self._sessions.save(state):
                return False
        else:
            await self._instances.touch(state)
        if step.polled and state.config.auto_commit:
            await self._auto_commit(state, {tp for tp, _ in step.polled}, step.generation)
        return True

    def _over(self, ask: _Ask) -> bool:
        return self._instances.now_ms() >= ask.deadline_ms or self._draining.is_set()

    @staticmethod
    def _batch(state: InstanceState, step: _Step, fmt: EmbeddedFormat) -> Batch:
        after = {tp: state.positions[tp] for tp in step.owned if tp in state.positions}
        left = step.left
        # what the allowance counted (decoding a schema format may keep fewer records than it took)
        weight = left.spent if left is not None and left.exact and fmt not in SCHEMA_TYPES else None
        lease = state.config.instance_timeout_ms
        return Batch(fmt, step.polled, tuple(step.owned), step.before, after, lease, step.blocked, weight)

    async def _fetch(
        self,
        positions: dict[TopicPartition, int],
        *,
        max_bytes: int,
        max_wait_ms: int,
        min_bytes: int,
        wake: asyncio.Event | None,
        changes: asyncio.Future[None] | None,
    ) -> dict[TopicPartition, PartitionData]:
        """The log's fetch, dropped (nothing fetched) once ``wake`` or the drain is set or
        ``changes`` resolves (the instance's partitions may have changed).

        A fetch only reads, so dropping one moves nothing: what it would have read is read again.
        """
        fetch = self._log.fetch(positions, max_bytes=max_bytes, max_wait_ms=max_wait_ms, min_bytes=min_bytes)
        if max_wait_ms <= 0:
            return await fetch
        fetching = asyncio.ensure_future(fetch)
        waiters = self._wakers(wake)
        try:
            others = (changes,) if changes is not None else ()
            await asyncio.wait(
                (fetching, self._drained(), *waiters, *others), return_when=asyncio.FIRST_COMPLETED
            )
            if fetching.done():
                return fetching.result()
            return {}
        finally:
            for task in waiters:
                task.cancel()
            if not fetching.done():
                fetching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await fetching

    async def _until_woken(
        self, seconds: float, wake: asyncio.Event | None, changes: asyncio.Future[None] | None
    ) -> None:
        """Sleep up to ``seconds``, less if ``wake`` or the drain is set or ``changes`` resolves."""
        waiters = self._wakers(wake)
        try:
            others = (changes,) if changes is not None else ()
            await asyncio.wait(
                (self._drained(), *waiters, *others), timeout=seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in waiters:
                task.cancel()

    def _drained(self) -> asyncio.Future[Any]:
        """A future done once the gateway drains: one task shared by every poll that waits
        (through ``asyncio.wait``, which never cancels it), not one task per poll."""
        drained = self._drain_task
        if drained is None or drained.get_loop() is not asyncio.get_running_loop():
            drained = asyncio.ensure_future(self._draining.wait())
            self._drain_task = drained
        return drained

    @staticmethod
    def _wakers(wake: asyncio.Event | None) -> tuple[asyncio.Future[bool], ...]:
        """A task done when ``wake`` (a stream's) is set, if there is one; the caller cancels it."""
        return () if wake is None else (asyncio.ensure_future(wake.wait()),)

    async def _decode(
        self, fmt: str, tp: TopicPartition, records: RecordColumns
    ) -> tuple[RecordColumns, ConversionError | None]:
        """The leading ``records`` whose keys and values decode with their schemas, decoded, and
        why the next one does not (``serde.Serde.decode_fetched``)."""
        decoded = await decode_in(self._serde, fmt, tp, records)
        return decoded.records, decoded.error

    async def _auto_commit(
        self, state: InstanceState, tps: set[TopicPartition], generation: int | None
    ) -> None:
        offsets = {tp: state.positions[tp] for tp in tps}
        try:
            await self._instances.store(state, offsets, generation)
        except IllegalState as exc:  # lost the partition meanwhile; the new owner re-reads
            log.info("auto-commit of %r/%s skipped: %s", state.group, state.name, exc)

    async def _reset(self, state: InstanceState, tp: TopicPartition, at: int | None = None) -> int:
        """Where ``auto.offset.reset`` puts ``tp``: it has no committed offset, or (``at``) its
        position is out of range, as Kafka's consumer resets after an OFFSET_OUT_OF_RANGE fetch."""
        policy = state.config.auto_offset_reset
        if policy == "none" and at is None:
            raise IllegalState(
                f"No committed offset for partition {tp} and auto.offset.reset is 'none'; seek first."
            )
        begin, end = await self._log.offsets(tp)
        if policy == "none" and at is not None:
            raise OffsetOutOfRange(str(tp), at, begin, end, " and auto.offset.reset is 'none'; seek first")
        return begin if policy == "earliest" else end

    async def _fill_positions(self, state: InstanceState, owned: list[TopicPartition]) -> bool:
        missing = [tp for tp in owned if tp not in state.positions]
        if not missing:
            return False
        committed = await self._store.committed(state.group, missing)
        for tp in missing:
            state.positions[tp] = committed[tp] if tp in committed else await self._reset(state, tp)
        return True


def _done(future: asyncio.Future[None] | None) -> bool:
    return future is not None and future.done()
