"""Consumer groups: rebalancing, description and lag.

The coordinator stores members and generations; this module decides what a
generation contains. A rebalance reads the members and the live topic
metadata, resolves each member's subscription (pure, ``patterns``), runs the
group's assignor (pure, ``assignors``) against the previous assignment, and
publishes the result with compare-and-set, retrying if another replica
published first. Every change bumps the generation.

With authorization on, a member's pattern covers only the topics its principal may DESCRIBE,
as a Kafka client's pattern matches only the topics its metadata shows it; a topic list is
taken as given (reading from a topic the principal may not READ is refused at the poll).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from service.errors import BackendUnavailable, GroupNotFound, NotFound

from .acl import Access, Caller, Operation, ResourceType
from .assignors import assign
from .models import GroupState, Member, TopicPartition
from .patterns import compile_pattern, resolve
from .ports import ConsumerGroups, Log

__all__ = ["GroupDescription", "GroupManager", "PartitionLag", "compile_pattern", "resolve"]

log = logging.getLogger(__name__)

_PUBLISH_ATTEMPTS = 20
# The leader looks at every group at least this often, changed or not (``GroupManager.refresh``).
FULL_REFRESH_S: Final = 30.0


@dataclass(slots=True)
class PartitionLag:
    tp: TopicPartition
    committed: int | None
    end_offset: int
    owner: str | None

    @property
    def lag(self) -> int:
        """The log end minus the committed offset (0 without one), as ``kafka-consumer-groups``
        computes it: negative for a commit past the log end, a position no record is at, which
        a consumer resuming there resets by its ``auto.offset.reset``; never clamped to 0, which
        would show it as caught up."""
        return self.end_offset - (self.committed if self.committed is not None else 0)


@dataclass(slots=True)
class GroupDescription:
    group: str
    state: GroupState
    members: dict[str, Member]
    strategy: str


class GroupManager:
    """Computes and publishes group generations; answers group and lag queries."""

    def __init__(self, log: Log, store: ConsumerGroups, access: Access | None = None) -> None:
        self._log = log
        self._store = store
        self._access = access or Access.off()
        self._locks: dict[str, asyncio.Lock] = {}
        # One future per group with waiters, resolved at the group's next publish through this
        # replica or (the coordinator's watch) another: what a waiting poll sleeps on instead of
        # reading the generation on a timer.
        self._changes: dict[str, asyncio.Future[None]] = {}
        # What the leader's last walk over every group saw (``refresh``): the membership version,
        # the topics and the partition counts of the topics the groups wanted, and when.
        self._wanted: set[str] = set()
        self._world: object = None
        self._walked = -math.inf

    def changed(self, group: str) -> asyncio.Future[None]:
        """A future resolved when a generation of ``group`` is next published, through this replica
        or another; shared by every waiter of the group (await it through ``asyncio.wait``, never
        cancel it). A read of the group's state after this call sees the state before that change."""
        future = self._changes.get(group)
        if future is not None and not future.done():
            return future
        fresh: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._changes[group] = fresh
        self._store.watch_state(group, lambda: self._resolve(group, fresh))
        return fresh

    def _announce(self, group: str) -> None:
        future = self._changes.get(group)
        if future is not None:
            self._resolve(group, future)

    def _resolve(self, group: str, future: asyncio.Future[None]) -> None:
        if self._changes.get(group) is future:
            del self._changes[group]
        if not future.done():
            future.set_result(None)

    async def _topics_of(self, member: Member, all_topics: Iterable[str]) -> set[str]:
        """The existing topics ``member``'s subscription covers."""
        topics = resolve(member.subscription, all_topics)
        if member.subscription.pattern is None or not self._access.enabled:
            return topics
        who = await self._access.decision(Caller(member.principal))
        return {t for t in topics if who.may(ResourceType.TOPIC, t, Operation.DESCRIBE)}

    async def _partition_counts(
        self, topics: Iterable[str], known: dict[str, int | None] | None = None
    ) -> dict[str, int]:
        """How many partitions each of ``topics`` has, a deleted one left out; ``known`` holds the
        counts (None: deleted) already asked of the log, so that one refresh of every group asks
        it once a topic, not once a group."""
        known = {} if known is None else known
        counts: dict[str, int] = {}
        for t in sorted(topics):
            if t not in known:
                try:
                    known[t] = len((await self._log.describe_topic(t)).partitions)
                except NotFound:  # deleted meanwhile: it simply drops out of the assignment
                    known[t] = None
            n = known[t]
            if n is not None:
                counts[t] = n
        return counts

    @staticmethod
    def strategy_of(members: dict[str, Member]) -> str:
        # Like Kafka's group leader choosing the protocol: the longest-standing member decides.
        if not members:
            return "balanced"
        oldest = min(members.values(), key=lambda m: (m.joined_ms, m.member_id))
        return oldest.strategy

    async def rebalance(self, group: str, *, force: bool = False) -> GroupState:
        """Publish a new generation if membership, subscriptions or metadata changed."""
        lock = self._locks.setdefault(group, asyncio.Lock())
        async with lock:
            for _ in range(_PUBLISH_ATTEMPTS):
                members = await self._store.members(group)
                state = await self._store.state(group)
                all_topics = await self._log.list_topics()
                subs = {m: sorted(await self._topics_of(member, all_topics)) for m, member in members.items()}
                counts = await self._partition_counts({t for ts in subs.values() for t in ts})
                subs = {m: [t for t in ts if t in counts] for m, ts in subs.items()}
                assignment = assign(self.strategy_of(members), subs, counts, state.assignment)
                unchanged = (
                    assignment == state.assignment
                    and counts == state.topics
                    and set(members) == set(state.assignment)
                )
                if unchanged and not force:
                    return state
                generation = state.generation + 1
                since: dict[TopicPartition, int] = {}
                for member, tps in assignment.items():
                    before = state.assignment.get(member, [])
                    for tp in tps:
                        since[tp] = state.owned_since.get(tp, generation) if tp in before else generation
                new = GroupState(generation, assignment, since, counts, state.version)
                if await self._store.publish(group, new, expected_version=state.version):
                    log.info("group %r: generation %d, %d member(s)", group, generation, len(members))
                    self._announce(group)
                    return await self._store.state(group)
                # Another replica published first: back off a little, at random, and recompute.
                await asyncio.sleep(random.uniform(0.005, 0.05))
            raise BackendUnavailable(f"Group {group!r} is rebalancing on another replica; retry shortly.")

    async def refresh(self) -> None:
        """Rebalance every group whose members changed behind its back (a replica died with its
        members) or whose subscribed topics gained partitions or new matches.

        Each group is looked at only when something a group's assignment rests on may have
        changed since the last look: the coordinator's membership (``membership_version``; always,
        where it cannot tell), the topics there are, or the partition counts of the topics a
        group wanted then; and every ``FULL_REFRESH_S`` whatever (what a pattern may match
        also hangs on the ACLs). So idle groups cost a refresh one listing of the topics, not a
        look at each of them. Only the groups the gateway coordinates are looked at
        (``coordinated_groups``): the consumer groups of native clients on a Kafka log, which the
        group listing includes, cost nothing however many there are."""
        if not self._store.is_leader():
            return
        version = self._store.membership_version()
        all_topics = await self._log.list_topics()
        known: dict[str, int | None] = {}  # partition counts, asked once a topic per refresh
        world = (
            version,
            tuple(sorted(all_topics)),
            tuple(sorted((await self._partition_counts(self._wanted, known)).items())),
        )
        now = time.monotonic()
        if version is not None and world == self._world and now - self._walked < FULL_REFRESH_S:
            return
        wanted_now: set[str] = set()
        for group in await self._store.coordinated_groups():
            members = await self._store.members(group)
            state = await self._store.state(group)
            if set(members) != set(state.assignment):  # a member vanished with its replica
                await self.rebalance(group)
                continue
            if not members:
                continue
            wanted: set[str] = set()
            for member in members.values():
                wanted |= await self._topics_of(member, all_topics)
            wanted_now |= wanted
            if await self._partition_counts(wanted, known) != state.topics:
                await self.rebalance(group)
        # What this walk saw: a change after ``world`` was taken is seen by the next refresh.
        self._wanted, self._world, self._walked = wanted_now, world, now

    async def describe(self, group: str) -> GroupDescription:
        members = await self._store.members(group)
        if not members and group not in await self._store.groups():
            raise GroupNotFound(f"Consumer group {group!r} not found.")
        state = await self._store.state(group)
        return GroupDescription(group, state, members, self.strategy_of(members))

    async def lag(self, group: str) -> list[PartitionLag]:
        desc = await self.describe(group)
        committed = await self._store.committed(group)
        tps = set(committed)
        for assigned in desc.state.assignment.values():
            tps.update(assigned)
        out: list[PartitionLag] = []
        for tp in sorted(tps):
            try:
                _, end = await self._log.offsets(tp)
            except NotFound:  # topic deleted since the commit
                continue
            out.append(PartitionLag(tp, committed.get(tp), end, desc.state.owner_of(tp)))
        return out
