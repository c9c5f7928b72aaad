"""One partition of the embedded log: segments, appends, group commit, visibility, waiters.

``Partition`` owns the segments of one directory. Appends are serialised by
an ``asyncio.Lock`` (the file write happens under it); durability is a group
commit: each writer, after releasing the lock, waits for an fsync that covers
its bytes, and one fsync in a thread serves every writer waiting at that
moment. Readers never take the lock: they get a ``PartitionView`` (the segment
list and how far each may be read, fixed when the view is taken) and read
files by position in a worker thread.

What readers may see is the *published* end. With ``flush="always"`` that is
the fsynced end, so a consumer can never see (and commit past) a record that a
crash could take back; with "interval" and "never" it is the written end.

Collaborators: ``Segment`` (files), ``TopicConfig`` (roll and retention
limits), ``FdCache`` (the log-wide cache of sealed segments' descriptors, in
``PartitionOptions``); ``EmbeddedLog`` routes calls here and runs fetch's
long-poll with ``changed()``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from service.core.models import RecordColumns, TopicPartition
from service.core.ports import FlushPolicy
from service.errors import BackendError, BackendUnavailable, TopicNotFound

from ..fileio import fsync_dir, lasting, os_reason, unavailable
from .batch import EncodedBatch
from .config import TopicConfig
from .fdcache import FdCache
from .segment import INDEX_SUFFIX, TIMEINDEX_SUFFIX, Segment, parse_segment_name

log = logging.getLogger(__name__)

T = TypeVar("T")

# Batches at least this big are written from a worker thread; smaller ones inline, where the
# thread hop would cost more than the write into the page cache.
THREAD_WRITE_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class PartitionOptions:
    """Log-wide settings, and the descriptor cache, every partition shares."""

    flush: FlushPolicy
    index_interval_bytes: int
    clock: Callable[[], float]
    fds: FdCache

    def now_ms(self) -> int:
        return int(self.clock() * 1000)


async def finish_in_thread(fn: Callable[..., T], *args: object) -> T:
    """Run ``fn`` in a thread and always wait for it, even if the caller is cancelled meanwhile.

    File writes run under the append lock: giving the lock up while a thread
    still writes would let the next writer write at a stale position.
    Cancellation is re-raised once the thread is done.
    """
    fut = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(fut)
            break
        except asyncio.CancelledError:
            if fut.done() and fut.cancelled():
                raise
            if fut.done():
                result = fut.result()
                break
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return result


@dataclass(frozen=True, slots=True)
class PartitionView:
    """A reader's fixed picture of a partition; safe to use from a worker thread while pinned."""

    segments: tuple[Segment, ...]
    limits: tuple[int, ...]  # bytes of each segment a reader may read
    high_watermark: int
    log_start_offset: int

    def pin(self) -> None:
        for s in self.segments:
            s.pin()

    def unpin(self) -> None:
        for s in self.segments:
            s.unpin()

    def read(
        self, offset: int, out: RecordColumns, *, budget: int, force_first: bool, most: int = -1
    ) -> tuple[int, bool]:
        """Append records from ``offset`` on to ``out``, at most ``most`` (-1: no bound but
        ``budget``); return (bytes used, budget exhausted)."""
        if offset < self.log_start_offset or offset >= self.high_watermark:
            return 0, False
        i = max(bisect_right([s.base_offset for s in self.segments], offset) - 1, 0)
        used = 0
        first = len(out)
        for seg, limit in zip(self.segments[i:], self.limits[i:], strict=True):
            remaining = max(budget - used, 0) if budget >= 0 else -1  # -1: no budget at all
            chunk = min(max(remaining, 64 * 1024), 16 * 1024 * 1024) if remaining >= 0 else 1 << 20
            n, hit = seg.read(
                offset,
                limit,
                out,
                budget=remaining,
                force_first=force_first and len(out) == first,
                chunk=chunk,
                most=most - (len(out) - first) if most >= 0 else -1,
            )
            used += n
            if hit:
                return used, True
        return used, False

    def find_timestamp(self, timestamp: int) -> int | None:
        for seg, limit in zip(self.segments, self.limits, strict=True):
            found = seg.find_timestamp(timestamp, limit)
            if found is not None:
                return found
        return None


class Partition:
    """The live state of one partition; every method runs on the event loop."""

    def __init__(
        self,
        tp: TopicPartition,
        directory: Path,
        segments: list[Segment],
        config: TopicConfig,
        options: PartitionOptions,
    ) -> None:
        self.tp = tp
        self.directory = directory
        self.config = config
        self._opts = options
        self._segments = segments
        active = segments[-1]
        self._next_offset = active.next_offset  # written
        self._written_pos = active.size  # bytes written to the active segment
        self._durable = self._next_offset  # covered by an fsync
        self._hw = self._next_offset  # published to readers
        self._visible_pos = active.size  # published bytes of the active segment
        self._lock = asyncio.Lock()
        self._sync_task: asyncio.Task[None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._failed: str | None = None  # why it stopped taking writes until a restart
        self._closed_error: Callable[[], Exception] = self._gone

    # --- opening (in a worker thread) ----------------------------------------------

    @classmethod
    def open(
        cls,
        tp: TopicPartition,
        directory: Path,
        config: TopicConfig,
        options: PartitionOptions,
        *,
        clean: bool,
    ) -> Partition:
        """Open (or create) the partition in ``directory``; ``clean`` skips the active segment's full scan."""
        directory.mkdir(parents=True, exist_ok=True)
        names = os.listdir(directory)
        bases = sorted(b for b in map(parse_segment_name, names) if b is not None)
        stems = {f"{b:020d}" for b in bases}
        for name in names:
            stem, _, _ = name.partition(".")
            stale_index = name.endswith((INDEX_SUFFIX, TIMEINDEX_SUFFIX)) and stem not in stems
            if stale_index or name.endswith(".tmp"):
                (directory / name).unlink(missing_ok=True)
        segments: list[Segment] = []
        try:
            if not bases:
                segments.append(Segment.create(directory, 0, options.index_interval_bytes, options.fds))
            for i, base in enumerate(bases):
                active = i == len(bases) - 1
                seg = Segment.open(
                    directory,
                    base,
                    options.index_interval_bytes,
                    options.fds,
                    active=active,
                    full_scan=active and not clean,
                )
                if segments and segments[-1].next_offset != base:
                    log.warning("%s: offsets %d..%d are missing", tp, segments[-1].next_offset, base - 1)
                segments.append(seg)
            if not clean:
                segments[-1].flush()  # what recovery kept is what readers will see: make it durable
        except BaseException:
            for seg in segments:
                seg.close()
            raise
        return cls(tp, directory, segments, config, options)

    # --- state --------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def dirty(self) -> bool:
        return self._durable < self._next_offset

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(self._segments)

    def view(self) -> PartitionView:
        self._check_open()  # a closed partition's descriptors are gone
        segs = tuple(self._segments)
        limits = (*(s.size for s in segs[:-1]), self._visible_pos)
        return PartitionView(segs, limits, self._hw, segs[0].base_offset)

    def changed(self) -> asyncio.Future[None]:
        """A future resolved at the next publish (or close): what a long-poll waits on."""
        if self._waiter is None:
            self._waiter = asyncio.get_running_loop().create_future()
        return self._waiter

    def _notify(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _publish(self, seg: Segment, pos: int, end: int) -> None:
        if seg is self._segments[-1] and pos > self._visible_pos:
            self._visible_pos = pos
        if end > self._hw:
            self._hw = end
            self._notify()

    def _gone(self) -> Exception:
        return TopicNotFound(f"Topic {self.tp.topic!r} was deleted.")

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    # --- appending ----------------------------------------------------------------

    async def append(self, batch: EncodedBatch) -> int:
        """Write ``batch`` and return its base offset once it is acknowledged per the flush policy."""
        async with self._lock:
            self._check_open()
            if self._failed is not None:
                raise self._stopped()
            active = self._segments[-1]
            if not active.fits(batch, self.config.segment_bytes) or self._aged(active):
                active = await self._roll()
            base = self._next_offset
            try:
                if batch.size >= THREAD_WRITE_BYTES:
                    new_size = await finish_in_thread(active.append, batch, base)
                else:
                    new_size = active.append(batch, base)
            except OSError as exc:
                if active.broken or lasting(exc):
                    # What follows the failed write would follow garbage, or cannot be written at all.
                    raise self._stop(f"a write that could not be undone ({os_reason(exc)})", exc) from exc
                raise unavailable(f"Cannot write to partition {self.tp}", exc) from exc
            self._next_offset = base + batch.count
            self._written_pos = new_size
            if self._opts.flush != "always":
                self._publish(active, new_size, self._next_offset)
        if self._opts.flush == "always":
            await self._sync_to(base + batch.count)
        return base

    def _stop(self, why: str, exc: OSError) -> BackendUnavailable:
        """Take no more writes until a restart, whose recovery alone can be trusted after ``why``."""
        if self._failed is None:
            self._failed = why
            log.error("%s: no more writes until a restart, after %s: %s", self.tp, why, exc)
        return self._stopped()

    def _stopped(self) -> BackendUnavailable:
        """What a write is told once the partition stopped: the cause, and that a restart is needed
        (no ``Retry-After``: a retry cannot cure it)."""
        return BackendUnavailable(
            f"Partition {self.tp} stopped taking writes after {self._failed}; "
            "restart the gateway to recover it.",
            retry_after=None,
        )

    @property
    def stopped(self) -> str | None:
        """Why this partition takes no more writes until a restart (None: it takes them)."""
        return self._failed

    def _aged(self, active: Segment) -> bool:
        first = active.first_append_time
        return first is not None and self._opts.now_ms() - first >= self.config.segment_ms

    async def _roll(self) -> Segment:
        """Seal the active segment (fsynced) and start a new one at the next offset.

        Its failures are the append's: a failed seal is a failed fsync, and a read-only
        filesystem stays so; both stop the partition. Another failure to create the new
        segment (no room, no descriptor) is answered as a retry.
        """
        old = self._segments[-1]
        try:
            await finish_in_thread(old.seal)
        except OSError as exc:
            why = (
                "a segment roll that could not be done"
                if lasting(exc)
                else "a failed fsync sealing a segment"
            )
            raise self._stop(f"{why} ({os_reason(exc)})", exc) from exc
        try:
            new = await finish_in_thread(
                Segment.create,
                self.directory,
                self._next_offset,
                self._opts.index_interval_bytes,
                self._opts.fds,
            )
        except OSError as exc:
            if lasting(exc):
                raise self._stop(f"a segment roll that could not be done ({os_reason(exc)})", exc) from exc
            raise unavailable(f"Cannot roll a new segment for {self.tp}", exc) from exc
        old.release_after_seal()  # sealed segments open their file when read, through the cache
        # The old segment is fully fsynced: durable and readable to its end.
        self._durable = max(self._durable, old.next_offset)
        self._segments = [*self._segments, new]
        self._written_pos = 0
        self._visible_pos = 0
        self._publish(new, 0, old.next_offset)
        log.debug("%s: rolled segment at offset %d", self.tp, new.base_offset)
        return new

    async def _sync_to(self, target: int) -> None:
        """Return once an fsync covers every offset below ``target`` (group commit)."""
        while self._durable < target:
            self._check_open()
            task = self._sync_task
            if task is None:
                task = self._sync_task = asyncio.get_running_loop().create_task(self._run_sync())
            try:
                await asyncio.shield(task)
            except OSError as exc:
                # After a failed fsync the kernel may have dropped the dirty pages and a later fsync
                # would "succeed" without them: only recovery at the next start can be trusted.
                raise self._stop(f"a failed fsync ({os_reason(exc)})", exc) from exc

    async def _run_sync(self) -> None:
        """One fsync of the active segment, covering everything written when it started."""
        try:
            seg = self._segments[-1]
            pos, end = self._written_pos, self._next_offset
            seg.pin()
            try:
                await asyncio.to_thread(seg.flush)
            finally:
                seg.unpin()
            self._durable = max(self._durable, end)
            if self._opts.flush == "always":
                self._publish(seg, pos, end)
        finally:
            self._sync_task = None

    async def flush(self) -> None:
        """fsync everything written so far (the interval flusher and ``close`` use it)."""
        if not self._closed:
            await self._sync_to(self._next_offset)

    # --- retention ------------------------------------------------------------------

    def expired_segments(self, now_ms: int) -> list[Segment]:
        """The oldest closed segments that retention.ms or retention.bytes lets go (never the active one)."""
        closed = self._segments[:-1]
        doomed: list[Segment] = []
        if self.config.retention_ms >= 0:
            horizon = now_ms - self.config.retention_ms
            for seg in closed:
                if seg.max_timestamp >= horizon:
                    break
                doomed.append(seg)
        if self.config.retention_bytes >= 0:
            total = sum(s.size for s in self._segments[len(doomed) :])
            for seg in closed[len(doomed) :]:
                if total - seg.size < self.config.retention_bytes:
                    break
                doomed.append(seg)
                total -= seg.size
        return doomed

    async def apply_retention(self) -> int:
        """Delete what ``expired_segments`` names; return how many segments went."""
        if self._closed:
            return 0
        doomed = self.expired_segments(self._opts.now_ms())
        if not doomed:
            return 0
        # Readers taking a view from now on no longer see them; pinned readers keep their descriptors.
        self._segments = self._segments[len(doomed) :]

        def remove() -> None:
            for seg in doomed:
                seg.delete_files()
            fsync_dir(self.directory)

        for seg in doomed:
            seg.close()
        try:
            await finish_in_thread(remove)
        except OSError as exc:
            raise BackendError(f"Retention could not remove segments of {self.tp}: {os_reason(exc)}") from exc
        log.info(
            "%s: retention removed %d segment(s); log starts at %d",
            self.tp,
            len(doomed),
            self.log_start_offset,
        )
        return len(doomed)

    # --- closing --------------------------------------------------------------------

    async def close(self, *, flush: bool, error: Callable[[], Exception] | None = None) -> None:
        """Stop taking appends, optionally make everything durable, release files, wake waiters.

        ``error`` builds what later calls raise (default: the topic was deleted).
        """
        async with self._lock:
            if self._closed:
                return
            try:
                if flush:
                    await self._sync_to(self._next_offset)
                    await finish_in_thread(self._segments[-1].sync_all)
            finally:
                self._closed = True
                if error is not None:
                    self._closed_error = error
                for seg in self._segments:
                    seg.close()
                self._notify()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def fds_to_open(self) -> int:
        """Descriptors this partition does not hold yet and will once written to (``fds``)."""
        return 0 if self._closed else self._segments[-1].fds_to_open
