"""The bounded cache of sealed segments' open log files, one per ``EmbeddedLog``.

The active segment of each partition keeps its files open (appends, and reads
at the tail, need no lookup). A sealed segment holds no descriptor: it opens
its log file when read, through this cache, which keeps at most ``bound`` of
them open for the whole log and, past that, closes the least recently used.
So a topic of ten thousand sealed segments costs ``bound`` descriptors at most,
not ten thousand.

A segment pinned by a reader is never closed under it: when every candidate is
pinned the cache goes over its bound, and ``trim`` (called as the readers
unpin) brings it back.

Thread-safe: readers open and touch entries from worker threads while the event
loop seals, unpins and closes segments; every change to the table, and every
close of a descriptor in it, happens under one lock. Collaborator: ``Segment``
(through ``CachedFile``: its path, and whether a reader pins it).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Protocol

from ..fileio import open_file


class CachedFile(Protocol):
    """What the cache needs of a segment."""

    @property
    def log_path(self) -> Path: ...

    @property
    def pinned(self) -> bool: ...


class FdCache:
    """Open read-only descriptors of sealed segments, least recently used first, at most ``bound``."""

    def __init__(self, bound: int) -> None:
        if bound < 0:
            raise ValueError(f"the sealed-segment descriptor bound must be >= 0, got {bound}")
        self.bound = bound
        self._lock = threading.Lock()
        self._fds: OrderedDict[CachedFile, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._fds)

    def holds(self, seg: CachedFile) -> bool:
        return seg in self._fds

    @property
    def over(self) -> bool:
        """More open than the bound (readers pinned them all); read without the lock, a hint."""
        return len(self._fds) > self.bound

    @property
    def spare(self) -> int:
        """How many more descriptors the cache may open before it starts closing others."""
        return max(self.bound - len(self._fds), 0)

    def fd(self, seg: CachedFile) -> int:
        """The descriptor of ``seg``'s log file, opened if need be; ``seg`` must be pinned meanwhile."""
        with self._lock:
            fd = self._fds.get(seg)
            if fd is not None:
                self._fds.move_to_end(seg)
                return fd
            fd = open_file(seg.log_path, write=False)
            self._fds[seg] = fd
            self._evict()
            return fd

    def adopt(self, seg: CachedFile, fd: int) -> None:
        """Take over ``fd``, already open on ``seg`` (a segment sealed while a reader had it)."""
        with self._lock:
            assert seg not in self._fds, "a segment's descriptor is its own until adopted"
            self._fds[seg] = fd
            self._evict()

    def drop(self, seg: CachedFile) -> None:
        """Close ``seg``'s descriptor if the cache holds one (the segment is closed or deleted)."""
        with self._lock:
            fd = self._fds.pop(seg, None)
            if fd is not None:
                os.close(fd)

    def trim(self) -> None:
        """Close the least recently used unpinned descriptors until the bound holds again."""
        with self._lock:
            self._evict()

    def _evict(self) -> None:
        excess = len(self._fds) - self.bound
        if excess <= 0:
            return
        victims = []
        for seg in self._fds:  # oldest first
            if not seg.pinned:
                victims.append(seg)
                if len(victims) == excess:
                    break
        for seg in victims:
            os.close(self._fds.pop(seg))
