"""Push subscriptions as their owners manage them: create, list, describe, change, pause, rotate, delete.

Creating a subscription needs what reading its records would: READ on each topic it names
and on its share group (``push.<name>``); a pattern's topics are filtered by READ as they are
delivered (``PushRunner``). A subscription belongs to its creator: another principal finds no
such subscription (404), a super user finds every one. The endpoint must be an allowed
destination (``destinations``), at creation, at every change, and at every delivery. The
number of subscriptions is bounded in all and per owner.

Deleting a subscription deletes its share group's states too: a subscription created again
under the same name starts where its spec says, with new delivery ids.

Collaborators: ``PushStore`` (the subscriptions), ``ShareGroups`` (the states it keeps of
their groups: backlog, in flight, resets), the ``Log`` (where a start time falls), the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from service.errors import IllegalState, NotFound

from ..acl import Decision, Operation, ResourceType
from ..models import TopicPartition
from ..ports import Log
from ..shares.service import PartitionReport, ShareGroups
from .destinations import Destinations
from .ports import PushSender, PushStore
from .spec import Bounds, PushSpec, PushSubscription, check_name, new_secret, new_uid
from .stats import PushStats
from .stored import StoredPush, from_stored, to_stored

_DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class PushLimits:
    """How many subscriptions there may be, in all and per owner; how many requests they may have in
    flight together; what a spec may ask; how long a rotated-out secret is still sent."""

    subscriptions: int = 1000
    per_owner: int = 100
    in_flight: int = 1024  # requests all subscriptions together may ask to have in flight
    bounds: Bounds = field(default_factory=Bounds)
    keep_previous_secret_ms: int = _DAY_MS


@dataclass(frozen=True, slots=True)
class PushStatus:
    """A subscription as describing shows it: its backlog and the deliverer's counts (if it runs here)."""

    backlog: int  # records not yet settled: after the group's start, in flight or not yet read
    held: int  # acquired by a deliverer and not settled
    partitions: tuple[PartitionReport, ...]
    stats: PushStats | None  # None when no deliverer of it runs on this replica


class PushNotFound(NotFound):
    default_message = "Push subscription not found."


class PushService:
    """Push subscriptions over the ``PushStore`` (see the module docstring)."""

    def __init__(
        self,
        store: PushStore,
        shares: ShareGroups,
        log: Log,
        destinations: Destinations,
        sender: PushSender,
        *,
        limits: PushLimits | None = None,
        stats: dict[str, PushStats] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._shares = shares
        self._log = log
        self.destinations = destinations
        self.sender = sender
        self.limits = limits or PushLimits()
        self.stats = stats if stats is not None else {}  # the deliverers' of this replica, by name
        self._clock = clock

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def create(self, name: str, spec: PushSpec, *, who: Decision) -> PushSubscription:
        """A new subscription of ``who``'s, its first secret in it (shown once: at creation)."""
        check_name(name)
        await self._check(spec, name, who)
        stored = await self._store.push_subscriptions()
        if name in stored:
            raise IllegalState(f"Push subscription {name!r} exists.")
        if len(stored) >= self.limits.subscriptions:
            raise IllegalState(
                f"The gateway holds {self.limits.subscriptions} push subscriptions, its limit "
                "(push_max_subscriptions)."
            )
        owner = who.caller.principal
        if sum(1 for data, _ in stored.values() if data["owner"] == owner) >= self.limits.per_owner:
            raise IllegalState(
                f"{owner} holds {self.limits.per_owner} push subscriptions, the limit per principal "
                "(push_max_subscriptions_per_principal)."
            )
        self._check_in_flight(stored, name, spec)
        sub = PushSubscription(name, new_uid(), owner, spec, self.now_ms(), secrets=(new_secret(),))
        await self._shares.delete(sub.group)  # what a deleted namesake left, should its deletion have failed
        await self._start_at_time(sub)
        version = await self._store.put_push_subscription(name, to_stored(sub), expected_version=None)
        if version is None:
            raise IllegalState(f"Push subscription {name!r} exists.")
        return replace(sub, version=version)

    async def list(self, *, who: Decision) -> list[PushSubscription]:
        """The caller's subscriptions (a super user's: every one), by name."""
        stored = await self._store.push_subscriptions()
        subs = [from_stored(data, version) for data, version in stored.values()]
        return sorted((s for s in subs if who.owns(s.owner)), key=lambda s: s.name)

    async def get(self, name: str, *, who: Decision) -> PushSubscription:
        """The subscription ``name`` if it is the caller's; ``PushNotFound`` if not."""
        found = await self._store.push_subscription(check_name(name))
        if found is None:
            raise PushNotFound(f"Push subscription {name!r} not found.")
        sub = from_stored(*found)
        if not who.owns(sub.owner):
            raise PushNotFound(f"Push subscription {name!r} not found.")
        return sub

    async def put(self, name: str, spec: PushSpec, *, who: Decision) -> tuple[PushSubscription, bool]:
        """``create`` the subscription, or ``change`` the caller's of that name; whether it was created.
        Another principal's of that name is refused as one that exists (409), not shown."""
        found = await self._store.push_subscription(check_name(name))
        if found is None:
            return await self.create(name, spec, who=who), True
        sub = from_stored(*found)
        if not who.owns(sub.owner):
            raise IllegalState(f"Push subscription {name!r} exists.")
        return await self.change(name, spec, who=who), False

    async def change(self, name: str, spec: PushSpec, *, who: Decision) -> PushSubscription:
        """The subscription with ``spec`` instead of its own (where it reads from is kept)."""
        sub = await self.get(name, who=who)
        await self._check(spec, name, who)
        self._check_in_flight(await self._store.push_subscriptions(), name, spec)
        return await self._put(replace(sub, spec=spec))

    async def set_paused(self, name: str, paused: bool, *, who: Decision) -> PushSubscription:
        sub = await self.get(name, who=who)
        return sub if sub.paused == paused else await self._put(replace(sub, paused=paused))

    async def rotate_secret(self, name: str, *, who: Decision) -> PushSubscription:
        """A new signing secret; the previous one is still sent beside it for a while (a day)."""
        sub = await self.get(name, who=who)
        return await self._put(sub.rotated(self.now_ms(), self.limits.keep_previous_secret_ms))

    async def delete(self, name: str, *, who: Decision) -> None:
        """Delete the subscription and what its share group kept."""
        sub = await self.get(name, who=who)
        if not await self._store.delete_push_subscription(name, expected_version=sub.version):
            raise IllegalState(f"Push subscription {name!r} changed meanwhile; retry.")
        await self._shares.delete(sub.group)

    async def status(self, sub: PushSubscription) -> PushStatus:
        reports = tuple(await self._shares.describe(sub.group))
        backlog = sum(r.lag for r in reports)
        held = sum(r.acquired for r in reports)
        return PushStatus(backlog, held, reports, self.stats.get(sub.name))

    # --- internals --------------------------------------------------------------------------

    async def _check(self, spec: PushSpec, name: str, who: Decision) -> None:
        spec.check(self.limits.bounds)
        target = self.destinations.check_url(spec.endpoint)
        if spec.topics:
            who.check(ResourceType.TOPIC, spec.topics, Operation.READ)
        who.check(ResourceType.GROUP, [PushSubscription.group_of(name)], Operation.READ)
        if spec.dead_letter_topic is not None:
            who.check(ResourceType.TOPIC, [spec.dead_letter_topic], Operation.WRITE)
        await self.sender.check(target, self.destinations)  # where the name leads now

    def _check_in_flight(self, stored: dict[str, tuple[StoredPush, int]], name: str, spec: PushSpec) -> None:
        """``IllegalState`` if ``spec`` would take the requests in flight of every subscription past
        the limit (what the others ask, and this one instead of what it asked before)."""
        others = sum(data["spec"]["max_in_flight"] for n, (data, _) in stored.items() if n != name)
        if others + spec.max_in_flight > self.limits.in_flight:
            raise IllegalState(
                f"The push subscriptions would have {others + spec.max_in_flight} requests in flight, "
                f"more than the gateway's {self.limits.in_flight} (push_max_in_flight_total)."
            )

    async def _put(self, sub: PushSubscription) -> PushSubscription:
        version = await self._store.put_push_subscription(
            sub.name, to_stored(sub), expected_version=sub.version
        )
        if version is None:
            raise IllegalState(f"Push subscription {sub.name!r} changed meanwhile; retry.")
        return replace(sub, version=version)

    async def _start_at_time(self, sub: PushSubscription) -> None:
        """With a start time, each partition of the named topics starts at its first record then."""
        at = sub.spec.start_timestamp_ms
        if at is None or not sub.spec.topics:
            return
        starts: dict[TopicPartition, int] = {}
        for topic in sub.spec.topics:
            info = await self._log.describe_topic(topic)
            for p in info.partitions:
                tp = TopicPartition(topic, p.partition)
                found = await self._log.offset_for_timestamp(tp, at)
                starts[tp] = found if found is not None else (await self._log.offsets(tp))[1]
        await self._shares.reset(sub.group, list(starts), starts)
