"""Consumer instances: subscribe or assign, poll, commit, seek.

An instance's state lives in the Sessions port and its group membership in
the Coordinator, so any replica can serve any request of any instance. Every
mutation is load → change → compare-and-set save, retried on conflict: two
concurrent polls of one instance can never return the same records twice or
skip any. Positions are trusted only for partitions the instance has owned
continuously since the generation they were read in.

An instance belongs to the principal that created it: a request of anyone else (but a super
user) is answered as if the instance did not exist. Methods take the request's ``Decision``
as ``who``; None is the gateway itself (the reaper), which may reach every instance.

Push streams (``streams``) are loops of ``take``: a poll without a place among the open
long-polls (a stream holds one of its own), bounded in records and, exactly, in bytes for a
client's credit, whose wait ends early when the stream is woken; it tells what the instance
owned and where it stood before and after, so a stream can report a rebalance and carry the
positions a client resumes from (``resume``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from bisect import bisect_right
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Protocol

from service.errors import (
    BackendUnavailable,
    ConsumerFormatMismatch,
    ConsumerInstanceNotFound,
    ConversionError,
    IllegalState,
    InvalidPayload,
)

from .acl import ANONYMOUS, Decision, Operation, ResourceType
from .fair import InstanceLimits, holder_of
from .fencing import fence_assigned
from .groups import GroupManager, compile_pattern, resolve
from .models import (
    EmbeddedFormat,
    InstanceConfig,
    InstanceState,
    Member,
    PartitionData,
    Record,
    Subscription,
    TopicPartition,
)
from .ports import Coordinator, Log, Sessions
from .quotas import Quotas
from .rules import check_group, check_instance, check_topic
from .schemas.serde import SCHEMA_TYPES, Serde
from .topics import TopicService
from .waits import OpenWaits

log = logging.getLogger(__name__)

# A long-poll waits on the log in slices so that a rebalance during the wait is noticed.
_WAIT_SLICE_MS = 1000
_DECODE_ON_LOOP = 200  # records of a partition decoded on the event loop; more go to a worker thread
_IDLE_SLICE_S = 0.1

# Records per partition, in fetch order.
Polled = list[tuple[TopicPartition, list[Record]]]


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

    def take(self, records: list[Record]) -> list[Record]:
        """The leading ``records`` that fit, spent from the allowance."""
        end = len(records) if self.records is None else min(len(records), self.records)
        if self.bytes is not None and end:
            # each record's size (``Record.size``; a record without headers is weighed inline), the
            # running totals, and where they pass the bytes left: a batch is thousands of records
            totals = list(
                accumulate(
                    r.size if r.headers else len(r.key or b"") + len(r.value or b"") for r in records[:end]
                )
            )
            end = bisect_right(totals, self.bytes)  # sizes are never negative: totals only grow
            spent = totals[end - 1] if end else 0
            self.spent += spent
            self.bytes -= spent
        if self.records is not None:
            self.records -= end
        return records if end == len(records) else records[:end]


class ShareKinds(Protocol):
    """What consumer instances need of share groups (``shares.consumers.ShareConsumers``): whether a
    group is one, and to release what an expired share consumer held."""

    async def in_use(self, group: str) -> bool: ...

    async def left(self, state: InstanceState) -> None: ...


class ConsumerService:
    """The consumer-instance façade the API calls; collaborators: the three ports and the group manager."""

    def __init__(
        self,
        log: Log,
        coordinator: Coordinator,
        sessions: Sessions,
        groups: GroupManager,
        topics: TopicService,
        quotas: Quotas | None = None,
        *,
        draining: asyncio.Event | None = None,
        limits: InstanceLimits | None = None,
        waits: OpenWaits | None = None,
        serde: Serde | None = None,
        clock: Callable[[], float] = time.time,
        shares: ShareKinds | None = None,
    ) -> None:
        self._log = log
        self._coordinator = coordinator
        self._sessions = sessions
        self._groups = groups
        self._topics = topics
        self._quotas = quotas or Quotas.off()
        # Set when the gateway is shutting down: long-polls answer with what they have, at once.
        self._draining = draining or asyncio.Event()
        self._limits = limits or InstanceLimits()
        self._waits = waits or OpenWaits()
        self._serde = serde
        self._clock = clock
        self._shares = shares

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    # --- lifecycle -----------------------------------------------------------------

    async def create(
        self, group: str, name: str | None, config: InstanceConfig, *, owner: str = ANONYMOUS
    ) -> InstanceState:
        check_group(group)
        name = check_instance(name) if name else f"rest-consumer-{uuid.uuid4()}"
        await self._limits.admit(self._sessions, group, owner)
        if self._shares is not None and await self._shares.in_use(group):
            raise IllegalState(
                f"Group {group!r} is a share group; a group is a consumer group or a share group, not both."
            )
        now = self.now_ms()
        state = InstanceState(
            group=group, name=name, config=config, created_ms=now, last_seen_ms=now, owner=owner
        )
        await self._sessions.create(state)
        return state

    async def delete(self, group: str, name: str, *, who: Decision | None = None) -> None:
        state = await self._load(group, name, who)
        if who is not None and state.owner != who.caller.principal:  # a super user cleaning up
            who.audit(
                "consumer.delete",
                Operation.DELETE,
                ResourceType.GROUP,
                group,
                instance=name,
                owner=state.owner,
            )
        await self._remove(group, name)

    async def expire(self) -> int:
        """Remove every instance whose lease ran out, share consumers too; returns how many."""
        expired = await self._sessions.expired(self.now_ms())
        for group, name in expired:
            log.info("consumer %r/%s expired", group, name)
            try:
                state = await self._sessions.load(group, name)
            except ConsumerInstanceNotFound:
                continue  # removed meanwhile
            if state.config.kind == "share" and self._shares is not None:
                await self._sessions.delete(group, name)
                await self._shares.left(state)
            else:
                await self._remove(group, name)
        return len(expired)

    async def _remove(self, group: str, name: str) -> None:
        await self._sessions.delete(group, name)
        if await self._coordinator.leave(group, name):
            await self._groups.rebalance(group)

    async def owned(self, group: str, name: str, *, who: Decision | None) -> None:
        """``ConsumerInstanceNotFound`` unless the instance exists and is the caller's: what a route
        decides before anything its body names (a topic the caller may not read, a bad pattern), so
        another principal's instance gets the answer a missing one does, whatever the body."""
        await self._load(group, name, who)

    async def _load(self, group: str, name: str, who: Decision | None) -> InstanceState:
        state = await self._sessions.load(group, name)
        if state.config.kind != "consumer" or (who is not None and not who.owns(state.owner)):
            # not a 403: whose instances exist is nobody else's business; a share consumer is not here
            raise ConsumerInstanceNotFound()
        if state.expires_ms < self.now_ms():
            await self._remove(group, name)
            raise ConsumerInstanceNotFound()
        return state

    async def _touch(self, state: InstanceState) -> None:
        await self._sessions.touch(state.group, state.name, self.now_ms())

    async def _mutate(
        self,
        group: str,
        name: str,
        change: Callable[[InstanceState, list[TopicPartition]], Awaitable[None]],
        who: Decision | None,
    ) -> InstanceState:
        """Load, apply ``change`` (given the owned partitions), save; retry if another request won."""
        while True:
            state = await self._load(group, name, who)
            owned, _ = await self._view(state)
            await change(state, owned)
            state.last_seen_ms = self.now_ms()
            if await self._sessions.save(state):
                return state

    # --- subscription and assignment ---------------------------------------------

    async def subscribe(
        self, group: str, name: str, subscription: Subscription, *, who: Decision | None = None
    ) -> None:
        if subscription.pattern is not None:
            compile_pattern(subscription.pattern)
        for topic in subscription.topics:
            check_topic(topic)

        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            if state.manual is not None:
                raise IllegalState(
                    "Subscription to topics, partitions and pattern are mutually exclusive; "
                    "delete the assignment first."
                )
            state.subscription = subscription

        state = await self._mutate(group, name, change, who)
        members = await self._coordinator.members(group)
        joined = members[name].joined_ms if name in members else state.created_ms
        member = Member(name, subscription, state.config.strategy, joined, state.owner)
        await self._coordinator.join(group, member)
        await self._groups.rebalance(group)

    async def unsubscribe(self, group: str, name: str, *, who: Decision | None = None) -> None:
        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            state.subscription = None
            state.manual = None
            state.positions = {}

        await self._mutate(group, name, change, who)
        if await self._coordinator.leave(group, name):
            await self._groups.rebalance(group)

    async def subscription(
        self, group: str, name: str, *, who: Decision | None = None
    ) -> Subscription | None:
        state = await self._load(group, name, who)
        await self._touch(state)
        return state.subscription

    async def subscribed_topics(self, group: str, name: str, *, who: Decision | None = None) -> set[str]:
        """The existing topics the instance's subscription covers now."""
        state = await self._load(group, name, who)
        if state.subscription is None:
            return set()
        return resolve(state.subscription, await self._log.list_topics())

    async def assign(
        self, group: str, name: str, partitions: Sequence[TopicPartition], *, who: Decision | None = None
    ) -> None:
        for tp in partitions:
            await self._topics.check_partition(tp)
        wanted = sorted(set(partitions))

        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            if state.subscription is not None:
                raise IllegalState(
                    "Subscription to topics, partitions and pattern are mutually exclusive; "
                    "delete the subscription first."
                )
            state.manual = wanted
            state.positions = {tp: off for tp, off in state.positions.items() if tp in wanted}

        await self._mutate(group, name, change, who)

    async def assignment(self, group: str, name: str, *, who: Decision | None = None) -> list[TopicPartition]:
        state = await self._load(group, name, who)
        await self._touch(state)
        owned, _ = await self._view(state)
        return owned

    async def _view(self, state: InstanceState) -> tuple[list[TopicPartition], int | None]:
        """The partitions ``state`` owns now, and the group generation that says so.

        Drops positions of partitions the instance lost, or lost and regained,
        since the generation they were read in: another member may have moved on.
        """
        if state.manual is not None:
            return list(state.manual), None
        if state.subscription is None:
            state.positions = {}
            return [], None
        group_state = await self._coordinator.state(state.group)
        owned = sorted(group_state.assignment.get(state.name, []))
        if group_state.generation != state.generation:
            since = group_state.owned_since
            state.positions = {
                tp: off
                for tp, off in state.positions.items()
                if tp in owned and since.get(tp, group_state.generation) <= state.generation
            }
            state.generation = group_state.generation
        return owned, group_state.generation

    # --- positions -----------------------------------------------------------------

    async def _reset(self, state: InstanceState, tp: TopicPartition) -> int:
        policy = state.config.auto_offset_reset
        if policy == "none":
            raise IllegalState(
                f"No committed offset for partition {tp} and auto.offset.reset is 'none'; seek first."
            )
        begin, end = await self._log.offsets(tp)
        return begin if policy == "earliest" else end

    async def _fill_positions(self, state: InstanceState, owned: list[TopicPartition]) -> bool:
        missing = [tp for tp in owned if tp not in state.positions]
        if not missing:
            return False
        committed = await self._coordinator.committed(state.group, missing)
        for tp in missing:
            state.positions[tp] = committed[tp] if tp in committed else await self._reset(state, tp)
        return True

    async def poll(
        self,
        group: str,
        name: str,
        *,
        timeout_ms: int | None,
        max_bytes: int,
        accept: set[EmbeddedFormat] | None,
        client: str = "",
        who: Decision | None = None,
    ) -> tuple[EmbeddedFormat, Polled]:
        """Long-poll: return as soon as records arrive, or empty after the timeout.

        With consume quotas, the poll is admitted for ``client`` once it knows the partitions it
        reads (refused with ``Throttled`` while any of their buckets is in debt), and the bytes it
        returns are charged afterwards. While the gateway drains, it answers at the end of its
        current wait slice (a second at most) with what it has. Past the gateway's bound of open
        long-polls it is refused at once (``BackendUnavailable``, 503). With ``who``, every topic it
        would read from must allow ``who`` to READ it (``Forbidden`` otherwise, as Kafka's fetch
        fails with TOPIC_AUTHORIZATION_FAILED): an ACL taken away ends the reading at once.
        """
        with self._waits.enter(holder_of(who.caller) if who is not None else ""):
            batch = await self._poll(group, name, timeout_ms, max_bytes, accept, client, who)
        return batch.format, batch.polled

    async def take(
        self,
        group: str,
        name: str,
        *,
        timeout_ms: int,
        max_bytes: int,
        max_records: int | None = None,
        byte_limit: int | None = None,
        wake: asyncio.Event | None = None,
        client: str = "",
        who: Decision | None = None,
    ) -> Batch:
        """One poll of a push stream: ``poll`` in the instance's own format, without a place among
        the open long-polls (a stream holds one of its own), telling what the instance owned.

        At most ``max_records`` records; with ``byte_limit`` at most that many bytes in all, exactly
        (``Record.size``): a record that alone weighs more is not handed out, and with nothing else
        to hand out the poll answers at once with it as ``blocked``. ``max_records=0`` takes
        nothing and answers at once: what the instance owns and where it stands (its positions
        filled), its lease renewed; not charged to a quota, as it reads nothing. The wait ends
        early, with nothing taken, when ``wake`` is set or the gateway drains: the fetch is dropped
        before any position moved, so nothing is lost.
        """
        if max_records is not None and max_records < 0:
            raise ValueError("a bounded poll takes no fewer than no records")
        return await self._poll(
            group,
            name,
            timeout_ms,
            max_bytes,
            None,
            client,
            who,
            allowance=None if max_records is None and byte_limit is None else (max_records, byte_limit),
            wake=wake,
        )

    async def _poll(
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
        state = await self._load(group, name, who)
        fmt = state.config.format
        if accept is not None and fmt not in accept:
            raise ConsumerFormatMismatch()
        wait_ms = state.config.request_timeout_ms if timeout_ms is None or timeout_ms < 0 else timeout_ms
        deadline = self.now_ms() + wait_ms
        quotas = self._quotas
        peek = allowance is not None and allowance[0] == 0  # a stream asking where it stands
        admitted = not quotas.consume or peek
        while True:
            owned, generation = await self._view(state)
            if who is not None:
                who.check(ResourceType.TOPIC, {tp.topic for tp in owned}, Operation.READ)
            if not admitted:
                await quotas.admit_consume(client, {tp.topic for tp in owned})
                admitted = True
            changed = await self._fill_positions(state, owned)
            # a stream woken takes nothing more (its client may be gone); a long-poll answers what is there
            skip = peek or (wake is not None and (wake.is_set() or self._draining.is_set()))
            woken = skip or self._draining.is_set()
            remaining = 0 if woken else max(0, deadline - self.now_ms())
            polled: Polled = []
            undecodable: ConversionError | None = None
            blocked: Blocked | None = None
            positions = {tp: state.positions[tp] for tp in owned}
            left = None
            if owned and not skip:
                left = None if allowance is None else Allowance(*allowance)
                data = await self._fetch(
                    positions,
                    max_bytes=max_bytes,
                    max_wait_ms=min(remaining, _WAIT_SLICE_MS),
                    min_bytes=state.config.fetch_min_bytes,
                    wake=wake,
                )
                for tp, part in data.items():
                    if positions[tp] < part.log_start_offset:  # retention removed what we were at
                        state.positions[tp] = await self._reset(state, tp)
                        changed = True
                    elif part.records:
                        records = part.records
                        if left is not None:
                            records = left.take(records)
                            if not records and not polled and blocked is None and left.exact:
                                head = part.records[0]
                                blocked = Blocked(tp, head.offset, head.size)
                        if records and fmt in SCHEMA_TYPES:  # the position moves past what decodes only
                            records, error = await self._decode(fmt, tp, records)
                            undecodable = undecodable or error
                        if records:
                            polled.append((tp, records))
                            state.positions[tp] = records[-1].offset + 1
                            changed = True
                if polled:
                    blocked = None
                woken = woken or self._draining.is_set() or (wake is not None and wake.is_set())
            if undecodable is not None and not polled:
                raise undecodable
            elif remaining and not polled and blocked is None and not woken:
                # nothing owned, or a fetch that answered early with nothing: not a busy loop
                await asyncio.sleep(min(remaining / 1000, _IDLE_SLICE_S))
            if polled and generation is not None:
                # A rebalance during the wait: never hand out a partition the instance lost.
                if (await self._coordinator.state(group)).generation != generation:
                    state = await self._load(group, name, who)
                    continue
            state.last_seen_ms = self.now_ms()
            if changed:
                if not await self._sessions.save(state):
                    state = await self._load(group, name, who)  # another request moved the positions first
                    continue
            else:
                await self._touch(state)
            if polled and state.config.auto_commit:
                await self._auto_commit(state, {tp for tp, _ in polled}, generation)
            if polled or blocked or woken or self.now_ms() >= deadline or self._draining.is_set():
                if quotas.consume and not peek:
                    await quotas.consumed(client, polled)
                after = {tp: state.positions[tp] for tp in owned if tp in state.positions}
                lease = state.config.instance_timeout_ms
                # what the allowance counted (decoding a schema format may keep fewer records than it took)
                counted = left is not None and left.exact and fmt not in SCHEMA_TYPES
                weight = left.spent if counted and left is not None else None
                return Batch(fmt, polled, tuple(owned), positions, after, lease, blocked, weight)
            state = await self._load(group, name, who)

    async def _fetch(
        self,
        positions: dict[TopicPartition, int],
        *,
        max_bytes: int,
        max_wait_ms: int,
        min_bytes: int,
        wake: asyncio.Event | None,
    ) -> dict[TopicPartition, PartitionData]:
        """The log's fetch; with ``wake``, dropped (nothing fetched) once it or the drain is set.

        A fetch only reads, so dropping one moves nothing: what it would have read is read again.
        """
        fetch = self._log.fetch(positions, max_bytes=max_bytes, max_wait_ms=max_wait_ms, min_bytes=min_bytes)
        if wake is None or max_wait_ms <= 0:
            return await fetch
        fetching = asyncio.ensure_future(fetch)
        waiters = (asyncio.ensure_future(wake.wait()), asyncio.ensure_future(self._draining.wait()))
        try:
            await asyncio.wait((fetching, *waiters), return_when=asyncio.FIRST_COMPLETED)
            if fetching.done():
                return fetching.result()
            return {}
        finally:
            for task in (fetching, *waiters):
                if not task.done():
                    task.cancel()
            if not fetching.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await fetching

    async def _decode(
        self, fmt: str, tp: TopicPartition, records: list[Record]
    ) -> tuple[list[Record], ConversionError | None]:
        """The leading ``records`` whose keys and values decode with their schemas, decoded, and
        why the next one does not (``serde.Serde.decode``); many are decoded in a worker thread."""
        if self._serde is None:
            raise BackendUnavailable(f"The {fmt} format needs a schema registry, and there is none.")
        await self._serde.prepare(records)
        where = f"{tp.topic!r} partition {tp.partition}"
        decode = functools.partial(self._serde.decode, SCHEMA_TYPES[fmt], records, where=where)
        decoded = await asyncio.to_thread(decode) if len(records) > _DECODE_ON_LOOP else decode()
        return decoded.records, decoded.error

    async def _auto_commit(
        self, state: InstanceState, tps: set[TopicPartition], generation: int | None
    ) -> None:
        offsets = {tp: state.positions[tp] for tp in tps}
        try:
            await self._store(state, offsets, generation)
        except IllegalState as exc:  # lost the partition meanwhile; the new owner re-reads
            log.info("auto-commit of %r/%s skipped: %s", state.group, state.name, exc)

    async def commit(
        self,
        group: str,
        name: str,
        offsets: Mapping[TopicPartition, int] | None,
        *,
        who: Decision | None = None,
    ) -> dict[TopicPartition, int]:
        """Commit ``offsets`` (each the last processed offset, so offset+1 is stored) or all consumed.

        Refused with ``IllegalState``, storing nothing, if any partition is not the instance's to
        commit: not owned in the current generation by a member, not in a manual assignment, or
        anything at all for an instance with neither (see ``fencing``).
        """
        state = await self._load(group, name, who)
        await self._touch(state)
        owned, generation = await self._view(state)
        if offsets is None:
            to_commit = {tp: off for tp, off in state.positions.items() if tp in owned}
        else:
            for tp, off in offsets.items():
                if off < 0:
                    raise InvalidPayload(f"Offset {off} for partition {tp} is negative.")
                await self._topics.check_partition(tp)
            to_commit = {tp: off + 1 for tp, off in offsets.items()}
        if to_commit:
            await self._store(state, to_commit, generation)
        return to_commit

    async def _store(
        self, state: InstanceState, offsets: Mapping[TopicPartition, int], generation: int | None
    ) -> None:
        """Commit ``offsets`` for ``state``, all or none, only if it may (see ``fencing``).

        A member's commit is fenced by the coordinator, atomically with the write, against the
        generation ``state`` was viewed in; any other instance's by its manual assignment here.
        """
        if state.subscription is not None:
            await self._coordinator.commit(state.group, offsets, member_id=state.name, generation=generation)
            return
        fence_assigned(state.group, state.name, state.manual, offsets)
        await self._coordinator.commit(state.group, offsets)

    async def committed(
        self,
        group: str,
        name: str,
        partitions: Sequence[TopicPartition] | None,
        *,
        who: Decision | None = None,
    ) -> dict[TopicPartition, int | None]:
        state = await self._load(group, name, who)
        await self._touch(state)
        if partitions is None:
            partitions, _ = await self._view(state)
        found = await self._coordinator.committed(group, partitions)
        return {tp: found.get(tp) for tp in partitions}

    async def seek(
        self, group: str, name: str, targets: Mapping[TopicPartition, int], *, who: Decision | None = None
    ) -> None:
        for tp, off in targets.items():
            if off < 0:
                raise InvalidPayload(f"Offset {off} for partition {tp} is negative.")

        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            _require_owned(targets, owned)
            state.positions.update(targets)

        await self._mutate(group, name, change, who)

    async def seek_to(
        self,
        group: str,
        name: str,
        partitions: Sequence[TopicPartition],
        *,
        end: bool,
        who: Decision | None = None,
    ) -> None:
        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            _require_owned(partitions, owned)
            for tp in partitions:
                begin, stop = await self._log.offsets(tp)
                state.positions[tp] = stop if end else begin

        await self._mutate(group, name, change, who)

    async def seek_to_timestamps(
        self, group: str, name: str, targets: Mapping[TopicPartition, int], *, who: Decision | None = None
    ) -> None:
        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            _require_owned(targets, owned)
            for tp, ts in targets.items():
                found = await self._log.offset_for_timestamp(tp, ts)
                state.positions[tp] = found if found is not None else (await self._log.offsets(tp))[1]

        await self._mutate(group, name, change, who)

    async def resume(
        self,
        group: str,
        name: str,
        positions: Mapping[TopicPartition, int],
        *,
        who: Decision | None = None,
    ) -> InstanceConfig:
        """Seek the partitions of ``positions`` the instance owns now to them, and return its
        configuration: where a stream picks up from the cursor its client last received. A
        partition it no longer owns is left alone (it is another member's to move now); with
        ``who``, each topic moved must allow ``who`` to READ it, as the stream will."""
        for tp, off in positions.items():
            if off < 0:
                raise InvalidPayload(f"Offset {off} for partition {tp} is negative.")

        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            targets = {tp: off for tp, off in positions.items() if tp in owned}
            if who is not None:
                who.check(ResourceType.TOPIC, {tp.topic for tp in targets}, Operation.READ)
            state.positions.update(targets)

        return (await self._mutate(group, name, change, who)).config


def _require_owned(
    partitions: Mapping[TopicPartition, int] | Sequence[TopicPartition], owned: list[TopicPartition]
) -> None:
    for tp in partitions:
        if tp not in owned:
            raise IllegalState(f"No current assignment for partition {tp}.")
