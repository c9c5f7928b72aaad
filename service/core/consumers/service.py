"""Consumer instances: subscribe or assign, poll, commit, seek (the façade the API calls).

An instance's state lives in the Sessions port and its group membership in ``ConsumerGroups``,
so any replica can serve any request of any instance; every change is load → change →
compare-and-set save, retried on conflict (``instances``). An instance belongs to the
principal that created it: a request of anyone else (but a super user) is answered as if the
instance did not exist. Methods take the request's ``Decision`` as ``who``, or ``acl.GATEWAY``
for what the gateway does itself, which may reach every instance.

Push streams (``streams``) are loops of ``take``: a poll without a place among the open
long-polls (a stream holds one of its own), bounded in records and, exactly, in bytes for a
client's credit, whose wait ends early when the stream is woken; it tells what the instance
owned and where it stood before and after, so a stream can report a rebalance and carry the
positions a client resumes from (``resume``). What a poll does is ``polls``'.

Collaborators: ``instances.Instances`` and ``polls.Poller``, which it builds over the ports,
the ``GroupManager`` (rebalances), ``TopicService`` (partitions that exist), the instance
limits and the open long-polls' bound.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from service.errors import ConsumerInstanceNotFound, IllegalState, InvalidPayload

from ..acl import ANONYMOUS, Decision, Operation, ResourceType
from ..fair import InstanceLimits, holder_of
from ..groups import GroupManager, compile_pattern, resolve
from ..models import (
    EmbeddedFormat,
    InstanceConfig,
    InstanceState,
    Member,
    Subscription,
    TopicPartition,
)
from ..ports import ConsumerGroups, Log, Sessions
from ..quotas import Quotas
from ..rules import check_group, check_instance, check_topic
from ..schemas.serde import Serde
from ..topics import TopicService
from ..waits import OpenWaits
from .instances import Instances
from .polls import Batch, Bound, Polled, Poller

log = logging.getLogger(__name__)


class ShareHooks(Protocol):
    """What consumer instances need of share groups (``shares.consumers.ShareConsumers``): whether a
    group is one, and to release what an expired share consumer held."""

    async def in_use(self, group: str) -> bool: ...

    async def left(self, state: InstanceState) -> None: ...


class ConsumerService:
    """The consumer-instance façade the API calls; collaborators: the three ports and the group manager,
    through ``Instances`` (load, change, save, commit) and the ``Poller`` (polls)."""

    def __init__(
        self,
        log: Log,
        store: ConsumerGroups,
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
        shares: ShareHooks | None = None,
    ) -> None:
        self._log = log
        self._store = store
        self._sessions = sessions
        self._groups = groups
        self._topics = topics
        self._limits = limits or InstanceLimits()
        self._waits = waits or OpenWaits()
        self._shares = shares
        self._instances = Instances(store, sessions, groups, clock)
        # Set when the gateway is shutting down: long-polls answer with what they have, at once.
        draining = draining or asyncio.Event()
        quotas = quotas or Quotas.off()
        self._poller = Poller(log, store, sessions, self._instances, quotas, draining, serde)

    def now_ms(self) -> int:
        return self._instances.now_ms()

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

    async def delete(self, group: str, name: str, *, who: Decision | None) -> None:
        state = await self._instances.load(group, name, who)
        if who is not None and state.owner != who.caller.principal:  # a super user cleaning up
            who.audit(
                "consumer.delete",
                Operation.DELETE,
                ResourceType.GROUP,
                group,
                instance=name,
                owner=state.owner,
            )
        await self._instances.remove(group, name)

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
                await self._instances.remove(group, name)
        return len(expired)

    async def check_owner(self, group: str, name: str, *, who: Decision | None) -> None:
        """Check that the instance exists and is the caller's; raise ``ConsumerInstanceNotFound`` if not.

        A route decides this before anything its body names (a topic the caller may not read, a bad
        pattern), so another principal's instance gets the answer a missing one does, whatever the body."""
        await self._instances.load(group, name, who)

    async def renew(self, group: str, name: str, *, who: Decision | None) -> None:
        """Find the instance as ``check_owner`` does and renew its lease: what a request asking nothing of
        it does (a seek naming no partition, a subscription naming neither topics nor a pattern),
        as Confluent's proxy finds the instance before it reads what the body asks, so a missing
        one, or another principal's, is a 404 whatever the body."""
        await self._instances.touch(await self._instances.load(group, name, who))

    # --- subscription and assignment ---------------------------------------------

    async def subscribe(
        self, group: str, name: str, subscription: Subscription, *, who: Decision | None
    ) -> None:
        if subscription.pattern is not None:
            compile_pattern(subscription.pattern)
        for topic in subscription.topics:
            check_topic(topic)

        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            if state.manual is not None:
                raise _exclusive("assignment")
            old = state.subscription
            if old is not None and (old.pattern is None) != (subscription.pattern is None):
                raise _exclusive("subscription")  # Kafka's consumer: neither replaces the other
            state.subscription = subscription

        state = await self._instances.mutate(group, name, change, who)
        members = await self._store.members(group)
        joined = members[name].joined_ms if name in members else state.created_ms
        member = Member(name, subscription, state.config.strategy, joined, state.owner)
        await self._store.join(group, member)
        await self._groups.rebalance(group)

    async def unsubscribe(self, group: str, name: str, *, who: Decision | None) -> None:
        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            state.subscription = None
            state.manual = None
            state.positions = {}

        await self._instances.mutate(group, name, change, who)
        if await self._store.leave(group, name):
            await self._groups.rebalance(group)

    async def subscription(self, group: str, name: str, *, who: Decision | None) -> Subscription | None:
        state = await self._instances.load(group, name, who)
        await self._instances.touch(state)
        return state.subscription

    async def subscribed_topics(self, group: str, name: str, *, who: Decision | None) -> set[str]:
        """The existing topics the instance's subscription covers now."""
        state = await self._instances.load(group, name, who)
        if state.subscription is None:
            return set()
        return resolve(state.subscription, await self._log.list_topics())

    async def assign(
        self, group: str, name: str, partitions: Sequence[TopicPartition], *, who: Decision | None
    ) -> None:
        for tp in partitions:
            await self._topics.check_partition(tp)
        wanted = sorted(set(partitions))

        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            if state.subscription is not None:
                raise _exclusive("subscription")
            state.manual = wanted
            state.positions = {tp: off for tp, off in state.positions.items() if tp in wanted}

        await self._instances.mutate(group, name, change, who)

    async def assignment(self, group: str, name: str, *, who: Decision | None) -> list[TopicPartition]:
        state = await self._instances.load(group, name, who)
        await self._instances.touch(state)
        owned, _ = await self._instances.view(state)
        return owned

    async def poll(
        self,
        group: str,
        name: str,
        *,
        timeout_ms: int | None,
        max_bytes: int,
        accept: set[EmbeddedFormat] | None,
        client: str = "",
        who: Decision | None,
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
            batch = await self._poller.poll(group, name, timeout_ms, max_bytes, accept, client, who)
        return batch.format, batch.polled

    def changed(self, group: str) -> asyncio.Future[None]:
        """What resolves at ``group``'s next generation published through this replica (shared by
        its waiters: await it through ``asyncio.wait``, never cancel it)."""
        return self._groups.changed(group)

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
        who: Decision | None,
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
            raise ValueError(f"max_records is {max_records}: a poll takes 0 records or more")
        return await self._poller.poll(
            group,
            name,
            timeout_ms,
            max_bytes,
            None,
            client,
            who,
            bound=None if max_records is None and byte_limit is None else Bound(max_records, byte_limit),
            wake=wake,
        )

    async def commit(
        self,
        group: str,
        name: str,
        offsets: Mapping[TopicPartition, int] | None,
        *,
        who: Decision | None,
    ) -> dict[TopicPartition, int]:
        """Commit ``offsets`` (each the last processed offset, so offset+1 is stored) or all consumed.

        Refused with ``IllegalState``, storing nothing, if any partition is not the instance's to
        commit: not owned in the current generation by a member, not in a manual assignment, or
        anything at all for an instance with neither (see ``fencing``).
        """
        state = await self._instances.load(group, name, who)
        await self._instances.touch(state)
        owned, generation = await self._instances.view(state)
        if offsets is None:
            to_commit = {tp: off for tp, off in state.positions.items() if tp in owned}
        else:
            _check_offsets(offsets)
            for tp in offsets:
                await self._topics.check_partition(tp)
            to_commit = {tp: off + 1 for tp, off in offsets.items()}
        if to_commit:
            await self._instances.store(state, to_commit, generation)
        return to_commit

    async def committed(
        self,
        group: str,
        name: str,
        partitions: Sequence[TopicPartition] | None,
        *,
        who: Decision | None,
    ) -> dict[TopicPartition, int | None]:
        state = await self._instances.load(group, name, who)
        await self._instances.touch(state)
        if partitions is None:
            partitions, _ = await self._instances.view(state)
        found = await self._store.committed(group, partitions)
        return {tp: found.get(tp) for tp in partitions}

    async def seek(
        self, group: str, name: str, targets: Mapping[TopicPartition, int], *, who: Decision | None
    ) -> None:
        _check_offsets(targets)

        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            _require_owned(targets, owned)
            state.positions.update(targets)

        await self._instances.mutate(group, name, change, who)

    async def seek_to(
        self,
        group: str,
        name: str,
        partitions: Sequence[TopicPartition],
        *,
        end: bool,
        who: Decision | None,
    ) -> None:
        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            _require_owned(partitions, owned)
            for tp in partitions:
                begin, stop = await self._log.offsets(tp)
                state.positions[tp] = stop if end else begin

        await self._instances.mutate(group, name, change, who)

    async def seek_to_timestamps(
        self, group: str, name: str, targets: Mapping[TopicPartition, int], *, who: Decision | None
    ) -> None:
        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            _require_owned(targets, owned)
            for tp, ts in targets.items():
                found = await self._log.offset_for_timestamp(tp, ts)
                state.positions[tp] = found if found is not None else (await self._log.offsets(tp))[1]

        await self._instances.mutate(group, name, change, who)

    async def resume(
        self,
        group: str,
        name: str,
        positions: Mapping[TopicPartition, int],
        *,
        who: Decision | None,
    ) -> InstanceConfig:
        """Seek the partitions of ``positions`` the instance owns now to them, and return its
        configuration: where a stream picks up from the cursor its client last received. A
        partition it no longer owns is left alone (it is another member's to move now); with
        ``who``, each topic moved must allow ``who`` to READ it, as the stream will."""
        _check_offsets(positions)

        async def change(state: InstanceState, owned: list[TopicPartition]) -> None:
            targets = {tp: off for tp, off in positions.items() if tp in owned}
            if who is not None:
                who.check(ResourceType.TOPIC, {tp.topic for tp in targets}, Operation.READ)
            state.positions.update(targets)

        return (await self._instances.mutate(group, name, change, who)).config


def _require_owned(
    partitions: Mapping[TopicPartition, int] | Sequence[TopicPartition], owned: list[TopicPartition]
) -> None:
    for tp in partitions:
        if tp not in owned:
            raise IllegalState(f"No current assignment for partition {tp}.")


def _check_offsets(offsets: Mapping[TopicPartition, int]) -> None:
    """Raise ``InvalidPayload`` for the first negative offset: no partition has negative offsets."""
    for tp, off in offsets.items():
        if off < 0:
            raise InvalidPayload(f"Offset {off} for partition {tp} is negative.")


def _exclusive(existing: str) -> IllegalState:
    """Kafka's consumer's refusal of a way of choosing partitions while another (``existing``) holds."""
    return IllegalState(
        f"Subscription to topics, partitions and pattern are mutually exclusive; delete the {existing} first."
    )
