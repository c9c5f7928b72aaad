"""The embedded coordinator's share-partition states: in memory, and durable in a journal of their own.

A state is kept as ``shares_memory`` keeps it (its JSON until a change edits it, then its runs)
and every write is appended to the shares' ``JournalStore`` (in ``shares_format``'s frames) and
fdatasync'ed before it is applied in memory and the call returns; a compare-and-set on each
partition's version settles races between the share-group core's writers.

The share states have a journal of their own, beside the committed offsets': a share state
changes on every acquisition and acknowledgement (a change frame, compacted into whole states of
up to hundreds of kilobytes) where a commit weighs bytes, so in one journal the share states
would set the pace of compaction, and every snapshot that ``offsets_reader`` (Spark jobs, other
processes) reads would carry them.

Collaborators: the ``EmbeddedCoordinator``, which opens and closes it and serves the port
through it; ``share_states`` (the checks every coordinator makes alike).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Coroutine, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

from service.core.models import TopicPartition
from service.core.shares.stored import StateChange, StoredState
from service.errors import BackendError, BackendUnavailable

from ..share_states import (
    ABSENT,
    DECODE_INLINE_BYTES,
    ShareStoreLimits,
    ShareWrite,
    check_room,
    check_sizes,
    decode_states,
    encode_writes,
    stored_partitions,
)
from ..tasks import retrieve
from .fileio import unavailable
from .journal_store import JournalStore, compact_on_stop
from .shares_format import (
    DELETED,
    SHARES,
    StoredShares,
    apply_changes,
    apply_writes,
    change_frame,
    write_frame,
)
from .shares_memory import ShareChange, prepare_change

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["EmbeddedShareStates"]

_NOTHING: Final[StoredState] = {"start": 0, "end": 0, "runs": []}  # a state that only names a partition


class EmbeddedShareStates:
    """The ``ShareStates`` port of one process, over the journal in ``root``. Its caller checks
    that it is open before each call."""

    def __init__(self, root: Path, compact_bytes: int, limits: ShareStoreLimits | None = None) -> None:
        self._store = JournalStore(root, SHARES, compact_bytes, lazy=True)
        self._limits = limits or ShareStoreLimits()
        self._shares: StoredShares = {}
        self._lock = asyncio.Lock()  # one write (and one file operation) at a time
        self._pending: set[asyncio.Task[Any]] = set()

    async def open(self) -> None:
        """Load the states (replaying the journal after a crash)."""
        try:
            self._shares = await asyncio.to_thread(self._store.load)
        except OSError as exc:
            raise BackendError(f"cannot open the share states in {self._store.root}: {exc}") from exc

    def abandon(self) -> None:
        """Close the journal without compacting it: a start that failed."""
        self._store.close()

    async def close(self) -> None:
        """Finish the writes in flight, compact the journal and close it."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        async with self._lock:
            await compact_on_stop(self._store, self._shares)

    async def share_states(
        self, group: str, tps: Collection[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[StoredState, int]]:
        """The stored states of ``group`` and their versions; partitions without one are left out."""
        stored = self._shares.get(group, {})
        wanted = stored_partitions(tps)
        keys = list(stored) if wanted is None else [tp for tp in wanted if tp in stored]
        found = [(tp, stored[tp].data, stored[tp].version) for tp in keys]
        if sum(len(data) for _, data, _ in found) > DECODE_INLINE_BYTES:
            return await asyncio.to_thread(decode_states, group, found)
        return decode_states(group, found)

    async def store_share_states(
        self, group: str, updates: Mapping[TopicPartition, tuple[StoredState, int]]
    ) -> bool:
        """Durably store every state if every version is still the stored one (see the port)."""
        writes = encode_writes(group, updates, self._limits)
        if not writes:
            return True
        return await self._write_shares(self._store_shares(group, writes))

    async def delete_share_states(self, group: str, tps: Collection[TopicPartition] | None = None) -> None:
        if group in self._shares:
            await self._write_shares(self._delete_shares(group, stored_partitions(tps)))

    async def share_versions(self, group: str, tps: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        stored = self._shares.get(group, {})
        return {tp: stored[tp].version for tp in tps if tp in stored}

    async def change_share_states(
        self, group: str, changes: Mapping[TopicPartition, tuple[StateChange, int]]
    ) -> dict[TopicPartition, int] | None:
        """Durably make every change if every version is still the stored one (see the port)."""
        prepared = [
            (
                tp,
                *prepare_change(change, f"partition {tp.topic}-{tp.partition} of share group {group!r}"),
                version,
            )
            for tp, (change, version) in changes.items()
        ]
        # the names, partitions and versions checked as a whole write's (the states are sized below)
        encode_writes(group, {tp: (_NOTHING, version) for tp, (_, version) in changes.items()}, self._limits)
        if not prepared:
            return {}
        return await self._write_shares(self._change_shares(group, prepared))

    async def share_groups(self) -> list[str]:
        """Groups with at least one stored share state, sorted."""
        return sorted(self._shares)

    async def _write_shares(self, write: Coroutine[Any, Any, T]) -> T:
        # In its own task, as a commit: a caller hanging up cannot part memory from disk.
        task = asyncio.create_task(write)
        self._pending.add(task)
        task.add_done_callback(self._finished)
        return await asyncio.shield(task)

    async def _store_shares(self, group: str, writes: list[ShareWrite]) -> bool:
        async with self._lock:
            stored = self._shares.get(group, {})
            if any((stored[tp].version if tp in stored else ABSENT) != version for tp, _, version in writes):
                return False
            check_room(
                group,
                sum(1 for tp, _, _ in writes if tp not in stored),
                groups=len(self._shares),
                group_exists=group in self._shares,
                partitions=len(stored),
                limits=self._limits,
            )
            # Versions count the writes of a partition's state, from 0 when it is first stored.
            await self._append_shares(group, [(tp, data, version + 1) for tp, data, version in writes])
            return True

    async def _change_shares(
        self, group: str, prepared: list[tuple[TopicPartition, ShareChange, bytes, int]]
    ) -> dict[TopicPartition, int] | None:
        async with self._lock:
            stored = self._shares.get(group, {})
            if any(
                (stored[tp].version if tp in stored else ABSENT) != version for tp, _, _, version in prepared
            ):
                return None
            check_room(
                group,
                sum(1 for tp, *_ in prepared if tp not in stored),
                groups=len(self._shares),
                group_exists=group in self._shares,
                partitions=len(stored),
                limits=self._limits,
            )
            check_sizes(
                group,
                [(tp, change.size_after(stored.get(tp)), len(data)) for tp, change, data, _ in prepared],
                self._limits,
            )
            versions = {tp: version + 1 for tp, _, _, version in prepared}
            entries = [(tp, data, versions[tp]) for tp, _, data, _ in prepared]
            await self._append_shares(
                group,
                entries,
                frame=change_frame(group, entries),
                changes=[(tp, change, versions[tp]) for tp, change, _, _ in prepared],
            )
            return versions

    async def _delete_shares(self, group: str, tps: list[TopicPartition] | None) -> None:
        async with self._lock:
            stored = self._shares.get(group, {})
            gone = list(stored) if tps is None else [tp for tp in tps if tp in stored]
            if gone:
                await self._append_shares(group, [(tp, b"", DELETED) for tp in gone])

    async def _append_shares(
        self,
        group: str,
        entries: list[ShareWrite],
        *,
        frame: bytes | None = None,
        changes: list[tuple[TopicPartition, ShareChange, int]] | None = None,
    ) -> None:
        """Append one write (or change) to the shares' journal, then apply it in memory (under the
        share lock)."""
        store = self._store
        if not store.is_open:
            raise BackendUnavailable("The coordinator is stopped.")
        try:
            await asyncio.to_thread(store.append, frame or write_frame(group, entries))
        except OSError as exc:
            what = f"Could not store the share states of group {group!r}"
            raise unavailable(what, exc, broken=store.broken is not None) from exc
        if changes is None:
            apply_writes(self._shares, group, entries)
        else:
            apply_changes(self._shares, group, changes)
        if store.needs_compaction():
            try:
                await asyncio.to_thread(store.compact, self._shares)
            except OSError as exc:  # the write is durable in the journal; compaction retries later
                log.warning("share states compaction failed: %s", exc)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        retrieve(task)  # in case the caller was cancelled and never sees it
