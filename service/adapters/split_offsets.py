"""``SplitOffsetsCoordinator``: a ``Coordinator`` whose committed offsets live in ``GroupOffsets``.

When the log is Kafka, a group's committed offsets belong in Kafka's group coordinator, where
Kafka's tools, lag exporters, autoscalers and native consumers read them
(``service.adapters.kafka.group_offsets``). Everything else a ``Coordinator`` keeps stays with
the one the settings chose (embedded, or ZooKeeper for many replicas): membership, generations
and assignments, share-group states, ACLs, locks, leadership. This façade joins the two: it
passes every call to that coordinator except ``commit`` and ``committed``, which it serves from
the offsets store, after the same fence.

The fence and the write cannot be one atomic step here, as they are in one ZooKeeper
transaction or under the embedded coordinator's lock: Kafka knows nothing of the gateway's
generations. A member's commit is checked first (``fencing.fence`` against the group state the
coordinator holds now), then written to Kafka. The window that remains is the time between
reading the state and Kafka storing the offsets (a read of the coordinator, then one
OffsetCommit round trip): a rebalance published in it lets the previous owner's commit land in
the new generation. Its offsets are of records it was given and had processed, so nothing is
skipped that nobody processed; but if the new owner committed within that same window, the
older commit may move the group's offset back, and those records are delivered again (at least
once, never lost).

Offsets committed before the offsets moved to Kafka are in the coordinator's own store (its data
directory, or ZooKeeper's ``/consumers/{group}/offsets``). They are carried over once a group:
the first time this replica reads a group's committed offsets, what that store holds for a
partition Kafka has no offset for is committed to Kafka (so Kafka's tools see it, and the next
read is Kafka's), and ``CARRIED`` is then committed in that store beside them, under the
coordinator's lock, so that no replica carries the group again. Once carried, an offset Kafka no
longer has (deleted with ``kafka-consumer-groups --delete-offsets``, or expired after
``offsets.retention.minutes``) stays deleted, as Kafka means it: the old store is never read for
that group again, and its consumers start from ``auto.offset.reset``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Final

from service.core.acl import AclBinding, AclFilter
from service.core.carried_offsets import CARRIED, as_read, is_carried, to_carry
from service.core.fencing import fence
from service.core.models import GroupState, Member, TopicPartition
from service.core.ports import Coordinator, GroupOffsets
from service.core.push.stored import StoredPush
from service.core.rules import check_group, check_offsets
from service.core.shares.stored import StateChange, StoredState
from service.errors import IllegalState, NotFound

from .lifecycle import Lifecycle

__all__ = ["SplitOffsetsCoordinator"]

_CARRY_LOCK_TIMEOUT_S: Final = 10.0
_CARRIED_GROUPS_BOUND: Final = 100_000  # forgetting costs one read of the old store again


class SplitOffsetsCoordinator(Lifecycle):
    """``coordinator`` for groups, shares, ACLs, locks and push subscriptions; ``offsets`` for offsets.

    Starts ``coordinator`` then ``offsets``, and stops them in reverse.
    """

    def __init__(self, coordinator: Coordinator, offsets: GroupOffsets) -> None:
        super().__init__()  # the start/stop state
        self._coordinator = coordinator
        self._offsets = offsets
        # Groups this replica knows need no carrying: carried by now, or nothing to carry.
        self._carried: set[str] = set()

    async def _open(self) -> None:
        await self._coordinator.start()
        try:
            await self._offsets.start()
        except BaseException:
            await self._coordinator.stop()
            raise

    async def _close(self) -> None:
        try:
            await self._offsets.stop()
        finally:
            await self._coordinator.stop()

    # --- offsets: the store's --------------------------------------------------------

    async def commit(
        self,
        group: str,
        offsets: Mapping[TopicPartition, int],
        *,
        member_id: str | None = None,
        generation: int | None = None,
    ) -> None:
        """Fence (with a ``member_id``) against the coordinator's group state, then store every
        offset or none in the offsets store (see the module for the window between the two)."""
        check_group(group)
        entries = check_offsets(offsets)
        if not entries:
            return
        if member_id is not None:
            fence(group, await self._coordinator.state(group), entries, member_id, generation)
        await self._offsets.commit(group, entries)

    async def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """The store's committed offsets; at this replica's first read of ``group``, those of the
        coordinator's own store carried over for the partitions the store has none for."""
        wanted = None if partitions is None else list(partitions)
        found = await self._offsets.committed(group, wanted)
        if group in self._carried:
            return found
        carried = await self._carry_over(group)
        if wanted is not None:
            carried = {tp: carried[tp] for tp in wanted if tp in carried}
        return as_read(found, carried)

    async def _carry_over(self, group: str) -> dict[TopicPartition, int]:
        """What the coordinator's own store holds for ``group`` and the offsets store does not,
        committed to the offsets store (once, marked ``CARRIED``); {} when that is nothing.

        Under the coordinator's lock, so that two replicas never carry one group at once: one
        carrying after another had carried and a consumer had committed since would move that
        consumer's offset back."""
        older = await self._coordinator.committed(group)
        if not older or is_carried(older):
            self._remember_carried(group)
            return {}
        async with self._coordinator.lock(f"carry-offsets/{group}", timeout_s=_CARRY_LOCK_TIMEOUT_S):
            older = await self._coordinator.committed(group)  # another replica may have carried it
            if is_carried(older):
                self._remember_carried(group)
                return {}
            missing = to_carry(older, await self._offsets.committed(group))
            try:
                carried = await self._commit_by_topic(group, missing)
            except IllegalState:
                # Native consumers are in the group: Kafka coordinates it now and takes no commit
                # from outside. The older offsets still answer; a later read carries them.
                return missing
            await self._coordinator.commit(group, {CARRIED: int(time.time() * 1000)})
        self._remember_carried(group)
        return carried

    async def _commit_by_topic(
        self, group: str, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """Commit ``offsets`` to the offsets store a topic at a time and return those committed:
        a topic (or partition) the log no longer has is left out (its offsets lead nowhere)."""
        by_topic: dict[str, list[tuple[TopicPartition, int]]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp, offset))
        carried: dict[TopicPartition, int] = {}
        for entries in by_topic.values():
            try:
                await self._offsets.commit(group, entries)
            except NotFound:  # Kafka stored the topic's other partitions: read which
                carried.update(await self._offsets.committed(group, [tp for tp, _ in entries]))
                continue
            carried.update(entries)
        return carried

    def _remember_carried(self, group: str) -> None:
        if len(self._carried) >= _CARRIED_GROUPS_BOUND:  # a bound, not an LRU
            self._carried.clear()
        self._carried.add(group)

    async def groups(self) -> list[str]:
        """Groups with members here, or committed offsets in the store, sorted."""
        here, there = await asyncio.gather(self._coordinator.groups(), self._offsets.groups())
        return sorted({*here, *there})

    # --- everything else: the coordinator's --------------------------------------------

    async def coordinated_groups(self) -> list[str]:
        """The coordinator's: none of the groups that only Kafka knows (native consumers')."""
        return await self._coordinator.coordinated_groups()

    def is_leader(self) -> bool:
        return self._coordinator.is_leader()

    async def join(self, group: str, member: Member) -> None:
        await self._coordinator.join(group, member)

    async def leave(self, group: str, member_id: str) -> bool:
        return await self._coordinator.leave(group, member_id)

    async def members(self, group: str) -> dict[str, Member]:
        return await self._coordinator.members(group)

    def membership_version(self) -> int | None:
        return self._coordinator.membership_version()

    async def state(self, group: str) -> GroupState:
        return await self._coordinator.state(group)

    async def publish(self, group: str, state: GroupState, *, expected_version: int) -> bool:
        return await self._coordinator.publish(group, state, expected_version=expected_version)

    def watch_state(self, group: str, on_change: Callable[[], None]) -> None:
        self._coordinator.watch_state(group, on_change)

    async def share_states(
        self, group: str, tps: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[StoredState, int]]:
        return await self._coordinator.share_states(group, tps)

    async def store_share_states(
        self, group: str, updates: Mapping[TopicPartition, tuple[StoredState, int]]
    ) -> bool:
        return await self._coordinator.store_share_states(group, updates)

    async def share_versions(self, group: str, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._coordinator.share_versions(group, tps)

    async def change_share_states(
        self, group: str, changes: Mapping[TopicPartition, tuple[StateChange, int]]
    ) -> dict[TopicPartition, int] | None:
        return await self._coordinator.change_share_states(group, changes)

    async def share_groups(self) -> list[str]:
        return await self._coordinator.share_groups()

    async def delete_share_states(self, group: str, tps: Collection[TopicPartition] | None = None) -> None:
        await self._coordinator.delete_share_states(group, tps)

    async def acls(self) -> Sequence[AclBinding]:
        return await self._coordinator.acls()

    async def add_acls(self, bindings: Sequence[AclBinding]) -> None:
        await self._coordinator.add_acls(bindings)

    async def remove_acls(self, selector: AclFilter) -> list[AclBinding]:
        return await self._coordinator.remove_acls(selector)

    async def push_subscriptions(self) -> dict[str, tuple[StoredPush, int]]:
        return await self._coordinator.push_subscriptions()

    async def push_subscription(self, name: str) -> tuple[StoredPush, int] | None:
        return await self._coordinator.push_subscription(name)

    async def put_push_subscription(
        self, name: str, data: StoredPush, *, expected_version: int | None
    ) -> int | None:
        return await self._coordinator.put_push_subscription(name, data, expected_version=expected_version)

    async def delete_push_subscription(self, name: str, *, expected_version: int) -> bool:
        return await self._coordinator.delete_push_subscription(name, expected_version=expected_version)

    @asynccontextmanager
    async def lock(self, name: str, *, timeout_s: float = 10.0) -> AsyncIterator[None]:
        async with self._coordinator.lock(name, timeout_s=timeout_s):
            yield

    async def contended(self, name: str) -> bool:
        return await self._coordinator.contended(name)
