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
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from service.core.acl import AclBinding, AclFilter
from service.core.fencing import fence
from service.core.models import GroupState, Member, TopicPartition
from service.core.ports import Coordinator, GroupOffsets
from service.core.rules import check_group, check_offsets

from .lifecycle import Lifecycle

__all__ = ["SplitOffsetsCoordinator"]


class SplitOffsetsCoordinator(Lifecycle):
    """``coordinator`` for groups, shares, ACLs and locks; ``offsets`` for committed offsets.

    Starts ``coordinator`` then ``offsets``, and stops them in reverse.
    """

    def __init__(self, coordinator: Coordinator, offsets: GroupOffsets) -> None:
        super().__init__()  # the start/stop state
        self._coordinator = coordinator
        self._offsets = offsets

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
        return await self._offsets.committed(group, partitions)

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
    ) -> dict[TopicPartition, tuple[dict[str, Any], int]]:
        return await self._coordinator.share_states(group, tps)

    async def store_share_states(
        self, group: str, updates: Mapping[TopicPartition, tuple[dict[str, Any], int]]
    ) -> bool:
        return await self._coordinator.store_share_states(group, updates)

    async def share_versions(self, group: str, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._coordinator.share_versions(group, tps)

    async def change_share_states(
        self, group: str, changes: Mapping[TopicPartition, tuple[dict[str, Any], int]]
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

    @asynccontextmanager
    async def lock(self, name: str, *, timeout_s: float = 10.0) -> AsyncIterator[None]:
        async with self._coordinator.lock(name, timeout_s=timeout_s):
            yield
