"""Consumer instances as the ports hold them: load, change and save an instance, see what it owns.

An instance's state lives in the Sessions port and its group membership in
``ConsumerGroups``, so any replica can serve any request of any instance. Every
mutation is load → change → compare-and-set save, retried on conflict: two
concurrent polls of one instance can never return the same records twice or
skip any. Positions are trusted only for partitions the instance has owned
continuously since the generation they were read in.

An instance belongs to the principal that created it: a request of anyone else (but a super
user) is answered as if the instance did not exist. Methods take the request's ``Decision``
as ``who``, or ``acl.GATEWAY`` for the gateway itself, which may reach every instance.

Collaborators: the ``Sessions`` and ``ConsumerGroups`` ports, the ``GroupManager`` (a group an
instance leaves is rebalanced) and ``fencing`` (which commits an instance may make).
``service.ConsumerService`` and ``polls.Poller`` work through it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from service.errors import ConsumerInstanceNotFound

from ..acl import Decision
from ..fencing import fence_assigned
from ..groups import GroupManager
from ..models import InstanceState, TopicPartition
from ..ports import ConsumerGroups, Sessions
from .leases import WaitingLeases


class Instances:
    """Loads, changes and saves consumer instances, and says what each owns now.

    Collaborators: the ``Sessions`` port (an instance's state), ``ConsumerGroups`` (its group's
    assignment, generation and committed offsets) and the ``GroupManager``.
    """

    def __init__(
        self, store: ConsumerGroups, sessions: Sessions, groups: GroupManager, clock: Callable[[], float]
    ) -> None:
        self._store = store
        self._sessions = sessions
        self._groups = groups
        self._clock = clock
        # the leases of the instances whose polls wait on this replica, renewed together
        self.waiting = WaitingLeases(sessions, self.now_ms)

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def remove(self, group: str, name: str) -> None:
        """Delete the instance and take it out of its group, which is rebalanced if it was a member."""
        await self._sessions.delete(group, name)
        if await self._store.leave(group, name):
            await self._groups.rebalance(group)

    async def load(self, group: str, name: str, who: Decision | None) -> InstanceState:
        """The instance, if it is a consumer instance ``who`` may reach and its lease has not run out
        (one whose lease ran out is removed); ``ConsumerInstanceNotFound`` otherwise."""
        state = await self._sessions.load(group, name)
        if state.config.kind != "consumer" or (who is not None and not who.owns(state.owner)):
            # not a 403: whose instances exist is nobody else's business; a share consumer is not here
            raise ConsumerInstanceNotFound(group, name)
        if state.expires_ms < self.now_ms():
            await self.remove(group, name)
            raise ConsumerInstanceNotFound(group, name)
        return state

    def changed(self, state: InstanceState) -> asyncio.Future[None] | None:
        """What resolves when the partitions ``state`` owns may have changed: its group's next
        generation published through this replica (``GroupManager.changed``); None for an instance
        assigned its partitions by hand, whose partitions only its own requests change."""
        return self._groups.changed(state.group) if state.subscription is not None else None

    async def touch(self, state: InstanceState) -> None:
        """Renew the instance's lease, changing nothing else."""
        await self._sessions.touch(state.group, state.name, self.now_ms())

    async def mutate(
        self,
        group: str,
        name: str,
        change: Callable[[InstanceState, list[TopicPartition]], Awaitable[None]],
        who: Decision | None,
    ) -> InstanceState:
        """Load, apply ``change`` (given the owned partitions), save; retry if another request won."""
        while True:
            state = await self.load(group, name, who)
            owned, _ = await self.view(state)
            await change(state, owned)
            state.last_seen_ms = self.now_ms()
            if await self._sessions.save(state):
                return state

    async def view(self, state: InstanceState) -> tuple[list[TopicPartition], int | None]:
        """The partitions ``state`` owns now, and the group generation that says so.

        Drops positions of partitions the instance lost, or lost and regained,
        since the generation they were read in: another member may have moved on.
        """
        if state.manual is not None:
            return list(state.manual), None
        if state.subscription is None:
            state.positions = {}
            return [], None
        group_state = await self._store.state(state.group)
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

    async def store(
        self, state: InstanceState, offsets: Mapping[TopicPartition, int], generation: int | None
    ) -> None:
        """Commit ``offsets`` for ``state``, all or none, only if it may (see ``fencing``).

        A member's commit is fenced by the coordinator, atomically with the write, against the
        generation ``state`` was viewed in; any other instance's by its manual assignment here.
        """
        if state.subscription is not None:
            await self._store.commit(state.group, offsets, member_id=state.name, generation=generation)
            return
        fence_assigned(state.group, state.name, state.manual, offsets)
        await self._store.commit(state.group, offsets)
