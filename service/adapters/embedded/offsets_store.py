"""``OffsetStore``: the journal and snapshot files of the embedded coordinator's committed offsets.

The layout and encoding are ``offsets_format``'s; this module keeps the files
consistent through commits, crashes and compactions. Loading reads the
snapshot, replays the journals from its next seq on, and truncates a torn tail
before anything is appended again. Each commit call is one frame, appended and
fdatasync'ed: all or nothing.

When the active journal grows past ``compact_bytes`` (and on the
coordinator's ``stop()``), it is compacted: a new empty journal is created
first, then the snapshot (pointing at it) replaces the old one, then the old
journal is deleted. A crash between any two steps leaves files that load to
the same offsets.

Synchronous: every method runs in a worker thread, one at a time (the
coordinator serializes them under its lock). One process owns a directory.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from .fileio import create_file, datasync, ensure_dir, fsync_dir, lock_dir, open_file, replace_file, write_all
from .offsets_format import (
    JOURNAL_HEADER,
    LOCK_NAME,
    SNAPSHOT_NAME,
    Offsets,
    journal_name,
    list_journals,
    read_snapshot,
    replay_journal,
    snapshot_bytes,
)

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_COMPACT_BYTES", "OffsetStore"]

DEFAULT_COMPACT_BYTES: Final = 4 << 20


class OffsetStore:
    """The files of committed offsets under ``root``; ``EmbeddedCoordinator`` keeps the offsets in memory."""

    def __init__(self, root: Path, compact_bytes: int = DEFAULT_COMPACT_BYTES) -> None:
        self.root = root
        self.compact_bytes = compact_bytes
        self.seq = 0
        self.fd: int | None = None
        self.lock_fd: int | None = None  # the directory's flock, held from load() to close()
        self.size = 0  # bytes of the active journal known to be intact
        self.compact_at = compact_bytes
        self.broken: str | None = None

    @property
    def is_open(self) -> bool:
        return self.fd is not None

    def holds_commits(self) -> bool:
        """Whether the active journal holds commits a compaction would fold in, and can be written."""
        return self.size > len(JOURNAL_HEADER) and self.broken is None

    # --- loading ---------------------------------------------------------------------

    def load(self) -> dict[str, Offsets]:
        """Read the snapshot and replay the journals; leave the active journal open for appends."""
        self.broken = None
        self.compact_at = self.compact_bytes
        ensure_dir(self.root)
        if self.lock_fd is None:
            # Two processes on one directory (say two gateways with --log kafka://... and the
            # embedded coordinator) would interleave their journal writes and lose commits. The
            # lock is the process's: within one, a new store on the directory is how a restart
            # after a crash is exercised, and a process that dies leaves nothing locked.
            self.lock_fd = lock_dir(self.root, LOCK_NAME, "the committed offsets", per_process=True)
        try:
            return self._load()
        except BaseException:
            self.close()  # nothing half-open, and the directory free for a retry
            raise

    def _load(self) -> dict[str, Offsets]:
        for leftover in self.root.glob("*.tmp"):  # a snapshot whose compaction died before the rename
            if leftover.is_file():
                leftover.unlink()
        offsets: dict[str, Offsets] = {}
        next_seq = read_snapshot(self.root / SNAPSHOT_NAME, offsets)
        journals = list_journals(self.root)
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

    def _replay(self, path: Path, offsets: dict[str, Offsets]) -> int:
        intact, size = replay_journal(path, offsets)
        if intact < size:
            log.warning(
                "offsets journal %s: ignoring %d bytes of an incomplete last commit", path, size - intact
            )
        return intact

    def _open(self, seq: int, path: Path, intact: int) -> None:
        fd = open_file(path)
        try:
            if intact == 0:  # header torn: rewrite it
                os.ftruncate(fd, 0)
                write_all(fd, [JOURNAL_HEADER], 0)
                intact = len(JOURNAL_HEADER)
                os.fsync(fd)
            elif os.fstat(fd).st_size != intact:
                # Appending after the torn bytes would hide every later commit from the next load.
                os.ftruncate(fd, intact)
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self.seq, self.fd, self.size = seq, fd, intact

    def _create(self, seq: int) -> None:
        # A failed compaction may have left this journal, empty: start it again.
        fd = create_file(self.root / journal_name(seq), truncate=True)
        try:
            write_all(fd, [JOURNAL_HEADER], 0)
            os.fsync(fd)
            fsync_dir(self.root)
        except BaseException:
            os.close(fd)
            raise
        self.seq, self.fd, self.size = seq, fd, len(JOURNAL_HEADER)

    # --- writing ---------------------------------------------------------------------

    def append(self, frame: bytes) -> None:
        """Append one commit and make it durable, or leave the journal as it was and raise."""
        if self.broken is not None:
            raise OSError(self.broken)
        assert self.fd is not None
        try:
            write_all(self.fd, [frame], self.size)
            datasync(self.fd)
        except OSError:
            # Cut off whatever part of the frame made it, so later commits are not stranded behind it.
            try:
                os.ftruncate(self.fd, self.size)
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
        try:
            replace_file(self.root / SNAPSHOT_NAME, snapshot_bytes(new_seq, offsets))
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
            fsync_dir(self.root)
            # Only once the rename is durable: until then a power cut may bring
            # back the old snapshot, which needs journal N (and any older one
            # a failed compaction left behind).
            for seq, path in list_journals(self.root):
                if seq < new_seq:
                    path.unlink()
        except OSError as exc:  # the next load deletes them if the snapshot made it
            log.warning("offsets compaction: could not retire journal %d: %s", old_seq, exc)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.lock_fd is not None:
            os.close(self.lock_fd)  # releases the flock
            self.lock_fd = None
