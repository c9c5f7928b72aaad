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
(fetch, offsets), the ``Coordinator`` (committed offsets, the group's generation), the consume
``Quotas`` and ``Serde`` for the schema formats. ``service.ConsumerService`` is its caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from service.errors import (
    BackendUnavailable,
    ConsumerFormatMismatch,
    ConversionError,
    IllegalState,
    OffsetOutOfRange,
)

from ..acl import Decision, Operation, ResourceType
from ..models import EmbeddedFormat, InstanceState, PartitionData, Polled, RecordColumns, TopicPartition
from ..ports import Coordinator, Log, Sessions
from ..quotas import Quotas
from ..schemas.serde import SCHEMA_TYPES, Serde
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

    Collaborators: ``Instances``, the ``Log``, ``Coordinator`` and ``Sessions`` ports, the consume
    ``Quotas``, ``Serde`` (schema formats) and the gateway's draining event, which ends every wait.
    """

    def __init__(
        self,
        log: Log,
        coordinator: Coordinator,
        sessions: Sessions,
        instances: Instances,
        quotas: Quotas,
        draining: asyncio.Event,
        serde: Serde | None,
    ) -> None:
        self._log = log
        self._coordinator = coordinator
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
        allowance: tuple[int | None, int | None] | None = None,
        wake: asyncio.Event | None = None,
    ) -> Batch:
        """One poll of instance ``name`` of ``group``, in its format (one of ``accept``, if given):
        what ``ConsumerService.poll`` and ``ConsumerService.take`` promise, ``allowance`` being
        ``take``'s bounds (records, bytes) and ``wake`` what ends its wait early."""
        state = await self._instances.load(group, name, who)
        fmt = state.config.format
        if accept is not None and fmt not in accept:
            raise ConsumerFormatMismatch()
        wait_ms = state.config.request_timeout_ms if timeout_ms is None or timeout_ms < 0 else timeout_ms
        deadline = self._instances.now_ms() + wait_ms
        quotas = self._quotas
        peek = allowance is not None and allowance[0] == 0  # a stream asking where it stands
        admitted = not quotas.consume or peek
        seen: list[TopicPartition] | None = None
        while True:
            changes = self._instances.changed(state)  # taken before the view: a publish after it wakes
            owned, generation = await self._instances.view(state)
            # a stream learns of a rebalance at once: its poll answers without waiting more
            regrouped = wake is not None and seen is not None and owned != seen
            seen = owned
            if who is not None:
                who.check(ResourceType.TOPIC, {tp.topic for tp in owned}, Operation.READ)
            if not admitted:
                await quotas.admit_consume(client, {tp.topic for tp in owned})
                admitted = True
            changed = await self._fill_positions(state, owned)
            # a stream woken takes nothing more (its client may be gone); a long-poll answers what is there
            skip = peek or (wake is not None and (wake.is_set() or self._draining.is_set()))
            woken = skip or self._draining.is_set()
            remaining = 0 if woken or regrouped else max(0, deadline - self._instances.now_ms())
            polled: Polled = []
            undecodable: ConversionError | None = None
            blocked: Blocked | None = None
            positions = {tp: state.positions[tp] for tp in owned}
            left = None
            if owned and not skip:
                left = None if allowance is None else Allowance(*allowance)
                with self._instances.waiting.holding(state, remaining):
                    data = await self._fetch(
                        positions,
                        max_bytes=max_bytes,
                        max_wait_ms=remaining,  # the lease renewed meanwhile
                        min_bytes=state.config.fetch_min_bytes,
                        wake=wake,
                        changes=changes,
                    )
                for tp, part in data.items():
                    if part.out_of_range:  # before what retention left, or a seek or commit past the end
                        state.positions[tp] = await self._reset(state, tp, positions[tp])
                        changed = True
                    elif part.records:
                        records = part.records
                        if left is not None:
                            records = left.take(records)
                            if not records and not polled and blocked is None and left.exact:
                                head = part.records
                                blocked = Blocked(tp, head.offsets[0], head.sizes[0])
                        if records and fmt in SCHEMA_TYPES:  # the position moves past what decodes only
                            records, error = await self._decode(fmt, tp, records)
                            undecodable = undecodable or error
                        if records:
                            polled.append((tp, records))
                            state.positions[tp] = records.offsets[-1] + 1
                            changed = True
                if polled:
                    blocked = None
                woken = woken or self._draining.is_set() or (wake is not None and wake.is_set())
            if undecodable is not None and not polled:
                raise undecodable
            elif not owned and remaining and not woken:
                # nothing to read: until the group's next generation (or a wake, the drain, its deadline)
                with self._instances.waiting.holding(state, remaining):
                    await self._until_woken(remaining / 1000, wake, changes)
            elif remaining and not polled and blocked is None and not woken and not _done(changes):
                # a fetch that answered early with nothing: not a busy loop
                await asyncio.sleep(min(remaining / 1000, _IDLE_SLICE_S))
            if polled and generation is not None:
                # A rebalance during the wait: never hand out a partition the instance lost.
                if (await self._coordinator.state(group)).generation != generation:
                    state = await self._instances.load(group, name, who)
                    continue
            state.last_seen_ms = self._instances.now_ms()
            if changed:
                if not await self._sessions.save(state):
                    # another request moved the positions first
                    state = await self._instances.load(group, name, who)
                    continue
            else:
                await self._instances.touch(state)
            if polled and state.config.auto_commit:
                await self._auto_commit(state, {tp for tp, _ in polled}, generation)
            if (
                polled
                or blocked
                or woken
                or regrouped
                or self._instances.now_ms() >= deadline
                or self._draining.is_set()
            ):
                if quotas.consume and not peek:
                    await quotas.consumed(client, polled)
                after = {tp: state.positions[tp] for tp in owned if tp in state.positions}
                lease = state.config.instance_timeout_ms
                # what the allowance counted (decoding a schema format may keep fewer records than it took)
                counted = left is not None and left.exact and fmt not in SCHEMA_TYPES
                weight = left.spent if counted and left is not None else None
                return Batch(fmt, polled, tuple(owned), positions, after, lease, blocked, weight)
            state = await self._instances.load(group, name, who)

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
        """Done once the gateway drains: one task for every poll that waits (through
        ``asyncio.wait``, which never cancels it), not one each."""
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
        if self._serde is None:
            raise BackendUnavailable(f"The {fmt} format needs a schema registry, and there is none.")
        decoded = await self._serde.decode_fetched(SCHEMA_TYPES[fmt], tp, records)
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
        committed = await self._coordinator.committed(state.group, missing)
        for tp in missing:
            state.positions[tp] = committed[tp] if tp in committed else await self._reset(state, tp)
        return True


def _done(future: asyncio.Future[None] | None) -> bool:
    return future is not None and future.done()
