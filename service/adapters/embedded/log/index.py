"""Sparse indexes of one segment: offset -> file position, and timestamp -> offset.

Both live in memory as sorted lists (looked up with ``bisect``, also from
reader threads: appends only ever add at the end) and are mirrored to a file
of fixed-size big-endian entries:

- ``.index``: (relative_offset uint32, position uint32), 8 bytes. The first batch of a
  segment is always indexed, then the next batch starting at least
  ``index_interval_bytes`` after the previous entry.
- ``.timeindex``: (timestamp int64, relative_offset uint32), 12 bytes. Written at the same
  points when the segment's largest timestamp so far grew, and once more when the segment
  is sealed; an entry (T, r) says every record up to the end of the batch at r has a
  timestamp <= T, so a seek for ``ts`` may start at the last entry with T < ts.

Index files are never trusted blindly: ``OffsetIndex.load``/``TimeIndex.load``
return None for a file that is not a well-formed, monotonic index, and the
segment rebuilds it from the log. Rebuilt files replace the old ones atomically.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Final

from ..fileio import atomic_write, open_file

OFFSET_ENTRY: Final = struct.Struct(">II")
TIME_ENTRY: Final = struct.Struct(">qI")
MAX_RELATIVE: Final = 2**32 - 1


class _IndexFile:
    """The append-only file behind an index; ``fd`` is None once sealed (read-only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def _append(self, raw: bytes) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        os.write(self._fd, raw)

    def _rewrite(self, raw: bytes) -> None:
        self.close()
        atomic_write(self.path, raw)

    @property
    def is_open(self) -> bool:
        """Whether the file holds a descriptor (opened by the first append, closed at seal)."""
        return self._fd is not None

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _read(path: Path) -> bytes | None:
    try:
        fd = open_file(path, write=False)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


class OffsetIndex(_IndexFile):
    """Relative offset -> position of a batch starting at that offset."""

    def __init__(self, path: Path, rels: list[int] | None = None, positions: list[int] | None = None) -> None:
        super().__init__(path)
        self.rels: list[int] = rels or []
        self.positions: list[int] = positions or []

    @classmethod
    def load(cls, path: Path, log_size: int) -> OffsetIndex | None:
        """The index in ``path`` if well formed for a log of ``log_size`` bytes, else None."""
        raw = _read(path)
        if raw is None or len(raw) % OFFSET_ENTRY.size:
            return None
        rels: list[int] = []
        positions: list[int] = []
        prev_rel = prev_pos = -1
        for rel, pos in OFFSET_ENTRY.iter_unpack(raw):
            if rel <= prev_rel or pos <= prev_pos or pos >= log_size:
                return None
            rels.append(rel)
            positions.append(pos)
            prev_rel, prev_pos = rel, pos
        if log_size and (not rels or rels[0] != 0 or positions[0] != 0):
            return None  # a non-empty segment always indexes its first batch
        return cls(path, rels, positions)

    def __len__(self) -> int:
        return len(self.rels)

    @property
    def last(self) -> tuple[int, int]:
        """(relative offset, position) of the last entry; (0, 0) when empty."""
        return (self.rels[-1], self.positions[-1]) if self.rels else (0, 0)

    def append(self, rel: int, pos: int) -> None:
        self._append(OFFSET_ENTRY.pack(rel, pos))
        # Reader threads bisect ``rels`` then index ``positions``: fill the latter first.
        self.positions.append(pos)
        self.rels.append(rel)

    def lookup(self, rel: int) -> tuple[int, int]:
        """The last entry at or before ``rel``: where a scan for ``rel`` starts."""
        i = bisect_right(self.rels, rel) - 1
        if i < 0:
            return 0, 0
        return self.rels[i], self.positions[i]

    def replace(self, rels: list[int], positions: list[int]) -> None:
        """Swap in rebuilt entries, durably (the file is rewritten atomically)."""
        self._rewrite(b"".join(OFFSET_ENTRY.pack(r, p) for r, p in zip(rels, positions, strict=True)))
        self.rels = rels
        self.positions = positions


class TimeIndex(_IndexFile):
    """Largest timestamp so far -> relative offset of the batch where it was reached."""

    def __init__(self, path: Path, stamps: list[int] | None = None, rels: list[int] | None = None) -> None:
        super().__init__(path)
        self.stamps: list[int] = stamps or []
        self.rels: list[int] = rels or []

    @classmethod
    def load(cls, path: Path, next_rel: int) -> TimeIndex | None:
        """The index in ``path`` if well formed for a segment of ``next_rel`` records, else None."""
        raw = _read(path)
        if raw is None or len(raw) % TIME_ENTRY.size:
            return None
        stamps: list[int] = []
        rels: list[int] = []
        prev_ts = None
        prev_rel = -1
        for ts, rel in TIME_ENTRY.iter_unpack(raw):
            if (prev_ts is not None and ts <= prev_ts) or rel < prev_rel or rel >= next_rel:
                return None
            stamps.append(ts)
            rels.append(rel)
            prev_ts, prev_rel = ts, rel
        return cls(path, stamps, rels)

    def __len__(self) -> int:
        return len(self.stamps)

    @property
    def last_timestamp(self) -> int | None:
        return self.stamps[-1] if self.stamps else None

    def maybe_append(self, ts: int, rel: int) -> None:
        """Record that the max timestamp is ``ts`` as of the batch at ``rel``, if it grew."""
        if self.stamps and ts <= self.stamps[-1]:
            return
        self._append(TIME_ENTRY.pack(ts, rel))
        # Reader threads bisect ``stamps`` then index ``rels``: fill the latter first.
        self.rels.append(rel)
        self.stamps.append(ts)

    def lookup(self, ts: int) -> int:
        """Relative offset of a batch from which a scan for the first record >= ``ts`` may start."""
        i = bisect_left(self.stamps, ts) - 1
        return self.rels[i] if i >= 0 else 0

    def replace(self, stamps: list[int], rels: list[int]) -> None:
        self._rewrite(b"".join(TIME_ENTRY.pack(t, r) for t, r in zip(stamps, rels, strict=True)))
        self.stamps = stamps
        self.rels = rels
