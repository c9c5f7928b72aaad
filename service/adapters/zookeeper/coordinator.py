"""The ZooKeeper ``Coordinator``: consumer groups shared by every gateway replica.

``ZooKeeperCoordinator`` is the façade the core sees. It delegates the port's
operations to one collaborator per concern:

- ``ZooKeeperSession`` (``session.py``): the kazoo client, asyncio bridging,
  outage policy (``BackendUnavailable`` within a bounded time, never a hang);
- ``GroupStore`` (``groups.py``): members and compare-and-set generations;
- ``OffsetStore`` (``offsets.py``): fenced atomic commits, Kafka's layout;
- ``ShareStateStore`` (``shares.py``): share-partition states, compare-and-set
  transactions over several partitions;
- ``claim_format`` (``format_marker.py``): the layout's format, checked before
  anything is served;
- ``NodeRegistry`` (``registry.py``): this replica's ephemeral znode;
- ``LeaderElection`` (``election.py``): which replica runs group-wide duties;
- ``AclStore`` (``acls.py``): ACL bindings in Kafka's layout, and this
  replica's cache of them, kept fresh by its own *refresher* task;
- ``NamedLocks`` (``locks.py``): the port's locks, kazoo's ``Lock`` recipe.

It also owns one background task, the *keeper*, which restores what a session
carries: after an outage long enough for ZooKeeper to expire the session,
kazoo connects with a new session, and the keeper re-creates the replica's
ephemeral znode and its election candidate. The keeper wakes on connection
state changes and election watches (brought into the loop by the session) and
on a timer, so a missed event only delays it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Final

from kazoo.client import KazooState

from service.core.acl import AclBinding, AclFilter
from service.core.models import GroupState, Member, TopicPartition
from service.core.push.stored import StoredPush
from service.core.shares.stored import StateChange, StoredState
from service.errors import BackendUnavailable, GatewayError

from ..lifecycle import Lifecycle
from ..share_states import ShareStoreLimits, change_by_whole_states
from ..tasks import uncancellable
from .acls import AclStore
from .election import LeaderElection
from .format_marker import claim_format
from .groups import GroupStore
from .locks import NamedLocks
from .offsets import OffsetStore
from .paths import ZnodePaths
from .push import PushSubscriptionStore
from .registry import NodeRegistry, default_node_id
from .security import DigestCredentials
from .session import ZooKeeperSession, ZooKeeperURL
from .shares import ShareStateStore

log = logging.getLogger(__name__)

DEFAULT_SESSION_TIMEOUT_MS: Final = 10_000
DEFAULT_CONNECT_TIMEOUT_MS: Final = 10_000
DEFAULT_REQUEST_TIMEOUT_MS: Final = 5_000
# The keeper's timer: how soon a lost event is made up for.
_KEEPER_TICK_S: Final = 1.0


class ZooKeeperCoordinator(Lifecycle):
    """Consumer groups, committed offsets, share states and leadership in ZooKeeper, for any
    number of replicas.

    ``url`` is ``zookeeper://host:port[,host:port...][/chroot]``; a malformed
    one raises ``ValueError`` here, an unreachable one ``BackendUnavailable``
    from ``start()``. With ``credentials`` the session signs in and every znode it
    creates is the gateway's to change (``security``).
    """

    def __init__(
        self,
        url: str,
        *,
        node_id: str | None = None,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        ephemeral_members: bool = False,
        credentials: DigestCredentials | None = None,
        share_limits: ShareStoreLimits | None = None,
    ) -> None:
        parsed = ZooKeeperURL.parse(url)
        super().__init__()  # the start/stop state
        self.node_id = node_id or default_node_id()
        self._zk = ZooKeeperSession(
            parsed,
            session_timeout_ms=session_timeout_ms,
            connect_timeout_ms=connect_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            credentials=credentials,
        )
        self._paths = ZnodePaths(parsed.chroot)
        self._groups = GroupStore(self._zk, self._paths, ephemeral_members=ephemeral_members)
        # Members this replica joined with ephemeral znodes, to join again after a session expiry.
        self._ephemeral_members = ephemeral_members
        self._local_members: dict[tuple[str, str], Member] = {}
        self._offsets = OffsetStore(self._zk, self._paths, self._groups)
        self._shares = ShareStateStore(self._zk, self._paths, share_limits or ShareStoreLimits())
        self._push = PushSubscriptionStore(self._zk, self._paths)
        self._registry = NodeRegistry(self._zk, self._paths, self.node_id)
        self._acls = AclStore(self._zk, self._paths, may_purge=self.is_leader)
        self._election = LeaderElection(self._zk, self._paths, self.node_id, self._wake_keeper)
        self._locks = NamedLocks(self._zk, self._paths, self.node_id)
        self._zk.add_listener(self._on_state)
        self._wake = asyncio.Event()
        self._keeper: asyncio.Task[None] | None = None
        self._registered_session: int | None = None

    # --- lifecycle -------------------------------------------------------------------

    async def _open(self) -> None:
        """Connect, check the layout's format, create its parents, register this replica and
        enter the election."""
        await self._zk.start()
        try:
            await claim_format(self._zk, self._paths.format)
            await self._restore(wait_for_stale_node=True)
            await self._acls.start()
        except BaseException:
            await self._acls.stop()
            await self._zk.stop()
            self._registered_session = None
            raise
        self._keeper = asyncio.create_task(self._keep(), name=f"zookeeper-keeper-{self.node_id}")
        log.info(
            "ZooKeeper coordinator %s on %s%s: %s",
            self.node_id,
            self._zk.url.servers,
            self._zk.url.chroot,
            "leader" if self._election.is_leader and self._zk.connected else "follower",
        )

    async def _close(self) -> None:
        """Stop the keeper and the ACL refresher, and close the session (leadership passes on at once)."""
        self._election.revoke()
        await self._acls.stop()
        await self._locks.close()
        if self._keeper is not None:
            self._keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keeper
            self._keeper = None
        await self._zk.stop()
        self._registered_session = None

    async def _restore(self, *, wait_for_stale_node: bool = False) -> None:
        """Make this session carry the replica's node and candidacy (again, after an expiry)."""
        session = self._zk.session_id
        if session != self._registered_session:
            for base in self._paths.bases():
                await self._zk.ensure_path(base, what="create the layout")
            if wait_for_stale_node:
                # A restart within the session timeout finds its previous incarnation's znode.
                await self._registry.register_waiting(self._zk.session_timeout_ms / 1000 + 1)
            elif not await self._registry.register():
                log.error("node id %r is registered by another live replica; retrying", self.node_id)
                return
            if self._registered_session is not None:
                log.info("replica %s registered again in a new ZooKeeper session", self.node_id)
                for (group, _), member in list(self._local_members.items()):
                    await self._groups.join(group, member)  # their ephemeral znodes died with the session
            self._registered_session = session
        await self._election.campaign()

    def _on_state(self, state: KazooState) -> None:
        if state != KazooState.CONNECTED:
            self._election.revoke()
        self._wake_keeper()

    def _wake_keeper(self) -> None:
        self._wake.set()

    async def _keep(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_KEEPER_TICK_S):
                    await self._wake.wait()
            self._wake.clear()
            if not self._zk.connected:
                self._election.revoke()
                continue
            try:
                await self._restore()
            except GatewayError as exc:
                self._election.revoke()  # unsure whether we still lead: assume not
                log.warning("ZooKeeper coordinator %s: %s", self.node_id, exc.message)
            except Exception:
                self._election.revoke()
                log.exception("ZooKeeper coordinator %s: keeper failed; retrying", self.node_id)

    # --- leadership and replicas -----------------------------------------------------

    def is_leader(self) -> bool:
        """Whether this replica leads: a flag the keeper maintains, and a live connection."""
        return self._state == "started" and self._election.is_leader and self._zk.connected

    @property
    def leader_id(self) -> str | None:
        """The node id of the leader as last seen by this replica."""
        return self._election.leader_id

    async def nodes(self) -> list[str]:
        """Node ids of the live gateway replicas."""
        self._check_open()
        return await self._registry.nodes()

    # --- groups ----------------------------------------------------------------------

    async def groups(self) -> list[str]:
        """Groups that have members or committed offsets, sorted."""
        self._check_open()
        with_members, with_offsets = await asyncio.gather(
            self._groups.with_members(), self._offsets.with_offsets()
        )
        return sorted(with_members | with_offsets)

    async def coordinated_groups(self) -> list[str]:
        """Every group that had members or a generation, sorted: one listing of the groups' znodes."""
        self._check_open()
        return sorted(await self._groups.coordinated())

    async def join(self, group: str, member: Member) -> None:
        self._check_open()
        await self._groups.join(group, member)
        if self._ephemeral_members:
            self._local_members[(group, member.member_id)] = member

    async def leave(self, group: str, member_id: str) -> bool:
        self._check_open()
        self._local_members.pop((group, member_id), None)
        return await self._groups.leave(group, member_id)

    async def members(self, group: str) -> dict[str, Member]:
        self._check_open()
        return await self._groups.members(group)

    def membership_version(self) -> None:
        """Unknown: other replicas join and leave, and a member's ephemeral znode ends with its
        replica's session."""
        return None

    async def state(self, group: str) -> GroupState:
        """The current generation; version ``ABSENT_VERSION`` (-1) if the group has none yet."""
        self._check_open()
        return await self._groups.state(group)

    def watch_state(self, group: str, on_change: Callable[[], None]) -> None:
        """``on_change()`` once, in the loop, at the group's next generation published through any
        replica (a kazoo data watch on its state znode, set before any later request is sent)."""
        if self._state == "started":
            self._groups.watch_state(group, on_change)

    async def publish(self, group: str, state: GroupState, *, expected_version: int) -> bool:
        self._check_open()
        return await self._groups.publish(group, state, expected_version=expected_version)

    # --- offsets ---------------------------------------------------------------------

    async def commit(
        self,
        group: str,
        offsets: Mapping[TopicPartition, int],
        *,
        member_id: str | None = None,
        generation: int | None = None,
    ) -> None:
        self._check_open()
        await self._offsets.commit(group, offsets, member_id=member_id, generation=generation)

    async def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        self._check_open()
        return await self._offsets.committed(group, partitions)

    # --- share-partition states --------------------------------------------------------

    async def share_states(
        self, group: str, tps: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[StoredState, int]]:
        """What ZooKeeper holds now; the versions are the znodes' ``stat.version``."""
        self._check_open()
        return await self._shares.states(group, tps)

    async def store_share_states(
        self, group: str, updates: Mapping[TopicPartition, tuple[StoredState, int]]
    ) -> bool:
        self._check_open()
        return await self._shares.store(group, updates)

    async def delete_share_states(self, group: str, tps: Collection[TopicPartition] | None = None) -> None:
        self._check_open()
        await uncancellable(self._shares.delete(group, tps))

    async def share_versions(self, group: str, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: version for tp, (_, version) in (await self.share_states(group, tps)).items()}

    async def change_share_states(
        self, group: str, changes: Mapping[TopicPartition, tuple[StateChange, int]]
    ) -> dict[TopicPartition, int] | None:
        return await change_by_whole_states(self, group, changes)

    async def share_groups(self) -> list[str]:
        self._check_open()
        return await self._shares.groups()

    # --- push subscriptions ------------------------------------------------------------

    async def push_subscriptions(self) -> dict[str, tuple[StoredPush, int]]:
        self._check_open()
        return await self._push.push_subscriptions()

    async def push_subscription(self, name: str) -> tuple[StoredPush, int] | None:
        self._check_open()
        return await self._push.push_subscription(name)

    async def put_push_subscription(
        self, name: str, data: StoredPush, *, expected_version: int | None
    ) -> int | None:
        self._check_open()
        return await uncancellable(
            self._push.put_push_subscription(name, data, expected_version=expected_version)
        )

    async def delete_push_subscription(self, name: str, *, expected_version: int) -> bool:
        self._check_open()
        return await uncancellable(
            self._push.delete_push_subscription(name, expected_version=expected_version)
        )

    # --- ACL bindings ------------------------------------------------------------------

    async def acls(self) -> Sequence[AclBinding]:
        """This replica's copy, kept fresh by a watch: no request reaches ZooKeeper."""
        self._check_open()
        return self._acls.bindings()

    async def add_acls(self, bindings: Sequence[AclBinding]) -> None:
        self._check_open()
        await uncancellable(self._acls.add(bindings))

    async def remove_acls(self, selector: AclFilter) -> list[AclBinding]:
        self._check_open()
        return await uncancellable(self._acls.remove(selector))

    # --- locks ------------------------------------------------------------------------

    @asynccontextmanager
    async def lock(self, name: str, *, timeout_s: float = 10.0) -> AsyncIterator[None]:
        self._check_open()
        async with self._locks.hold(name, timeout_s):
            yield

    async def contended(self, name: str) -> bool:
        self._check_open()
        return await self._locks.contended(name)

    def _check_open(self) -> None:
        if self._state != "started":
            raise BackendUnavailable("The ZooKeeper coordinator is not running.")
