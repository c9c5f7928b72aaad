"""The embedded ``Coordinator``: groups in process, committed offsets durable on local disk.

Membership and generations live in memory: they belong to consumer instances,
which the embedded sessions keep in memory too, so they die together.
Committed offsets must survive any restart, including ``kill -9``: they are
kept in memory and written through ``OffsetStore`` (``offsets_store``: a
journal and a snapshot under ``<data_dir>/coordinator/``, in the format of
``offsets_format``) before a commit returns.

File I/O runs in worker threads (``asyncio.to_thread``), one at a time under
an ``asyncio.Lock`` that also serializes commits. The port's named locks are
``asyncio.Lock``s too: this process is the only replica there is.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import orjson

from service.core.acl import AclBinding, AclFilter
from service.core.fencing import fence
from service.core.models import GroupState, Member, TopicPartition
from service.core.rules import check_group, check_offsets
from service.errors import BackendError, BackendUnavailable, LockTimeout

from ..lifecycle import Lifecycle
from ..tasks import retrieve
from .fileio import atomic_write
from .offsets_format import COORDINATOR_DIR, Offsets, commit_frame
from .offsets_store import DEFAULT_COMPACT_BYTES, OffsetStore

log = logging.getLogger(__name__)

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
    commits offsets (fenced by ownership). Offsets go through ``OffsetStore``
    (the journal and snapshot files); everything else is in memory. One
    process owns a data directory: two gateways on the same directory would
    interleave journal writes.
    """

    def __init__(self, data_dir: Path, *, compact_bytes: int = DEFAULT_COMPACT_BYTES) -> None:
        super().__init__()  # the start/stop state
        self._store = OffsetStore(Path(data_dir) / COORDINATOR_DIR, compact_bytes)
        self._members: dict[str, dict[str, Member]] = {}
        self._states: dict[str, GroupState] = {}
        self._offsets: dict[str, Offsets] = {}
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Task[None]] = set()
        self._acls_path = Path(data_dir) / COORDINATOR_DIR / ACLS_FILE
        self._acls: tuple[AclBinding, ...] = ()  # each once; a new tuple on every change
        self._named: dict[str, asyncio.Lock] = {}  # the port's locks, by name

    # --- lifecycle -------------------------------------------------------------------

    async def _open(self) -> None:
        """Load the committed offsets (replaying the journal after a crash)."""
        try:
            self._offsets = await asyncio.to_thread(self._store.load)
        except OSError as exc:
            raise BackendError(f"cannot open the offsets store in {self._store.root}: {exc}") from exc
        try:
            self._acls = tuple(dict.fromkeys(await asyncio.to_thread(_read_acls, self._acls_path)))
        except (OSError, ValueError) as exc:
            raise BackendError(f"cannot read the ACLs in {self._acls_path}: {exc}") from exc

    async def _close(self) -> None:
        """Finish in-flight commits, compact the journal and close it."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        async with self._lock:
            try:
                if self._store.holds_commits():
                    await asyncio.to_thread(self._store.compact, self._offsets)
            except OSError as exc:  # the journal still holds everything
                log.warning("offsets compaction on stop failed: %s", exc)
            finally:
                self._store.close()

    def is_leader(self) -> bool:
        """Always: this process is the only replica there is."""
        return True

    # --- groups ----------------------------------------------------------------------

    async def groups(self) -> list[str]:
        """Groups that have members or committed offsets, sorted."""
        live = {g for g, members in self._members.items() if members}
        live.update(g for g, offsets in self._offsets.items() if offsets)
        return sorted(live)

    async def join(self, group: str, member: Member) -> None:
        check_group(group)
        self._members.setdefault(group, {})[member.member_id] = _copy_member(member)

    async def leave(self, group: str, member_id: str) -> bool:
        members = self._members.get(group)
        if not members or member_id not in members:
            return False
        del members[member_id]
        if not members:
            del self._members[group]
        return True

    async def members(self, group: str) -> dict[str, Member]:
        return {m: _copy_member(member) for m, member in self._members.get(group, {}).items()}

    async def state(self, group: str) -> GroupState:
        stored = self._states.get(group)
        return _copy_state(stored) if stored is not None else GroupState()

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

    def _finished(self, task: asyncio.Task[None]) -> None:
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
                raise BackendUnavailable(f"Could not store the committed offsets: {exc}") from exc
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
        data = orjson.dumps({"version": 1, "acls": [b.as_dict() for b in acls]}, option=orjson.OPT_INDENT_2)
        try:
            await asyncio.to_thread(atomic_write, self._acls_path, data)
        except OSError as exc:
            raise BackendUnavailable(f"cannot write the ACLs: {exc}") from exc
        self._acls = acls

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

    def _check_open(self) -> None:
        if self._state != "started":
            raise BackendUnavailable("The coordinator is not running.")


def _read_acls(path: Path) -> list[AclBinding]:
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("acls"), list):
        raise ValueError('expected {"version": 1, "acls": [...]}')
    return [AclBinding.from_dict(b) for b in data["acls"]]
