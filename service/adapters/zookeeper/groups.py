"""Group membership and generations in ZooKeeper.

Members are persistent znodes (``/brokergate/groups/{group}/members/{id}``):
a consumer instance belongs to its group until the core removes it (on delete,
unsubscribe or expiry), whichever replica it was created through, and
survives that replica's death.

The group's current generation is one znode (``…/{group}/state``) and its
``stat.version`` is the compare-and-set token: ``publish`` is a versioned
``setData``, so of two replicas rebalancing at once only one wins and the other
recomputes from what won. A group that never had a generation has no state
znode; ``state`` reports it as ``ABSENT_VERSION`` and publishing with that
creates it (failing if someone else created it first).

No cache: every replica reads the generation ZooKeeper holds now, so all of
them agree on who owns what.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from service.core.models import GroupState, Member
from service.core.rules import check_group, valid_group
from service.errors import BackendError, InvalidPayload

from .codec import decode_member, decode_state, encode_member, encode_state
from .paths import ZnodePaths, decode_name
from .session import ZooKeeperSession

ABSENT_VERSION: Final = -1
# ZooKeeper drops the connection of a client sending more than jute.maxbuffer (1 MiB by default).
MAX_ZNODE_BYTES: Final = 1000 * 1024


class GroupStore:
    """Members and the published generation of every group.

    Collaborators: ``ZooKeeperSession`` for requests, ``ZnodePaths`` for where
    things are, ``codec`` for what they look like.
    """

    def __init__(self, zk: ZooKeeperSession, paths: ZnodePaths, *, ephemeral_members: bool = False) -> None:
        self._zk = zk
        self._paths = paths
        # With in-process sessions a member lives exactly as long as the replica holding its
        # session: an ephemeral znode vanishes with that replica, and the group rebalances.
        self._ephemeral = ephemeral_members

    # --- members ---------------------------------------------------------------------

    async def join(self, group: str, member: Member) -> None:
        """Add or replace ``member``."""
        check_group(group)
        if not member.member_id:
            raise InvalidPayload("A group member needs an id.")
        path = self._paths.member(group, member.member_id)
        data = encode_member(member)
        if len(data) > MAX_ZNODE_BYTES:
            raise InvalidPayload(f"The subscription of {member.member_id!r} is too large to store.")
        while True:
            try:
                await self._zk.call(
                    lambda c: c.set_async(path, data), what="update a group member", expect=(NoNodeError,)
                )
                return
            except NoNodeError:
                pass
            try:
                await self._zk.call(
                    lambda c: c.create_async(path, data, makepath=True, ephemeral=self._ephemeral),
                    what="add a group member",
                    expect=(NodeExistsError,),
                )
                return
            except NodeExistsError:  # joined concurrently through another replica: replace it
                continue

    async def leave(self, group: str, member_id: str) -> bool:
        if not valid_group(group) or not member_id:
            return False
        try:
            await self._zk.call(
                lambda c: c.delete_async(self._paths.member(group, member_id)),
                what="remove a group member",
                expect=(NoNodeError,),
            )
        except NoNodeError:
            return False
        return True

    async def members(self, group: str) -> dict[str, Member]:
        if not valid_group(group):
            return {}
        parent = self._paths.members(group)
        try:
            children = await self._zk.call(
                lambda c: c.get_children_async(parent), what="list group members", expect=(NoNodeError,)
            )
        except NoNodeError:
            return {}
        found = await asyncio.gather(*(self._member(f"{parent}/{child}") for child in children))
        return {m.member_id: m for m in found if m is not None}

    async def _member(self, path: str) -> Member | None:
        try:
            data, _ = await self._zk.call(
                lambda c: c.get_async(path), what="read a group member", expect=(NoNodeError,)
            )
        except NoNodeError:  # left while we listed
            return None
        return decode_member(data, f"member {path}")

    async def coordinated(self) -> set[str]:
        """Groups that have (or had) members or a generation: those with a znode here."""
        groups = await self._zk.call(lambda c: c.get_children_async(self._paths.groups), what="list groups")
        return {decode_name(g) for g in groups}

    async def with_members(self) -> set[str]:
        """Groups that have at least one member."""
        groups = await self._zk.call(lambda c: c.get_children_async(self._paths.groups), what="list groups")

        async def has_members(znode: str) -> bool:
            path = self._paths.members_of_znode(znode)
            stat = await self._zk.call(lambda c: c.exists_async(path), what="count group members")
            return stat is not None and stat.numChildren > 0

        flags = await asyncio.gather(*(has_members(g) for g in groups))
        return {decode_name(g) for g, flag in zip(groups, flags, strict=True) if flag}

    # --- generations -----------------------------------------------------------------

    async def state(self, group: str) -> GroupState:
        """The published generation; generation 0 at ``ABSENT_VERSION`` if there is none."""
        if not valid_group(group):
            return GroupState(version=ABSENT_VERSION)
        path = self._paths.state(group)
        try:
            data, stat = await self._zk.call(
                lambda c: c.get_async(path), what="read the group generation", expect=(NoNodeError,)
            )
        except NoNodeError:
            return GroupState(version=ABSENT_VERSION)
        return decode_state(data, stat.version, f"generation of group {group!r}")

    def watch_state(self, group: str, on_change: Callable[[], None]) -> None:
        """``on_change()`` once, in the loop, when the group's state znode changes (through any
        replica), is created or deleted; see ``ZooKeeperSession.watch``."""
        if valid_group(group):
            self._zk.watch(self._paths.state(group), on_change)

    async def publish(self, group: str, state: GroupState, *, expected_version: int) -> bool:
        """Store ``state`` if the state znode is still at ``expected_version``; on success the new
        version is also set on ``state``."""
        check_group(group)
        path = self._paths.state(group)
        data = encode_state(state)
        if len(data) > MAX_ZNODE_BYTES:
            raise BackendError(f"The generation of group {group!r} is too large to store in ZooKeeper.")
        if expected_version == ABSENT_VERSION:
            try:
                await self._zk.call(
                    lambda c: c.create_async(path, data, makepath=True, ephemeral=self._ephemeral),
                    what="publish a group generation",
                    expect=(NodeExistsError,),
                )
            except NodeExistsError:
                return False
            state.version = 0  # a new znode's version
            return True
        if expected_version < 0:
            return False
        try:
            stat = await self._zk.call(
                lambda c: c.set_async(path, data, version=expected_version),
                what="publish a group generation",
                expect=(BadVersionError, NoNodeError),
            )
        except (BadVersionError, NoNodeError):
            return False
        state.version = stat.version
        return True
