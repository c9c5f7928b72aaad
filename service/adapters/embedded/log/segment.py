"""One segment of a partition: a ``.log`` file of batches and its two indexes.

A ``Segment`` is synchronous and knows nothing of asyncio: ``Partition`` calls
it under its append lock (``append``, ``seal``) or from reader threads
(``read``, ``find_timestamp``), and opens it at start (``open``, which is where
recovery happens). Collaborators: ``batch`` (codec), ``scan`` (batch walks),
``embedded.fileio`` (durable writes), ``index`` (offset and time indexes),
``fdcache`` (descriptors of sealed segments), ``recovery`` (what a file
holds after a restart).

Only the active segment keeps descriptors of its own: its log file, and its
index files once written to. A sealed segment opens its log file when read,
through the ``FdCache`` the whole log shares, which closes the least recently
used ones past its bound. A pinned segment's descriptor is never closed: not by
the cache, not by ``seal``, not by ``close`` (a segment removed by retention or
topic deletion while a reader holds it stays readable to that reader, and is
closed when the last reader unpins). So no reader ever reads through a closed
(or, worse, reused) descriptor.

Threads: pins, ``close`` and ``release_after_seal`` run on the event loop;
``read`` and ``find_timestamp`` in worker threads, under a pin taken on the loop.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from service.core.models import RecordColumns
from service.errors import NewerFormat

from ..fileio import create_file, fsync_dir, open_file, write_all
from . import recovery
from .batch import EncodedBatch, crc_ok, decode_records, first_at_or_after
from .fdcache import FdCache
from .index import MAX_RELATIVE, OffsetIndex, TimeIndex
from .scan import BatchScan, read_header_at

log = logging.getLogger(__name__)

NO_TIMESTAMP: Final = recovery.NO_TIMESTAMP
LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIMEINDEX_SUFFIX: Final = ".timeindex"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def parse_segment_name(filename: str) -> int | None:
    """Base offset of a ``<20 digits>.log`` file name, else None."""
    stem, dot, suffix = filename.partition(".")
    if dot and "." + suffix == LOG_SUFFIX and len(stem) == 20 and stem.isdigit() and stem.isascii():
        return int(stem)
    return None


class Segment:
    """A segment file, its in-memory indexes, and what the partition needs to know about it."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        fd: int,
        index: OffsetIndex,
        time_index: TimeIndex,
        index_interval: int,
        fds: FdCache,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        # Set while the segment is active (and until ``release_after_seal``); a sealed one's is in ``_fds``.
        self._fd: int | None = fd
        self._fds = fds
        self.index = index
        self.time_index = time_index
        self._interval = index_interval
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.first_append_time: int | None = None  # drives roll by segment.ms
        self.sealed = False
        self.broken = False  # a failed write left bytes we could not truncate
        self._last_rel = 0
        self._since_index = 0
        self._pins = 0
        self._doomed = False
        self._closed = False

    # --- paths -----------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.directory / (segment_name(self.base_offset) + LOG_SUFFIX)

    @staticmethod
    def paths(directory: Path, base_offset: int) -> tuple[Path, Path, Path]:
        stem = segment_name(base_offset)
        return (
            directory / (stem + LOG_SUFFIX),
            directory / (stem + INDEX_SUFFIX),
            directory / (stem + TIMEINDEX_SUFFIX),
        )

    # --- opening and recovery --------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, index_interval: int, fds: FdCache) -> Segment:
        """A new, empty (active) segment; its directory entry is made durable."""
        log_path, index_path, time_path = cls.paths(directory, base_offset)
        for stale in (index_path, time_path):  # left by a crash between their creation and the log's
            stale.unlink(missing_ok=True)
        fd = create_file(log_path)
        fsync_dir(directory)
        return cls(
            directory, base_offset, fd, OffsetIndex(index_path), TimeIndex(time_path), index_interval, fds
        )

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        index_interval: int,
        fds: FdCache,
        *,
        active: bool,
        full_scan: bool,
    ) -> Segment:
        """Open an existing segment, repairing what a crash can leave behind.

        Sound indexes are trusted, and only the batches after the last offset
        index entry are read (so a healthy log opens fast). ``full_scan``
        (the active segment after an unclean shutdown) re-reads every batch.
        A damaged index is rebuilt; a torn or corrupt tail of the active segment
        is truncated away. A closed segment's descriptor is closed again once
        it is checked: it is opened when read.
        """
        log_path, index_path, time_path = cls.paths(directory, base_offset)
        fd = open_file(log_path)
        try:
            file_size = os.fstat(fd).st_size
            seg = cls(
                directory,
                base_offset,
                fd,
                OffsetIndex(index_path),
                TimeIndex(time_path),
                index_interval,
                fds,
            )
            if file_size == 0:
                seg._reset_indexes_if_present()
            elif full_scan or not seg._open_with_index(file_size):
                seg._rebuild(file_size, sealed=not active)
            if seg.size < file_size:
                if active:
                    log.warning(
                        "%s: truncating %d bytes of torn/corrupt tail", log_path, file_size - seg.size
                    )
                    os.ftruncate(fd, seg.size)
                    os.fsync(fd)
                else:
                    log.error(
                        "%s: %d unreadable bytes at the end of a closed segment",
                        log_path,
                        file_size - seg.size,
                    )
            if seg.size:
                first = read_header_at(fd, 0)
                seg.first_append_time = first.append_time if first else None
            seg.sealed = not active
        except NewerFormat as exc:
            os.close(fd)
            raise NewerFormat(f"{exc.what} of {log_path}", exc.found, exc.reads) from None
        except BaseException:
            os.close(fd)
            raise
        if not active:
            seg._fd = None
            os.close(fd)
        return seg

    def _reset_indexes_if_present(self) -> None:
        for idx in (self.index, self.time_index):
            if idx.path.exists() and idx.path.stat().st_size:
                idx.path.unlink()

    def _open_with_index(self, file_size: int) -> bool:
        """Take the state the index files describe, if they are sound; False if they must be rebuilt."""
        found = recovery.from_indexes(
            self._log_fd(), self.base_offset, self.index.path, self.time_index.path, file_size
        )
        if found is None:
            return False
        self._apply(found)
        return True

    def _rebuild(self, file_size: int, *, sealed: bool) -> None:
        """Re-read every batch, rebuild both index files, and find where the valid data ends."""
        self._apply(
            recovery.rebuild(
                self._log_fd(),
                self.log_path,
                self.base_offset,
                self.index,
                self.time_index,
                self._interval,
                file_size,
                sealed=sealed,
            )
        )

    def _apply(self, found: recovery.Found) -> None:
        self.index = found.index
        self.time_index = found.time_index
        self.size = found.size
        self.next_offset = found.next_offset
        self.max_timestamp = found.max_timestamp
        self._last_rel = found.last_rel
        self._since_index = found.since_index

    # --- writing (under the partition's append lock) ---------------------------

    def fits(self, batch: EncodedBatch, segment_bytes: int) -> bool:
        """Whether ``batch`` may go into this segment (an empty segment takes any batch)."""
        if self.size == 0:
            return True
        if self.size + batch.size > segment_bytes:
            return False
        return self.next_offset + batch.count - self.base_offset <= MAX_RELATIVE

    def append(self, batch: EncodedBatch, base_offset: int) -> int:
        """Write ``batch`` with offsets from ``base_offset``; return the new size of the file."""
        if self.broken:
            raise OSError(errno.EIO, "an earlier failed write could not be undone")
        pos = self.size
        fd = self._own_fd()
        try:
            write_all(fd, [batch.head(base_offset), batch.body], pos)
        except BaseException:
            # Never leave half a batch behind: the next append would follow garbage.
            try:
                os.ftruncate(fd, pos)
            except OSError:
                self.broken = True
            raise
        self.size = pos + batch.size
        self.next_offset = base_offset + batch.count
        rel = base_offset - self.base_offset
        self._last_rel = rel
        if self.first_append_time is None:
            self.first_append_time = batch.append_time
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp = batch.max_timestamp
        if not len(self.index) or self._since_index >= self._interval:
            try:
                self.index.append(rel, pos)
                self.time_index.maybe_append(self.max_timestamp, rel)
            except OSError as exc:  # indexes are rebuildable: a missing entry only slows seeks
                log.warning("%s: index write failed: %s", self.log_path, exc)
            self._since_index = 0
        self._since_index += batch.size
        return self.size

    def flush(self) -> None:
        """fsync the log file (the indexes are rebuilt after a crash, so they need not be).

        The group commit calls it outside the append lock, under a pin: the segment may have
        been sealed meanwhile, and its descriptor handed to the cache.
        """
        os.fsync(self._log_fd())

    def sync_all(self) -> None:
        """fsync the log and its index files (clean shutdown: the next start trusts them)."""
        os.fsync(self._own_fd())
        self.index.flush()
        self.time_index.flush()

    def seal(self) -> None:
        """Make the segment read-only: final time index entry, everything fsynced, index files closed.

        Runs in a worker thread while readers may pin the segment: its log
        descriptor stays open until ``release_after_seal``, back on the loop.
        """
        if self.sealed:
            return
        if self.size:
            try:
                self.time_index.maybe_append(self.max_timestamp, self._last_rel)
            except OSError as exc:
                log.warning("%s: time index write failed: %s", self.log_path, exc)
        os.fsync(self._own_fd())
        self.index.flush()
        self.time_index.flush()
        self.index.close()
        self.time_index.close()
        self.sealed = True

    def release_after_seal(self) -> None:
        """On the loop, once sealed: give up the descriptor the active segment kept.

        Closed now if no reader pins the segment (it opens again when read), else
        handed to the cache, which closes it once it is unpinned and least recently used.
        """
        fd = self._fd
        if fd is None or not self.sealed:
            return
        if self._pins:
            # Into the cache before ``_fd`` is cleared: a reader finding None asks the cache, and
            # must get this descriptor, not a second one.
            self._fds.adopt(self, fd)
            self._fd = None
        else:
            self._fd = None
            os.close(fd)

    # --- reading (from reader threads, up to a limit published by the partition) --

    def read(
        self,
        min_offset: int,
        limit: int,
        out: RecordColumns,
        *,
        budget: int,
        force_first: bool,
        chunk: int,
        most: int = -1,
    ) -> tuple[int, bool]:
        """Append records with offset >= ``min_offset`` found before ``limit``, at most ``most``
        of them (-1: no bound but ``budget``); (bytes, budget hit)."""
        used = 0
        first = len(out)
        if limit <= 0:
            return 0, False  # an empty active segment: no descriptor needed
        for scan in self._scans(max(min_offset - self.base_offset, 0), limit, verify=True, chunk=chunk):
            for view in scan:
                if view.header.next_offset <= min_offset:
                    continue
                n, hit = decode_records(
                    view.buf,
                    view.off,
                    view.header,
                    out,
                    min_offset=min_offset,
                    budget=max(budget - used, 0) if budget >= 0 else -1,
                    force_first=force_first and len(out) == first,
                    most=most - (len(out) - first) if most >= 0 else -1,
                )
                used += n
                if hit:
                    return used, True
        return used, False

    def _scans(self, rel: int, limit: int, *, verify: bool, chunk: int = 1 << 16) -> Iterator[BatchScan]:
        """A walk from the index entry for ``rel``; if that entry proves wrong, one from the start.

        Only the last index entry is checked at open (checking all would slow
        startup), so a damaged middle entry is caught here instead.
        """
        start_rel, pos = self.index.lookup(rel)
        fd = self._log_fd()
        scan = BatchScan(fd, pos, limit, next_offset=self.base_offset + start_rel, verify=verify, chunk=chunk)
        yield scan
        if scan.error and scan.valid_end == pos and pos:
            log.warning("%s: index entry for offset %d is wrong; scanning from the start", self.log_path, rel)
            scan = BatchScan(fd, 0, limit, next_offset=self.base_offset, verify=verify, chunk=chunk)
            yield scan
        if scan.error:
            log.error("%s: %s; records after it cannot be read", self.log_path, scan.error)

    def find_timestamp(self, timestamp: int, limit: int) -> int | None:
        """Offset of the first record with a timestamp >= ``timestamp`` before ``limit``, else None."""
        if self.max_timestamp < timestamp:
            return None
        for scan in self._scans(self.time_index.lookup(timestamp), limit, verify=False):
            for view in scan:
                if view.header.max_timestamp < timestamp:
                    continue
                if not crc_ok(view.buf, view.off, view.header):
                    log.error("%s: CRC mismatch at offset %d", self.log_path, view.header.base_offset)
                    return None
                found = first_at_or_after(view.buf, view.off, view.header, timestamp)
                if found is not None:
                    return found
        return None

    # --- descriptors -----------------------------------------------------------

    @property
    def fds_to_open(self) -> int:
        """How many more descriptors this segment opens while it is the active one: its two
        indexes are opened by its first append (the log file is open from the start)."""
        if self.sealed or self._closed:
            return 0
        return (not self.index.is_open) + (not self.time_index.is_open)

    def _log_fd(self) -> int:
        """The log file's descriptor, for the appender or a pinned reader.

        The active segment's own, with no lock (the hot path: reads at the
        tail); a sealed one's from the cache, opened if need be.
        """
        fd = self._fd
        return fd if fd is not None else self._fds.fd(self)

    def _own_fd(self) -> int:
        """The read-write descriptor only the active segment has (appends, fsyncs, seal)."""
        fd = self._fd
        if fd is None:
            raise OSError(f"{self.log_path}: the segment is sealed or closed")
        return fd

    # --- lifetime --------------------------------------------------------------

    @property
    def pinned(self) -> bool:
        return self._pins > 0

    def pin(self) -> None:
        self._pins += 1

    def unpin(self) -> None:
        self._pins -= 1
        if self._pins:
            return
        if self._doomed:
            self._close_now()
        elif self._fds.over and self._fds.holds(self):  # readers kept the cache over its bound
            self._fds.trim()

    def close(self) -> None:
        """Release the descriptors now, or when the last reader unpins."""
        self._doomed = True
        if self._pins == 0:
            self._close_now()
        elif self._fd is None:
            # Its files may be deleted before a reader that pins it gets to open them: open now.
            try:
                self._fds.fd(self)
            except OSError as exc:
                log.warning("%s: cannot keep it open for its readers: %s", self.log_path, exc)

    def _close_now(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.index.close()
        self.time_index.close()
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        self._fds.drop(self)

    def delete_files(self) -> None:
        """Remove the segment's files, log first (index files alone are cleaned up at open)."""
        for path in self.paths(self.directory, self.base_offset):
            path.unlink(missing_ok=True)
