"""``JournalStore``: the journal and snapshot files of one kind of the embedded coordinator's state.

The layout and framing are ``journal_format``'s, the payloads the format's
(``offsets_format``: committed offsets; ``shares_format``: share-partition
states); this module keeps the files consistent through writes, crashes and
compactions. Loading reads the snapshot, replays the journals from its next
seq on, and truncates a torn tail before anything is appended again. Each
write is one frame, appended and fdatasync'ed: all or nothing.

When the active journal grows past ``compact_bytes``, or past the snapshot's
size when that is larger (so rewriting large states costs no more than the
writes it folds in), and on the coordinator's ``stop()``, it is compacted: a
new empty journal is created first, then the snapshot (pointing at it)
replaces the old one, then the old journal is deleted. A crash between any
two steps leaves files that load to the same state.

Synchronous: every method runs in a worker thread, one at a time per store (the
coordinator serializes them under a lock); ``compact_on_stop`` is what a stop awaits. One
process owns a directory.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

from .fileio import (
    create_file,
    datasync,
    ensure_dir,
    fsync_dir,
    lock_dir,
    open_file,
    os_reason,
    replace_file,
    write_all,
)
from .journal_format import JournalFormat

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_COMPACT_BYTES", "JournalStore", "compact_on_stop"]

DEFAULT_COMPACT_BYTES: Final = 4 << 20

S = TypeVar("S")


class JournalStore(Generic[S]):
    """The files of one ``JournalFormat`` under ``root``; ``EmbeddedCoordinator`` keeps the state in memory.

    With ``lock`` (a file name), ``load`` locks the directory for this process: the store that
    owns the directory takes it, a store beside it in the same directory does not need to.
    A ``lazy`` store creates its first journal with its first append, not on ``load``.
    """

    def __init__(
        self,
        root: Path,
        fmt: JournalFormat[S],
        compact_bytes: int = DEFAULT_COMPACT_BYTES,
        *,
        lock: str | None = None,
        lazy: bool = False,
    ) -> None:
        self.root = root
        self.fmt = fmt
        self.compact_bytes = compact_bytes
        self.lock = lock
        self.lazy = lazy
        self.seq = 0
        self.fd: int | None = None
        self.lock_fd: int | None = None  # the directory's lock, held from load() to close()
        self.loaded = False  # from load() to close(): appends are taken (the journal may be lazy)
        self.size = 0  # bytes of the active journal known to be intact
        self.compact_at = compact_bytes
        self.broken: str | None = None

    @property
    def is_open(self) -> bool:
        return self.loaded

    def holds_writes(self) -> bool:
        """Whether the active journal holds writes a compaction would fold in, and can be written."""
        return self.fd is not None and self.size > len(self.fmt.journal_header) and self.broken is None

    # --- loading ---------------------------------------------------------------------

    def load(self) -> S:
        """Read the snapshot and replay the journals; leave the active journal open for appends."""
        self.broken = None
        self.compact_at = self.compact_bytes
        ensure_dir(self.root)
        if self.lock is not None and self.lock_fd is None:
            # Two processes on one directory (say two gateways with --log kafka://... and the
            # embedded coordinator) would interleave their journal writes and lose commits. The
            # lock is the process's: within one, a new store on the directory is how a restart
            # after a crash is exercised, and a process that dies leaves nothing locked.
            self.lock_fd = lock_dir(self.root, self.lock, "the coordinator's state", per_process=True)
        try:
            state = self._load()
        except BaseException:
            self.close()  # nothing half-open, and the directory free for a retry
            raise
        self.loaded = True
        return state

    def _load(self) -> S:
        # A snapshot whose compaction died before the rename (a directory there is not ours).
        leftover = self.root / f"{self.fmt.snapshot_name}.tmp"
        if leftover.is_file():
            leftover.unlink()
        state = self.fmt.new()
        snapshot = self.root / self.fmt.snapshot_name
        next_seq = self.fmt.read_snapshot(snapshot, state)
        if next_seq:  # there is a snapshot
            self.compact_at = max(self.compact_bytes, snapshot.stat().st_size)
        journals = self.fmt.list_journals(self.root)
        live = [(seq, path) for seq, path in journals if seq >= next_seq]
        for seq, path in journals:
            if seq < next_seq:  # already folded into the snapshot; a compaction died before deleting it
                path.unlink()
        for i, (seq, path) in enumerate(live):
            intact = self._replay(path, state)
            if i < len(live) - 1:
                continue
            if self.fmt.journal_version(path) in (None, self.fmt.version):
                self._open(seq, path, intact)
            else:
                # Written by an older release, which would misread what this one appends: the
                # writes go to a journal of this version after it (replayed after it).
                next_seq = seq + 1
        if self.fd is None:
            if self.lazy:
                self.seq = next_seq  # the journal to create with the first append
            else:
                self._create(next_seq)
        return state

    def _replay(self, path: Path, state: S) -> int:
        intact, size = self.fmt.replay_journal(path, state)
        if intact < size:
            log.warning(
                "%s journal %s: ignoring %d bytes of an incomplete last write",
                self.fmt.what,
                path,
                size - intact,
            )
        return intact

    def _open(self, seq: int, path: Path, intact: int) -> None:
        fd = open_file(path)
        try:
            if intact == 0:  # header torn: rewrite it
                os.ftruncate(fd, 0)
                write_all(fd, [self.fmt.journal_header], 0)
                intact = len(self.fmt.journal_header)
                os.fsync(fd)
            elif os.fstat(fd).st_size != intact:
                # Appending after the torn bytes would hide every later write from the next load.
                os.ftruncate(fd, intact)
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self.seq, self.fd, self.size = seq, fd, intact

    def _create(self, seq: int) -> None:
        # A failed compaction may have left this journal, empty: start it again.
        fd = create_file(self.root / self.fmt.journal_name(seq), truncate=True)
        try:
            write_all(fd, [self.fmt.journal_header], 0)
            os.fsync(fd)
            fsync_dir(self.root)
        except BaseException:
            os.close(fd)
            raise
        self.seq, self.fd, self.size = seq, fd, len(self.fmt.journal_header)

    # --- writing ---------------------------------------------------------------------

    def append(self, frame: bytes) -> None:
        """Append one write and make it durable, or leave the journal as it was and raise."""
        if self.broken is not None:
            raise OSError(errno.EIO, self.broken)
        if self.fd is None and self.loaded:  # a lazy store's first write
            self._create(self.seq)
        assert self.fd is not None
        try:
            write_all(self.fd, [frame], self.size)
            datasync(self.fd)
        except OSError:
            # Cut off whatever part of the frame made it, so later writes are not stranded behind it.
            try:
                os.ftruncate(self.fd, self.size)
            except OSError as exc:
                self.broken = (
                    f"the {self.fmt.what} journal takes no more writes after one it could not undo "
                    f"({os_reason(exc)}); restart the gateway to recover it"
                )
                log.error("%s: %s", self.root / self.fmt.journal_name(self.seq), exc)
            raise
        self.size += len(frame)

    def needs_compaction(self) -> bool:
        return self.size > self.compact_at

    def compact(self, state: S) -> None:
        """Fold everything into a new snapshot and start an empty journal.

        Steps: create journal N+1; write the snapshot (pointing at N+1) to a
        tmp file and rename it over the old one; delete journal N. Before the
        rename, a load replays N then the empty N+1; after it, the snapshot
        then N+1. Either way the same state.
        """
        old_seq, old_fd, old_size = self.seq, self.fd, self.size
        new_seq = old_seq + 1
        # Should this fail (disk full), the next attempt waits for another
        # threshold's worth of writes rather than repeating on every one.
        self.compact_at = old_size + self.compact_bytes
        self._create(new_seq)
        snapshot = self.fmt.snapshot_bytes(new_seq, state)
        try:
            replace_file(self.root / self.fmt.snapshot_name, snapshot)
        except BaseException:
            # The old snapshot still stands: keep appending to journal N (the
            # empty N+1 is harmless, it replays after N).
            assert self.fd is not None
            os.close(self.fd)
            self.seq, self.fd, self.size = old_seq, old_fd, old_size
            raise
        # From the rename on, the snapshot points at N+1: journal N is done with,
        # whatever happens next.
        self.compact_at = max(self.compact_bytes, len(snapshot))
        if old_fd is not None:
            os.close(old_fd)
        try:
            fsync_dir(self.root)
            # Only once the rename is durable: until then a power cut may bring
            # back the old snapshot, which needs journal N (and any older one
            # a failed compaction left behind).
            for seq, path in self.fmt.list_journals(self.root):
                if seq < new_seq:
                    path.unlink()
        except OSError as exc:  # the next load deletes them if the snapshot made it
            log.warning("%s compaction: could not retire journal %d: %s", self.fmt.what, old_seq, exc)

    def close(self) -> None:
        self.loaded = False
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.lock_fd is not None:
            os.close(self.lock_fd)  # releases the flock
            self.lock_fd = None


async def compact_on_stop(store: JournalStore[Any], state: object) -> None:
    """Compact ``store`` into ``state`` if its journal holds writes, then close it; a failed
    compaction is logged and loses nothing (the journal still holds every write)."""
    try:
        if store.holds_writes():
            await asyncio.to_thread(store.compact, state)
    except OSError as exc:
        log.warning("%s compaction on stop failed: %s", store.fmt.what, exc)
    finally:
        store.close()
