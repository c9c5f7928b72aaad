"""The embedded ``Coordinator``: groups in process, committed offsets durable on local disk.

Membership and generations live in memory: they belong to consumer instances,
which the embedded sessions keep in memory too, so they die together.
Committed offsets must survive any restart, including ``kill -9``; they live
under ``<data_dir>/coordinator/`` in two kinds of file:

``offsets-<seq>.journal`` (the active one is the highest ``seq``)
    ``b"BGOJ\\x01"``, then one frame per ``commit`` call, appended and
    fdatasync'ed before the call returns.
``offsets.snapshot``
    ``b"BGOS\\x01"``, ``u64`` next journal seq, ``u32`` frame count, then
    one frame per group holding all its offsets. Replaced atomically (tmp
    file, fsync, rename, fsync of the directory).

A frame is ``u32 length | u32 crc32c(payload) | payload`` and a payload is
``u16 len | group (UTF-8) | u32 count | count x (u16 len | topic (UTF-8) |
i32 partition | i64 offset)``, all big-endian. Loading reads the snapshot,
then replays the journals from its next seq on; a frame cut short or failing
its CRC ends a journal (the torn tail of a crash), so each commit call is all
or nothing, and the tail is truncated before anything is appended again.
Group names only ever appear inside payloads, never in a path.

When the active journal grows past ``compact_bytes``, and on ``stop()``, it is
compacted: a new empty journal is created first, then the snapshot (pointing
at it) replaces the old one, then the old journal is deleted. A crash between
any two steps leaves files that load to the same offsets.

File I/O runs in worker threads (``asyncio.to_thread``), one at a time under
an ``asyncio.Lock`` that also serializes commits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

import crc32c

from service.core.fencing import fence
from service.core.models import GroupState, Member, TopicPartition
from service.core.rules import check_group, check_offsets
from service.errors import BackendError, BackendUnavailable

from ..lifecycle import AsyncLifecycle

log = logging.getLogger(__name__)

__all__ = ["EmbeddedCoordinator"]

DEFAULT_COMPACT_BYTES: Final = 4 << 20

_JOURNAL_MAGIC: Final = b"BGOJ\x01"
_SNAPSHOT_MAGIC: Final = b"BGOS\x01"
_SNAPSHOT_NAME: Final = "offsets.snapshot"
_JOURNAL_RE: Final = re.compile(r"offsets-(\d{16})\.journal")
_FRAME: Final = struct.Struct(">II")
_SNAPSHOT_HEADER: Final = struct.Struct(">QI")
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_ENTRY_TAIL: Final = struct.Struct(">iq")
# No honest frame comes near this; a larger length is garbage, not an allocation to attempt.
_MAX_FRAME: Final = 256 << 20
# Lone surrogates can reach us from JSON ("\ud800"); they must round-trip, not fail a commit.
_TEXT_ERRORS: Final = "surrogatepass"

Offsets = dict[TopicPartition, int]


class _Corrupt(Exception):
    """A payload that passed its CRC but does not parse (a bug or a foreign file)."""


def _journal_name(seq: int) -> str:
    return f"offsets-{seq:016d}.journal"


def _encode(group: str, offsets: list[tuple[TopicPartition, int]]) -> bytes:
    raw_group = group.encode("utf-8", _TEXT_ERRORS)
    parts = [_U16.pack(len(raw_group)), raw_group, _U32.pack(len(offsets))]
    for tp, offset in offsets:
        raw_topic = tp.topic.encode("utf-8", _TEXT_ERRORS)
        parts.append(_U16.pack(len(raw_topic)))
        parts.append(raw_topic)
        parts.append(_ENTRY_TAIL.pack(tp.partition, offset))
    return b"".join(parts)


def _decode(payload: bytes) -> tuple[str, Offsets]:
    try:
        (n,) = _U16.unpack_from(payload, 0)
        pos = 2 + n
        group = payload[2:pos].decode("utf-8", _TEXT_ERRORS)
        (count,) = _U32.unpack_from(payload, pos)
        pos += 4
        offsets: Offsets = {}
        for _ in range(count):
            (n,) = _U16.unpack_from(payload, pos)
            topic = payload[pos + 2 : pos + 2 + n].decode("utf-8", _TEXT_ERRORS)
            partition, offset = _ENTRY_TAIL.unpack_from(payload, pos + 2 + n)
            pos += 2 + n + _ENTRY_TAIL.size
            offsets[TopicPartition(topic, partition)] = offset
    except (struct.error, UnicodeDecodeError) as exc:
        raise _Corrupt(str(exc)) from exc
    if pos != len(payload):
        raise _Corrupt(f"{len(payload) - pos} trailing bytes")
    return group, offsets


def _frame(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), crc32c.crc32c(payload)) + payload


def _frames(buf: bytes, pos: int) -> tuple[list[bytes], int]:
    """The intact frames of ``buf`` from ``pos`` on, and where the intact part ends."""
    payloads: list[bytes] = []
    end = len(buf)
    while pos + _FRAME.size <= end:
        length, crc = _FRAME.unpack_from(buf, pos)
        start = pos + _FRAME.size
        if length > _MAX_FRAME or start + length > end:
            break
        payload = buf[start : start + length]
        if crc32c.crc32c(payload) != crc:
            break
        payloads.append(payload)
        pos = start + length
    return payloads, pos


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError("short write")
        view = view[n:]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# fdatasync covers the data and the file size, which is all an append needs.
_datasync = getattr(os, "fdatasync", os.fsync)


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
    return Member(member.member_id, member.subscription, member.strategy, member.joined_ms)


class _OffsetStore:
    """The files of committed offsets. Synchronous: every method runs in a worker thread."""

    def __init__(self, root: Path, compact_bytes: int) -> None:
        self.root = root
        self.compact_bytes = compact_bytes
        self.seq = 0
        self.fd: int | None = None
        self.size = 0  # bytes of the active journal known to be intact
        self.compact_at = compact_bytes
        self.broken: str | None = None

    # --- loading ---------------------------------------------------------------------

    def load(self) -> dict[str, Offsets]:
        """Read the snapshot and replay the journals; leave the active journal open for appends."""
        self.broken = None
        self.compact_at = self.compact_bytes
        if not self.root.is_dir():
            self.root.mkdir(parents=True)
            _fsync_dir(self.root.parent)
        for leftover in self.root.glob("*.tmp"):  # a snapshot whose compaction died before the rename
            if leftover.is_file():
                leftover.unlink()
        offsets: dict[str, Offsets] = {}
        next_seq = self._read_snapshot(offsets)
        journals = self._journals()
        live = [(seq, path) for seq, path in journals if seq >= next_seq]
        for seq, path in journals:
            if seq < next_seq:  # already folded into the snapshot; a compaction died before deleting it
                path.unlink()
        for i, (seq, path) in enumerate(live):
            intact = self._replay(path, offsets)
            if i == len(live) - 1:
                self._open(seq, path, intact)
        if self.fd is None:
            self._create(next_seq)
        return offsets

    def _read_snapshot(self, offsets: dict[str, Offsets]) -> int:
        return read_snapshot(self.root / _SNAPSHOT_NAME, offsets)

    def _replay(self, path: Path, offsets: dict[str, Offsets]) -> int:
        intact, size = replay_journal(path, offsets)
        if intact < size:
            log.warning(
                "offsets journal %s: ignoring %d bytes of an incomplete last commit", path, size - intact
            )
        return intact

    def _open(self, seq: int, path: Path, intact: int) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            if intact == 0:  # header torn: rewrite it
                os.ftruncate(fd, 0)
                _write_all(fd, _JOURNAL_MAGIC)
                intact = len(_JOURNAL_MAGIC)
                os.fsync(fd)
            elif os.fstat(fd).st_size != intact:
                # Appending after the torn bytes would hide every later commit from the next load.
                os.ftruncate(fd, intact)
                os.fsync(fd)
            os.lseek(fd, intact, os.SEEK_SET)
        except BaseException:
            os.close(fd)
            raise
        self.seq, self.fd, self.size = seq, fd, intact

    def _create(self, seq: int) -> None:
        path = self.root / _journal_name(seq)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, _JOURNAL_MAGIC)
            os.fsync(fd)
            _fsync_dir(self.root)
        except BaseException:
            os.close(fd)
            raise
        self.seq, self.fd, self.size = seq, fd, len(_JOURNAL_MAGIC)

    # --- writing ---------------------------------------------------------------------

    def append(self, frame: bytes) -> None:
        """Append one commit and make it durable, or leave the journal as it was and raise."""
        if self.broken is not None:
            raise OSError(self.broken)
        assert self.fd is not None
        try:
            _write_all(self.fd, frame)
            _datasync(self.fd)
        except OSError:
            # Cut off whatever part of the frame made it, so later commits are not stranded behind it.
            try:
                os.ftruncate(self.fd, self.size)
                os.lseek(self.fd, self.size, os.SEEK_SET)
            except OSError as exc:
                self.broken = f"offsets journal cannot be repaired after a failed write: {exc}"
            raise
        self.size += len(frame)

    def needs_compaction(self) -> bool:
        return self.size > self.compact_at

    def compact(self, offsets: Mapping[str, Offsets]) -> None:
        """Fold everything into a new snapshot and start an empty journal.

        Steps: create journal N+1; write the snapshot (pointing at N+1) to a
        tmp file and rename it over the old one; delete journal N. Before the
        rename, a load replays N then the empty N+1; after it, the snapshot
        then N+1. Either way the same offsets.
        """
        old_seq, old_fd, old_size = self.seq, self.fd, self.size
        new_seq = old_seq + 1
        # Should this fail (disk full), the next attempt waits for another
        # threshold's worth of commits rather than repeating on every one.
        self.compact_at = old_size + self.compact_bytes
        self._create(new_seq)
        snapshot = self.root / _SNAPSHOT_NAME
        tmp = snapshot.with_name(snapshot.name + ".tmp")
        try:
            body = [_frame(_encode(g, list(o.items()))) for g, o in offsets.items() if o]
            header = _SNAPSHOT_MAGIC + _SNAPSHOT_HEADER.pack(new_seq, len(body))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, header + b"".join(body))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, snapshot)
        except BaseException:
            # The old snapshot still stands: keep appending to journal N (the
            # empty N+1 is harmless, it replays after N).
            assert self.fd is not None
            os.close(self.fd)
            self.seq, self.fd, self.size = old_seq, old_fd, old_size
            raise
        # From the rename on, the snapshot points at N+1: journal N is done with,
        # whatever happens next.
        self.compact_at = self.compact_bytes
        if old_fd is not None:
            os.close(old_fd)
        try:
            _fsync_dir(self.root)
            # Only once the rename is durable: until then a power cut may bring
            # back the old snapshot, which needs journal N (and any older one
            # a failed compaction left behind).
            for seq, path in self._journals():
                if seq < new_seq:
                    path.unlink()
        except OSError as exc:  # the next load deletes them if the snapshot made it
            log.warning("offsets compaction: could not retire journal %d: %s", old_seq, exc)

    def _journals(self) -> list[tuple[int, Path]]:
        """(seq, path) of every journal file, in seq order."""
        found = ((_JOURNAL_RE.fullmatch(p.name), p) for p in self.root.iterdir())
        return sorted((int(m.group(1)), p) for m, p in found if m is not None)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class EmbeddedCoordinator(AsyncLifecycle):
    """Consumer groups for a single gateway process.

    Collaborators: ``GroupManager`` computes assignments and publishes them
    here with compare-and-set; ``ConsumerService`` joins and leaves members and
    commits offsets (fenced by ownership). Offsets go through ``_OffsetStore``
    (the journal and snapshot files); everything else is in memory. One
    process owns a data directory: two gateways on the same directory would
    interleave journal writes.
    """

    def __init__(self, data_dir: Path, *, compact_bytes: int = DEFAULT_COMPACT_BYTES) -> None:
        self._store = _OffsetStore(Path(data_dir) / "coordinator", compact_bytes)
        self._members: dict[str, dict[str, Member]] = {}
        self._states: dict[str, GroupState] = {}
        self._offsets: dict[str, Offsets] = {}
        self._lock = asyncio.Lock()
        self._pending: set[asyncio.Task[None]] = set()
        self._started = False
        self._stopping = False

    # --- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Load the committed offsets (replaying the journal after a crash)."""
        if self._started:
            return
        try:
            self._offsets = await asyncio.to_thread(self._store.load)
        except OSError as exc:
            raise BackendError(f"cannot open the offsets store in {self._store.root}: {exc}") from exc
        self._started = True
        self._stopping = False

    async def stop(self) -> None:
        """Finish in-flight commits, compact the journal and close it. Idempotent."""
        if not self._started or self._stopping:
            return
        self._stopping = True
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        async with self._lock:
            try:
                if self._store.size > len(_JOURNAL_MAGIC) and self._store.broken is None:
                    await asyncio.to_thread(self._store.compact, self._offsets)
            except OSError as exc:  # the journal still holds everything
                log.warning("offsets compaction on stop failed: %s", exc)
            finally:
                self._store.close()
                self._started = False

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
        frame = _frame(_encode(group, entries))
        # The write runs in its own task so that a client hanging up mid-commit
        # cannot leave a commit on disk that memory does not show.
        task = asyncio.create_task(self._append(group, entries, frame, member_id, generation))
        self._pending.add(task)
        task.add_done_callback(self._finished)
        await asyncio.shield(task)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._pending.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved here in case the caller was cancelled and never sees it

    async def _append(
        self,
        group: str,
        entries: list[tuple[TopicPartition, int]],
        frame: bytes,
        member_id: str | None,
        generation: int | None,
    ) -> None:
        async with self._lock:
            if self._store.fd is None:
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

    def _check_open(self) -> None:
        if not self._started or self._stopping:
            raise BackendUnavailable("The coordinator is not running.")


def read_snapshot(path: Path, offsets: dict[str, Offsets]) -> int:
    """Fold the snapshot at ``path`` into ``offsets``; the journal sequence it continues with.

    The snapshot is replaced atomically, so anything short of complete is damage, not a crash.
    Shared with ``offsets_reader``, which reads the same files from other processes.
    """
    try:
        buf = path.read_bytes()
    except FileNotFoundError:
        return 0
    head = len(_SNAPSHOT_MAGIC) + _SNAPSHOT_HEADER.size
    if len(buf) < head or not buf.startswith(_SNAPSHOT_MAGIC):
        raise BackendError(f"offsets snapshot {path} is not a brokergate snapshot")
    next_seq, count = _SNAPSHOT_HEADER.unpack_from(buf, len(_SNAPSHOT_MAGIC))
    payloads, end = _frames(buf, head)
    if len(payloads) != count or end != len(buf):
        raise BackendError(f"offsets snapshot {path} is damaged")
    _apply(path, payloads, offsets)
    return int(next_seq)


def replay_journal(path: Path, offsets: dict[str, Offsets]) -> tuple[int, int]:
    """Fold the journal at ``path`` into ``offsets``: (bytes intact, bytes in the file).

    A torn last frame is a commit that was never acknowledged; a journal whose header is
    still being written (or was cut by a crash) holds nothing yet.
    """
    buf = path.read_bytes()
    if not buf.startswith(_JOURNAL_MAGIC):
        if len(buf) < len(_JOURNAL_MAGIC) and _JOURNAL_MAGIC.startswith(buf):
            return 0, len(buf)
        raise BackendError(f"offsets journal {path} is not a brokergate journal")
    payloads, intact = _frames(buf, len(_JOURNAL_MAGIC))
    _apply(path, payloads, offsets)
    return intact, len(buf)


def _apply(path: Path, payloads: list[bytes], offsets: dict[str, Offsets]) -> None:
    for payload in payloads:
        try:
            group, group_offsets = _decode(payload)
        except _Corrupt as exc:
            raise BackendError(f"{path} is damaged: {exc}") from exc
        offsets.setdefault(group, {}).update(group_offsets)
