"""Walking the batches of a segment file: the one way the embedded log reads one.

Synchronous, meant to run in a worker thread (or in a process that has no
event loop, see ``reader``). ``BatchScan`` is used by recovery, by index
rebuilds, by fetches and by the cross-process reader, so they all agree on what
a valid batch is. The durable-write helpers are in ``embedded.fileio``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from service.errors import NewerFormat

from .batch import (
    HEADER_SIZE,
    LENGTH_PREFIX,
    MAGIC,
    BatchHeader,
    CorruptBatch,
    NewerBatch,
    crc_ok,
    parse_header,
)

DEFAULT_CHUNK: Final = 1 << 20


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
            except NewerBatch as exc:
                refuse_if_newer(fd, pos, exc)
                self.error = f"{exc} at position {pos}"
                return
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
    except NewerBatch as exc:
        refuse_if_newer(fd, pos, exc)
        return None
    except CorruptBatch:
        return None


def refuse_if_newer(fd: int, pos: int, exc: NewerBatch) -> None:
    """Raise ``NewerFormat`` if the batch at ``pos``, of a magic above this release's, is whole
    and its CRC holds: a newer release wrote it, and it must not be cut as a torn tail."""
    whole = os.pread(fd, LENGTH_PREFIX + exc.header.length, pos)
    if crc_ok(whole, 0, exc.header):
        raise NewerFormat(f"the record batch at position {pos}", exc.magic, MAGIC) from None
