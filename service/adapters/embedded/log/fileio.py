"""Low-level file helpers of the embedded log: durable writes and batch scanning.

Everything here is synchronous and meant to run in a worker thread (or in a
process that has no event loop, see ``reader``). ``iter_batches`` is the one
way the log walks a segment file: by recovery, by index rebuilds, by fetches
and by the cross-process reader, so they all agree on what a valid batch is.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .batch import HEADER_SIZE, LENGTH_PREFIX, BatchHeader, CorruptBatch, crc_ok, parse_header

DEFAULT_CHUNK: Final = 1 << 20
_OPEN_FLAGS: Final = os.O_CLOEXEC


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (created, renamed, removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _OPEN_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _OPEN_FLAGS, 0o644)
    try:
        write_all(fd, [data], 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_all(fd: int, bufs: Sequence[bytes], pos: int) -> int:
    """Write ``bufs`` back to back at ``pos``; return the bytes written (all of them or raise)."""
    total = sum(len(b) for b in bufs)
    done = os.pwritev(fd, bufs, pos)
    if done < total:
        # A short write (signal, quota edge): finish from a flat copy, rare enough to not care.
        rest = memoryview(b"".join(bufs))[done:]
        while rest:
            n = os.pwrite(fd, rest, pos + done)
            if n <= 0:
                raise OSError(f"short write at position {pos + done}")
            done += n
            rest = rest[n:]
    return total


def create_file(path: Path) -> int:
    """Create an empty file (failing if it exists) and return a read-write descriptor."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o644)


def open_file(path: Path, *, write: bool = True) -> int:
    return os.open(path, (os.O_RDWR if write else os.O_RDONLY) | _OPEN_FLAGS)


@dataclass(frozen=True, slots=True)
class BatchView:
    """One valid batch found in a file: its header and where its bytes are in ``buf``."""

    pos: int  # position of the batch in the file
    header: BatchHeader
    buf: bytes
    off: int  # position of the batch in ``buf``

    @property
    def end(self) -> int:
        """File position right after the batch."""
        return self.pos + self.header.size


class BatchScan:
    """Walks the batches of a segment file from ``pos`` up to ``end``, stopping at the first bad one.

    Iterate it for ``BatchView``s; afterwards ``valid_end`` is the file position
    after the last good batch and ``error`` says why the walk stopped early
    (None when it reached ``end`` cleanly). With ``next_offset`` set, every batch
    must continue the offsets densely. With ``verify`` the CRC of each batch is
    checked (recovery, fetch); header-only walks (timestamp seeks) skip it.
    """

    def __init__(
        self,
        fd: int,
        pos: int,
        end: int,
        *,
        next_offset: int | None = None,
        verify: bool = True,
        chunk: int = DEFAULT_CHUNK,
    ) -> None:
        self._fd = fd
        self._end = end
        self._verify = verify
        self._chunk = max(chunk, HEADER_SIZE)
        self.valid_end = pos
        self.next_offset = next_offset
        self.error: str | None = None

    def __iter__(self) -> Iterator[BatchView]:
        fd, end = self._fd, self._end
        pos = self.valid_end
        buf = b""
        buf_start = pos
        while pos < end:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(self._chunk, end - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < HEADER_SIZE:
                    self.error = f"torn batch header at position {pos}"
                    return
            try:
                header = parse_header(buf, off)
            except CorruptBatch as exc:
                self.error = f"{exc} at position {pos}"
                return
            size = LENGTH_PREFIX + header.length
            if pos + size > end:
                self.error = f"torn batch at position {pos} ({end - pos} of {size} bytes present)"
                return
            if off + size > len(buf):
                buf = os.pread(fd, max(size, min(self._chunk, end - pos)), pos)
                buf_start, off = pos, 0
                if len(buf) < size:
                    self.error = f"torn batch at position {pos}"
                    return
            if self.next_offset is not None and header.base_offset != self.next_offset:
                self.error = (
                    f"batch at position {pos} has base offset {header.base_offset}, "
                    f"expected {self.next_offset}"
                )
                return
            if self._verify and not crc_ok(buf, off, header):
                self.error = f"CRC mismatch in batch at position {pos} (offset {header.base_offset})"
                return
            # Advance before yielding, so a caller that stops early still sees consistent state.
            self.valid_end = pos + size
            self.next_offset = header.next_offset
            yield BatchView(pos, header, buf, off)
            pos += size


def read_header_at(fd: int, pos: int) -> BatchHeader | None:
    """The structurally valid batch header at ``pos``, or None."""
    raw = os.pread(fd, HEADER_SIZE, pos)
    try:
        return parse_header(raw)
    except CorruptBatch:
        return None
