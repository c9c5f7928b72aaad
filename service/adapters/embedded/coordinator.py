"""The embedded ``Coordinator``: groups in process, committed offsets and share states durable on disk.

Membership and generations live in memory: they belong to consumer instances,
which the embedded sessions keep in memory too, so they die together.
Committed offsets and the states of share-partitions must survive any
restart, including ``kill -9``: they are kept in memory and written through a
``JournalStore`` each (``journal_store``: a journal and a snapshot under
``<data_dir>/coordinator/``, in the formats of ``offsets_format`` and
``shares_format``) before a call returns. The share states are
``share_store.EmbeddedShareStates``, through which this class serves that port; the push
subscriptions ``push_store.EmbeddedPushStore``, one file.

File I/O runs in worker threads (``asyncio.to_thread``), one at a time per
journal under an ``asyncio.Lock`` that also serializes its writes. The port's
named locks are ``asyncio.Lock``s too: this process is the only replica there is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson

from service.core.acl import AclBinding, AclFilter
from service.core.fencing import fence
from service.core.models import GroupState, Member, TopicPartition
from service.core.push.stored import StoredPush
from service.core.rules import check_group, check_offsets
from service.core.shares.stored import StateChange, StoredState
from service.errors import BackendError, BackendUnavailable, LockTimeout

from ..format_versions import ACLS_FORMAT, check_version
from ..lifecycle import Lifecycle
from ..share_states import ShareStoreLimits
from ..tasks import retrieve
from .fileio import atomic_write, unavailable
from .journal_store import DEFAULT_COMPACT_BYTES, JournalStore, compact_on_stop
from .offsets_format import COORDINATOR_DIR, LOCK_NAME, OFFSETS, Offsets, commit_frame
from .push_store import EmbeddedPushStore
from .share_store import EmbeddedShareStates

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["EmbeddedCoordinator"]

ACLS_FILE: Final = "acls.json"  # beside the offsets, under the coordinator's lock


def _copy_state(state: GroupState) -> GroupState:
    return GroupState(
        generation=state.generation,
        assignment={m: list(tps) for m, tps in state.assignment.items()},
        owned_since=dict(state.owned_since),
        topics=dict(state.topics),
        version=state.version,
    )


def _copy_member(member: Member) -> Member:
    # Subscription is frozen, so sharing it is safe.
    return Member(member.member_id, member.subscription, member.strategy, member.joined_ms, member.principal)


class EmbeddedCoordinator(Lifecycle):
    """Consumer groups for a single gateway process.

    Collaborators: ``GroupManager`` computes assignments and publishes them
    here with compare-and-set; ``ConsumerService`` joins and leaves members and
    commits offsets (fenced by ownership); the share-group core keeps its
    share-partition states. Offsets and share states go through a
    ``JournalStore`` each (the journal and snapshot files); everything else is
    in memory. One process owns a data directory: two gateways on the same
    directory would interleave journal writes.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        compact_bytes: int = DEFAULT_COMPACT_BYTES,
        share_limits: ShareStoreLimits | None = None,
    ) -> None:
        super().__init__()  # the start/stop state
        root = Path(data_dir) / COORDINATOR_DIR
        # The offsets' store locks the directory for this process; the shares' lives beside it.
        self._store = JournalStore(root, OFFSETS, compact_bytes, lock=LOCK_NAME)
        self._shares = EmbeddedShareStates(root, compact_bytes, share_limits)
        self._push = EmbeddedPushStore(root)
        self._members: dict[str, dict[str, Member]] = {}
        self._membership = 0  # bumped by every join, leave and publish (``membership_version``)
        self._states: dict[str, GroupState] = {}
        self._offsets: dict[str, Offsets] = {}
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Task[Any]] = set()
        self._acls_path = Path(data_dir) / COORDINATOR_DIR / ACLS_FILE
        self._acls: tuple[AclBinding, ...] = ()  # each once; a new tuple on every change
        self._named: dict[str, asyncio.Lock] = {}  # the port's locks, by name

    # --- lifecycle -------------------------------------------------------------------

    async def _open(self) -> None:
        """Load the committed offsets and the share states (replaying the journals after a crash)."""
        try:
            self._offsets = await asyncio.to_thread(self._store.load)
        except OSError as exc:
            raise BackendError(f"cannot open the offsets store in {self._store.root}: {exc}") from exc
        try:
            await self._shares.open()
            try:
                self._acls = tuple(dict.fromkeys(await asyncio.to_thread(_read_acls, self._acls_path)))
            except (OSError, ValueError) as exc:
                raise BackendError(f"cannot read the ACLs in {self._acls_path}: {exc}") from exc
            await self._push.open()
        except BaseException:
            self._shares.abandon()
            self._store.close()  # the directory free for a retry
            raise

    async def _close(self) -> None:
        """Finish in-flight writes, compact the journals and close them."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self._shares.close()
        async with self._lock:
            await compact_on_stop(self._store, self._offsets)

    def is_leader(self) -> bool:
        """Always: this process is the only replica there is."""
        return True

    # --- groups ----------------------------------------------------------------------

    async def groups(self) -> list[str]:
        """Groups that have members or committed offsets, sorted."""
        return sorted({*await self.coordinated_groups(), *(g for g, o in self._offsets.items() if o)})

    async def coordinated_groups(self) -> list[str]:
        """Groups that have members, sorted (their members leave through this process only)."""
        return sorted(g for g, members in self._members.items() if members)

    async def join(self, group: str, member: Member) -> None:
        check_group(group)
        self._members.setdefault(group, {})[member.member_id] = _copy_member(member)
        self._membership += 1

    async def leave(self, group: str, member_id: str) -> bool:
        members = self._members.get(group)
        if not members or member_id not in members:
            return False
        del members[member_id]
        if not members:
            del self._members[group]
        self._membership += 1
        return True

    async def members(self, group: str) -> dict[str, Member]:
        return {m: _copy_member(member) for m, member in self._members.get(group, {}).items()}

    def membership_version(self) -> int:
        """Every change of membership goes through this object: the count of them."""
        return self._membership

    async def state(self, group: str) -> GroupState:
        stored = self._states.get(group)
        return _copy_state(stored) if stored is not None else GroupState()

    def watch_state(self, group: str, on_change: Callable[[], None]) -> None:
        """Nothing to watch: one process, whose ``GroupManager`` announces its own publishes."""

    async def publish(self, group: str, state: GroupState, *, expected_version: int) -> bool:
        """Store a copy of ``state`` as version ``expected_version + 1`` (also set on ``state``)."""
        check_group(group)
        stored = self._states.get(group)
        if (stored.version if stored is not None else 0) != expected_version:
            return False
        new = _copy_state(state)
        new.version = expected_version + 1
        self._states[group] = new
        state.version = new.version
        self._membership += 1
        return True

    # --- offsets ---------------------------------------------------------------------

    async def commit(
        self,
        group: str,
        offsets: Mapping[TopicPartition, int],
        *,
        member_id: str | None = None,
        generation: int | None = None,
    ) -> None:
        """Durably store ``offsets`` (all or none), fenced by ownership when ``member_id`` is given."""
        self._check_open()
        check_group(group)
        entries = check_offsets(offsets)
        if not entries:
            return
        frame = commit_frame(group, entries)
        # The write runs in its own task so that a client hanging up mid-commit
        # cannot leave a commit on disk that memory does not show.
        task = asyncio.create_task(self._append(group, entries, frame, member_id, generation))
        self._pending.add(task)
        task.add_done_callback(self._finished)
        await asyncio.shield(task)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        retrieve(task)  # in case the caller was cancelled and never sees it

    async def _append(
        self,
        group: str,
        entries: list[tuple[TopicPartition, int]],
        frame: bytes,
        member_id: str | None,
        generation: int | None,
    ) -> None:
        async with self._lock:
            if not self._store.is_open:
                raise BackendUnavailable("The coordinator is stopped.")
            if member_id is not None:
                fence(group, self._states.get(group) or GroupState(), entries, member_id, generation)
            try:
                await asyncio.to_thread(self._store.append, frame)
            except OSError as exc:
                broken = self._store.broken is not None
                raise unavailable("Could not store the committed offsets", exc, broken=broken) from exc
            self._offsets.setdefault(group, {}).update(entries)
            if self._store.needs_compaction():
                try:
                    await asyncio.to_thread(self._store.compact, self._offsets)
                except OSError as exc:  # the commit is durable in the journal; compaction retries later
                    log.warning("offsets compaction failed: %s", exc)

    async def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """Committed offsets of ``group``; partitions without a commit are left out."""
        self._check_open()
        stored = self._offsets.get(group, {})
        if partitions is None:
            return dict(stored)
        return {tp: stored[tp] for tp in partitions if tp in stored}

    # --- share-partition states: the ``EmbeddedShareStates`` ------------------------------

    async def share_states(
        self, group: str, tps: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[StoredState, int]]:
        self._check_open()
        return await self._shares.share_states(group, tps)

    async def store_share_states(
        self, group: str, updates: Mapping[TopicPartition, tuple[StoredState, int]]
    ) -> bool:
        self._check_open()
        return await self._shares.store_share_states(group, updates)

    async def delete_share_states(self, group: str, tps: Collection[TopicPartition] | None = None) -> None:
        self._check_open()
        await self._shares.delete_share_states(group, tps)

    async def share_versions(self, group: str, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        self._check_open()
        return await self._shares.share_versions(group, tps)

    async def change_share_states(
        self, group: str, changes: Mapping[TopicPartition, tuple[StateChange, int]]
    ) -> dict[TopicPartition, int] | None:
        self._check_open()
        return await self._shares.change_share_states(group, changes)

    async def share_groups(self) -> list[str]:
        self._check_open()
        return await self._shares.share_groups()

    # --- ACL bindings -------------------------------------------------------------------

    async def acls(self) -> Sequence[AclBinding]:
        return self._acls

    async def add_acls(self, bindings: Sequence[AclBinding]) -> None:
        async with self._lock:
            merged = tuple(dict.fromkeys((*self._acls, *bindings)))
            if len(merged) != len(self._acls):
                await self._write_acls(merged)

    async def remove_acls(self, selector: AclFilter) -> list[AclBinding]:
        async with self._lock:
            removed = [b for b in self._acls if selector.selects(b)]
            if removed:
                await self._write_acls(tuple(b for b in self._acls if not selector.selects(b)))
            return removed

    async def _write_acls(self, acls: tuple[AclBinding, ...]) -> None:
        """Durable before the change is visible: a crash keeps the old set or the new, whole."""
        doc = {"version": ACLS_FORMAT, "acls": [b.as_dict() for b in acls]}
        data = orjson.dumps(doc, option=orjson.OPT_INDENT_2)
        try:
            await asyncio.to_thread(atomic_write, self._acls_path, data)
        except OSError as exc:
            raise unavailable("Cannot write the ACLs", exc) from exc
        self._acls = acls

    # --- push subscriptions: ``push_store`` ---------------------------------------------

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
        return await self._push.put_push_subscription(name, data, expected_version=expected_version)

    async def delete_push_subscription(self, name: str, *, expected_version: int) -> bool:
        self._check_open()
        return await self._push.delete_push_subscription(name, expected_version=expected_version)

    # --- locks ------------------------------------------------------------------------

    @asynccontextmanager
    async def lock(self, name: str, *, timeout_s: float = 10.0) -> AsyncIterator[None]:
        held = self._named.setdefault(name, asyncio.Lock())
        try:
            async with asyncio.timeout(timeout_s):
                await held.acquire()
        except TimeoutError:
            raise LockTimeout(f"The lock {name!r} was not acquired within {timeout_s:g} s.") from None
        try:
            yield
        finally:
            held.release()

    async def contended(self, name: str) -> bool:
        held = self._named.get(name)
        return held is not None and held.locked()

    def _check_open(self) -> None:
        if self._state != "started":
            raise BackendUnavailable("The coordinator is not running.")


def _read_acls(path: Path) -> list[AclBinding]:
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    if not isinstance(data, dict):
        raise ValueError('expected {"version": 1, "acls": [...]}')
    check_version(f"the ACLs file {path}", data.get("version"), ACLS_FORMAT)
    if data.get("version") != ACLS_FORMAT or not isinstance(data.get("acls"), list):
        raise ValueError('expected {"version": 1, "acls": [...]}')
    return [AclBinding.from_dict(b) for b in data["acls"]]
