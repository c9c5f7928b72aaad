"""One consumer instance's stream: a loop of its polls, and what its client must be told of each.

Collaborators: ``ConsumerService`` (``resume`` to open at a cursor, ``take`` for each bounded
poll), ``stream.Stream`` (its context, wake-up and end) and the ``events`` it tells.
"""

from __future__ import annotations

from collections.abc import Mapping

from service.errors import ConsumerInstanceNotFound, GatewayError, Throttled

from ..acl import Operation, ResourceType
from ..consumers import ConsumerService
from ..models import EmbeddedFormat, TopicPartition
from .events import DELETED, ERROR, End, Event, Opened, Rebalance, Records
from .stream import STEP_WAIT_MS, Stream, StreamContext


class InstanceStream(Stream):
    """One consumer instance's stream, a loop of its polls. Collaborator: ``ConsumerService``.

    ``partitions`` and ``positions`` are what the client was last told: the instance's partitions
    and, for each, the next offset it has not been sent (its cursor).
    """

    def __init__(self, consumers: ConsumerService, group: str, name: str, context: StreamContext) -> None:
        super().__init__(context)
        self.group = group
        self.name = name
        self.format: EmbeddedFormat = "binary"
        self.partitions: tuple[TopicPartition, ...] | None = None
        self.positions: dict[TopicPartition, int] = {}
        self._consumers = consumers
        self._lease_ms = 1000

    async def open(self, cursor: Mapping[TopicPartition, int]) -> list[Event]:
        """Seek the instance to ``cursor`` (the partitions of it the instance owns), learn its
        ``format`` and where it starts (``Opened``, the first events to tell). What a poll would
        be refused for is raised here, before anything is sent: the instance is not there or not
        the caller's (40403), the caller may not READ its group or its topics (40301), a backend
        is down."""
        config = await self._consumers.resume(self.group, self.name, cursor, who=await self.decide())
        self.format = config.format
        self._lease_ms = config.instance_timeout_ms
        events = await self.peek(retry=False)  # refused at once: the client has not been answered yet
        for event in events:
            if isinstance(event, End):
                raise event.error or ConsumerInstanceNotFound(self.group, self.name)
        return events

    async def step(
        self,
        *,
        max_bytes: int,
        max_records: int | None = None,
        byte_limit: int | None = None,
        wait_ms: int = STEP_WAIT_MS,
        retry: bool = True,
    ) -> list[Event]:
        """One poll and what the client must be told of it, in order; nothing after an idle wait,
        or after a poll that failed with a 503 while ``retry`` (``Stream._ride_out``).

        ``max_records`` and ``byte_limit`` bound the batch (``ConsumerService.take``); a record
        alone over ``byte_limit`` is answered as ``Blocked``. The caller must be let READ the
        group, as the poll's route asks of every poll, and its topics (the core's check).
        """
        try:
            who = await self.decide()
            who.check(ResourceType.GROUP, (self.group,), Operation.READ)
            batch = await self._consumers.take(
                self.group,
                self.name,
                timeout_ms=self._within_lifetime(wait_ms),  # the poll renews the lease as it waits
                max_bytes=max_bytes,
                max_records=max_records,
                byte_limit=byte_limit,
                wake=self.wake,
                client=self._ctx.client,
                who=who,
            )
        except Throttled as exc:
            return await self.pause(self._throttled_for(exc))
        except ConsumerInstanceNotFound:
            return [End(DELETED)]
        except GatewayError as exc:
            return await self._ride_out(exc) if retry else [End(ERROR, exc)]
        self._polled()
        self._lease_ms = batch.lease_ms
        events: list[Event] = []
        if batch.partitions != self.partitions:
            starts = dict(batch.before)
            events.append(Opened(starts) if self.partitions is None else Rebalance(batch.partitions, starts))
            self.partitions = batch.partitions
            self.positions = starts
        if batch.polled:
            self.positions = dict(batch.after)
            events.append(Records(batch.format, batch.polled, self.positions, batch.weight))
        elif max_records == 0:  # a peek: where the instance stands now (after a seek, say)
            self.positions = dict(batch.after)
        elif batch.blocked is not None:
            events.append(batch.blocked)
        return events

    async def recheck(self) -> None:
        """Raise if the stream may no longer read: ``Forbidden`` once its caller may not READ its group,
        or a topic of the partitions it was last told of; ``CredentialLapsed`` once its credential no
        longer holds."""
        who = await self.decide()
        who.check(ResourceType.GROUP, (self.group,), Operation.READ)
        who.check(ResourceType.TOPIC, {tp.topic for tp in self.partitions or ()}, Operation.READ)

    async def peek(self, *, retry: bool = True) -> list[Event]:
        """Where the instance stands, taking nothing: ``positions`` are its positions now, and a
        ``Rebalance`` (``Opened`` at first) is returned if its partitions changed; its lease is
        renewed, as by a poll."""
        return await self.step(max_bytes=1, max_records=0, wait_ms=0, retry=retry)

    async def pause(self, seconds: float) -> list[Event]:
        """Wait up to ``seconds`` without reading (for a quota, or for the client's credit), less if
        woken, the gateway drains or the stream's lifetime ends. Meanwhile the instance is looked
        at (``peek``) when its group's next generation is published through this replica, and a
        third of its lease after the last look: its lease renewed as a poll would, and what
        changed returned at once (a rebalance, its end)."""
        deadline = self._until(seconds)
        draining = self._ctx.draining
        while not (self.wake.is_set() or draining.is_set()):
            left = deadline - self._ctx.clock()
            if left <= 0:
                break
            changes = self._consumers.changed(self.group)
            await self._woken_or(changes, timeout=min(left, self._lease_ms / 3000))
            if self.wake.is_set() or draining.is_set():
                break
            events = await self.peek()
            if events:
                return events
        return []
