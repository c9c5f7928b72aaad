"""Share consumers: the HTTP clients of a share group, kept as consumer instances are.

A share consumer is a consumer instance of kind ``share`` (``InstanceConfig.kind``): it lives in
the ``Sessions`` store like any instance, so it is reachable through any replica when sessions
are in Redis, it expires when nobody polls it for its instance timeout, and it belongs to the
principal that created it. It does not join the group's assignment: every poll acquires
records of every partition of its subscribed topics through ``ShareGroups``, whoever else
reads them, and holds them under an acquisition lock until it settles them.

Kafka gives a group id to a consumer group or a share group, never both: creating a share
consumer in a group that has consumer instances, members or committed offsets is refused (409),
and so is creating a consumer instance in a share group (``ConsumerService`` asks ``in_use``).

Collaborators: ``Sessions`` (the instances), ``ShareGroups`` (the delivery states), the ``Log``
(which partitions a topic has), the consume ``Quotas``, the bound on open long-polls.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from service.errors import (
    ConsumerFormatMismatch,
    ConsumerInstanceNotFound,
    GatewayError,
    IllegalState,
    InvalidConsumerConfig,
    NotFound,
    PartitionNotFound,
    TopicNotFound,
)

from ..acl import Decision, Operation, ResourceType
from ..fair import InstanceLimits, holder_of
from ..models import EmbeddedFormat, InstanceConfig, InstanceState, Polled, Subscription, TopicPartition
from ..ports import ConsumerGroups, Log, Sessions
from ..quotas import Quotas
from ..rules import check_group, check_instance, check_not_push_group, check_topic
from ..schemas.serde import SCHEMA_TYPES, Serde, no_registry
from ..waits import OpenWaits
from .delivered import by_partition_run
from .delivery import NOT_HELD, AckType
from .service import Acknowledgement, PartitionReport, ShareGroups, StartAt


@dataclass(frozen=True, slots=True)
class Refusal:
    """An acknowledgement not applied: the record is not the consumer's to settle (any more)."""

    tp: TopicPartition
    offset: int
    reason: str = NOT_HELD


class ShareConsumers:
    """Share-consumer instances and what they do (see the module docstring)."""

    def __init__(
        self,
        log: Log,
        groups: ConsumerGroups,
        sessions: Sessions,
        shares: ShareGroups,
        quotas: Quotas | None = None,
        *,
        limits: InstanceLimits | None = None,
        waits: OpenWaits | None = None,
        serde: Serde | None = None,
        max_partitions: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._log = log
        self._max_partitions = max_partitions  # the most a group's subscription may cover
        self._groups = groups
        self._sessions = sessions
        self.shares = shares
        self._quotas = quotas or Quotas.off()
        self._limits = limits or InstanceLimits()
        self._waits = waits or OpenWaits()
        self._serde = serde
        self._clock = clock

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    # --- lifecycle -------------------------------------------------------------------------

    async def create(
        self, group: str, name: str | None, config: InstanceConfig, *, owner: str
    ) -> InstanceState:
        check_not_push_group(check_group(group))
        name = check_instance(name) if name else f"share-consumer-{uuid.uuid4()}"
        if config.format in SCHEMA_TYPES and self._serde is None:
            raise InvalidConsumerConfig(no_registry(config.format))
        if config.auto_offset_reset not in ("earliest", "latest"):
            raise InvalidConsumerConfig("A share group starts at the 'earliest' or 'latest' offsets.")
        instances = await self._sessions.instances(group)
        if any(i.config.kind != "share" for i in instances) or group in await self._groups.groups():
            raise IllegalState(
                f"Group {group!r} is a consumer group (it has instances, members or committed offsets); "
                "a group is a consumer group or a share group, not both."
            )
        await self._limits.admit(self._sessions, group, owner, in_group=len(instances), what="Share group")
        config.kind = "share"
        now = self.now_ms()
        state = InstanceState(
            group=group, name=name, config=config, created_ms=now, last_seen_ms=now, owner=owner
        )
        await self._sessions.create(state)
        return state

    async def in_use(self, group: str) -> bool:
        """Whether ``group`` is a share group: it has share consumers or delivery states."""
        if any(i.config.kind == "share" for i in await self._sessions.instances(group)):
            return True
        return bool(await self.shares.stored_partitions(group))

    async def delete(self, group: str, name: str, *, who: Decision | None) -> None:
        """Delete the consumer; what it held is available to the others at once."""
        state = await self._load(group, name, who)
        await self._sessions.delete(group, name)
        await self.left(state)

    async def left(self, state: InstanceState) -> None:
        """Release what ``state``'s consumer held, now that it is gone (deleted, or expired)."""
        await self.shares.leave(state.group, state.name)

    async def check_owner(self, group: str, name: str, *, who: Decision | None) -> None:
        """Check that the share consumer exists and is the caller's, else ``ConsumerInstanceNotFound``.

        This is decided before anything a request's body names, so another principal's share
        consumer gets a missing one's answer."""
        await self._load(group, name, who)

    async def _load(self, group: str, name: str, who: Decision | None) -> InstanceState:
        state = await self._sessions.load(group, name)
        if state.config.kind != "share" or (who is not None and not who.owns(state.owner)):
            raise ConsumerInstanceNotFound(group, name)
        if state.expires_ms < self.now_ms():
            await self._sessions.delete(group, name)
            await self.left(state)
            raise ConsumerInstanceNotFound(group, name)
        return state

    # --- subscription ----------------------------------------------------------------------

    async def subscribe(self, group: str, name: str, topics: Sequence[str], *, who: Decision | None) -> None:
        for topic in topics:
            check_topic(topic)
        await self._change(group, name, Subscription(tuple(dict.fromkeys(topics)), None), who)

    async def unsubscribe(self, group: str, name: str, *, who: Decision | None) -> None:
        """No topics any more; what it held is released."""
        state = await self._change(group, name, None, who)
        await self.left(state)

    async def subscription(self, group: str, name: str, *, who: Decision | None) -> tuple[str, ...]:
        state = await self._load(group, name, who)
        await self._sessions.touch(group, name, self.now_ms())
        return () if state.subscription is None else state.subscription.topics

    async def _change(
        self, group: str, name: str, subscription: Subscription | None, who: Decision | None
    ) -> InstanceState:
        while True:
            state = await self._load(group, name, who)
            state.subscription = subscription
            state.last_seen_ms = self.now_ms()
            if await self._sessions.save(state):
                return state

    async def _partitions(self, state: InstanceState) -> list[TopicPartition]:
        """Every partition of the existing subscribed topics."""
        tps: list[TopicPartition] = []
        for topic in () if state.subscription is None else state.subscription.topics:
            try:
                info = await self._log.describe_topic(topic)
            except TopicNotFound:
                continue  # as Kafka's: a topic that does not exist (yet) gives nothing
            tps += (TopicPartition(topic, p.partition) for p in info.partitions)
            if len(tps) > self._max_partitions:  # every poll reads each one's state
                raise IllegalState(
                    f"The subscribed topics have more than {self._max_partitions} partitions, the most "
                    "one share group reads; subscribe to fewer."
                )
        return tps

    # --- records ---------------------------------------------------------------------------

    async def poll(
        self,
        group: str,
        name: str,
        *,
        timeout_ms: int | None,
        max_bytes: int,
        max_records: int,
        acks: Sequence[Acknowledgement] = (),
        accept: set[EmbeddedFormat] | None = None,
        client: str = "",
        who: Decision | None,
    ) -> tuple[InstanceState, Polled, list[Refusal]]:
        """Settle ``acks`` (piggy-backed), then acquire up to ``max_records`` records: at once if
        some are available, else when some are (new ones, released ones, expired locks) or after
        the timeout (none then). READ on the subscribed topics is checked first, as a poll's is."""
        with self._waits.enter(holder_of(who.caller) if who is not None else ""):
            state = await self._load(group, name, who)
            if accept is not None and state.config.format not in accept:
                raise ConsumerFormatMismatch()
            if acks and who is not None:
                who.check(ResourceType.TOPIC, {a.tp.topic for a in acks}, Operation.READ)
            try:
                tps = await self._partitions(state)
                topics = {tp.topic for tp in tps}
                if who is not None:
                    who.check(ResourceType.TOPIC, topics, Operation.READ)
                if self._quotas.consume:
                    await self._quotas.admit_consume(client, topics)
            except GatewayError:
                if acks:  # refused before acquiring: the acknowledgements are settled all the same
                    await self._settle(state, acks, who)
                raise
            config = state.config
            wait_ms = config.request_timeout_ms if timeout_ms is None or timeout_ms < 0 else timeout_ms
            await self._sessions.touch(group, name, self.now_ms())
            # The piggy-backed acknowledgements and the acquisition in one store (one durable write).
            delivered, _, refusals = await self.shares.poll(
                group,
                name,
                tps,
                max_records=max_records,
                max_bytes=max_bytes,
                wait_ms=min(wait_ms, config.instance_timeout_ms // 2),
                start_at="earliest" if config.auto_offset_reset == "earliest" else "latest",
                acks=acks,
            )
            refused = _refusals(refusals)
            await self._sessions.touch(group, name, self.now_ms())
            polled = by_partition_run(delivered)
            if polled and config.format in SCHEMA_TYPES:
                polled = await self._decode(group, name, config.format, polled)
            if self._quotas.consume:
                await self._quotas.consumed(client, polled)
            return state, polled, refused

    async def acknowledge(
        self, group: str, name: str, acks: Sequence[Acknowledgement], *, who: Decision | None
    ) -> list[Refusal]:
        """Accept, release, reject or renew records the consumer holds; those it does not hold
        (any more) are refused, each on its own, and the rest applied."""
        state = await self._load(group, name, who)
        refused = await self._settle(state, acks, who)
        await self._sessions.touch(group, name, self.now_ms())
        return refused

    async def _settle(
        self, state: InstanceState, acks: Sequence[Acknowledgement], who: Decision | None
    ) -> list[Refusal]:
        """``acks`` applied for the consumer of ``state``; the refused offsets, in order."""
        if who is not None:
            who.check(ResourceType.TOPIC, {a.tp.topic for a in acks}, Operation.READ)
        refusals, _ = await self.shares.acknowledge(state.group, state.name, acks)
        return _refusals(refusals)

    async def _decode(self, group: str, name: str, fmt: EmbeddedFormat, polled: Polled) -> Polled:
        """``polled`` with keys and values decoded by their schemas; a record that does not
        decode is released at once with why (so it goes to the group's other consumers, and is
        archived, with its dead-letter copy, at the delivery limit) rather than handed out."""
        serde = self._serde
        assert serde is not None  # refused at creation otherwise
        schema_type = SCHEMA_TYPES[fmt]
        good: Polled = []
        bad: list[Acknowledgement] = []
        for tp, records in polled:
            while records:
                decoded = await serde.decode_fetched(schema_type, tp, records)
                if decoded.records:
                    good.append((tp, decoded.records))
                if decoded.error is None:
                    break
                failed = len(decoded.records)
                why = decoded.error.message
                bad.append(Acknowledgement(tp, (records.offsets[failed],), AckType.RELEASE, why))
                records = records[failed + 1 :]
        if bad:
            await self.shares.acknowledge(group, name, bad)
        return good


def _refusals(refusals: Mapping[TopicPartition, Mapping[int, str]]) -> list[Refusal]:
    """The offsets an acknowledgement refused, in order."""
    refused = [Refusal(tp, o, why) for tp, offsets in refusals.items() for o, why in offsets.items()]
    return sorted(refused, key=lambda r: (r.tp, r.offset))


@dataclass(frozen=True, slots=True)
class GroupReport:
    """A share group as describing shows it: its consumers (name, subscribed topics) and partitions."""

    group: str
    consumers: list[tuple[str, tuple[str, ...]]]
    partitions: list[PartitionReport]

    @property
    def lag(self) -> int:
        """The partitions' lags that are not negative (a partition past its log end is behind on
        nothing; its own lag shows it), as a consumer group's ``total_lag`` adds them."""
        return sum(max(p.lag, 0) for p in self.partitions)


class ShareAdmin:
    """Share groups as an administrator sees them (``kafka-share-groups``): list, describe, reset
    where they read, delete. Collaborators: ``Sessions``, ``ShareGroups`` and the ``Log``."""

    def __init__(self, sessions: Sessions, shares: ShareGroups, log: Log) -> None:
        self._sessions = sessions
        self._shares = shares
        self._log = log

    async def groups(self) -> list[str]:
        """Share groups with consumers or delivery states, sorted."""
        live = {i.group for i in await self._sessions.instances() if i.config.kind == "share"}
        return sorted(live | set(await self._shares.stored_groups()))

    async def describe(self, group: str) -> GroupReport:
        """``group`` as describing shows it: its consumers and partitions; ``NotFound`` (40403) if it
        is not a share group."""
        consumers = await self._consumers(group)
        partitions = await self._shares.describe(group)
        if not consumers and not partitions:
            raise NotFound(f"Share group {group!r} not found.")
        return GroupReport(group, consumers, partitions)

    async def reset(
        self, group: str, to: StartAt | Mapping[TopicPartition, int], topics: Sequence[str] | None = None
    ) -> list[TopicPartition]:
        """Start ``group`` over on ``topics`` (default: every topic it has read) at the earliest or
        latest offsets, or at given ones: nothing in flight, everything before done. Only while
        it has no consumers (409), as Kafka's tool; the partitions reset."""
        await self._idle(group, "reset")
        if isinstance(to, Mapping):
            tps = sorted(to)
        else:
            named = (
                sorted({tp.topic for tp in await self._shares.stored_partitions(group)})
                if topics is None
                else list(dict.fromkeys(topics))
            )
            tps = []
            for topic in named:
                info = await self._log.describe_topic(check_topic(topic))  # TopicNotFound: 404
                tps += (TopicPartition(topic, p.partition) for p in info.partitions)
        for tp in tps:
            info = await self._log.describe_topic(check_topic(tp.topic))  # TopicNotFound: 404
            if not 0 <= tp.partition < len(info.partitions):
                raise PartitionNotFound(f"Partition {tp.partition} of topic {tp.topic!r} not found.")
        if tps:
            await self._shares.reset(group, tps, to)
        return tps

    async def delete(self, group: str) -> None:
        """Forget the group's delivery states; only while it has no consumers (409)."""
        await self._idle(group, "delete")
        if not await self._shares.stored_partitions(group):
            raise NotFound(f"Share group {group!r} not found.")
        await self._shares.delete(group)

    async def _consumers(self, group: str) -> list[tuple[str, tuple[str, ...]]]:
        return sorted(
            (i.name, () if i.subscription is None else i.subscription.topics)
            for i in await self._sessions.instances(group)
            if i.config.kind == "share"
        )

    async def _idle(self, group: str, doing: str) -> None:
        check_not_push_group(group)
        if await self._consumers(group):
            raise IllegalState(
                f"Share group {group!r} has consumers; delete them (or let them expire) "
                f"before you {doing} it."
            )
