"""Synchronous, read-only access to the embedded coordinator's committed offsets, for other processes.

A Spark job (or any tool) can read a group's committed offsets while the
gateway commits and compacts: nothing is locked or written. The files are
those ``EmbeddedCoordinator`` keeps under ``<data_dir>/coordinator/`` (see
``offsets_format``): the snapshot, then every journal from the snapshot's next
sequence on. A commit still being appended (a frame cut short) is not there
yet, exactly as a restart would see it.

Compaction replaces the snapshot and then deletes the journals it folded in.
A read that overlaps one could pair the old snapshot with a journal list from
after the deletion, so the snapshot's identity is checked before and after the
journals are read, and the whole read is repeated when it changed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from service.errors import BackendError

from .offsets_format import (
    COORDINATOR_DIR,
    SNAPSHOT_NAME,
    Offsets,
    list_journals,
    read_snapshot,
    replay_journal,
)

__all__ = ["committed_offsets", "read_all_committed"]

# A compaction takes milliseconds; this many back-to-back ones during one read means something is wrong.
_ATTEMPTS: Final = 20

_Identity = tuple[int, int, int] | None  # (inode, size, mtime_ns) of the snapshot, None when absent


def read_all_committed(data_dir: Path) -> dict[str, Offsets]:
    """Every group's committed offsets in ``data_dir`` (empty when nothing was ever committed)."""
    root = Path(data_dir) / COORDINATOR_DIR
    if not root.is_dir():
        return {}
    for _ in range(_ATTEMPTS):
        before = _identity(root)
        try:
            offsets = _load(root)
        except FileNotFoundError:  # a journal retired by a compaction between listing and reading
            continue
        if _identity(root) == before:
            return offsets
    raise BackendError(f"the committed offsets in {root} kept changing while being read; retry")


def committed_offsets(data_dir: Path, group: str) -> Offsets:
    """The committed offsets of ``group`` (partitions without a commit are left out)."""
    return read_all_committed(data_dir).get(group, {})


def _identity(root: Path) -> _Identity:
    try:
        st = os.stat(root / SNAPSHOT_NAME)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _load(root: Path) -> dict[str, Offsets]:
    offsets: dict[str, Offsets] = {}
    next_seq = read_snapshot(root / SNAPSHOT_NAME, offsets)
    for seq, path in list_journals(root):
        if seq >= next_seq:
            replay_journal(path, offsets)
    return offsets
