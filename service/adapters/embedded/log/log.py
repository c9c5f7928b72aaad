"""``EmbeddedLog``: the ``Log`` port over segment files in a local data directory.

The façade: it validates input, maps topics and partitions to ``Partition``
objects, runs fetch's long-poll, owns the interval flusher, and translates
codec and OS errors into ``service.errors``. Collaborators: ``DataDir``
(directory layout, topic metadata), ``topics`` (opening them), ``Partition``
(appends, durability, retention), ``batch`` (encoding), ``config`` (names and
topic configs), ``reads`` (a fetch's read of its partitions, in a worker
thread), ``FdCache`` (the one bounded cache of sealed segments' descriptors,
which every partition shares) and ``fds`` (the descriptor budget of new
partitions).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from service.core.models import (
    Broker,
    NewRecord,
    PartitionData,
    PartitionInfo,
    RecordColumns,
    TopicInfo,
    TopicPartition,
)
from service.core.ports import FlushPolicy
from service.core.rules import check_partition_growth, check_topic
from service.errors import (
    BackendError,
    BackendUnavailable,
    GatewayError,
    InvalidPayload,
    PartitionNotFound,
    PayloadTooLarge,
    TopicExists,
    TopicNotFound,
)

from ...lifecycle import Lifecycle
from ...tasks import uncancellable
from ..fileio import os_reason, unavailable
from .batch import BatchError, RecordTooLarge, encode_batch
from .config import (
    MIN_SEGMENT_BYTES,
    LogDefaults,
    TopicConfig,
    check_partitions_and_replication,
)
from .fdcache import FdCache
from .fds import SEALED_FDS, check_room
from .metadata import STARTS, DataDir, TopicMeta
from .partition import Partition, PartitionOptions, PartitionView, finish_in_thread
from .reads import read_views
from .topics import Topic, open_all, open_partitions

log = logging.getLogger(__name__)

T = TypeVar("T")
MiB = 1024 * 1024
DAY_MS = 24 * 3600 * 1000


class EmbeddedLog(Lifecycle):
    """Topics and partitions as segment files under ``data_dir`` (see ``metadata`` for the layout).

    ``start()`` locks the directory and opens (recovering if needed) every
    partition; ``stop()`` flushes and closes everything and is idempotent.
    Also usable as ``async with EmbeddedLog(path) as log:``. Not restartable:
    once stopped, it stays stopped (a new instance opens the directory again).

    ``sealed_fds`` bounds the descriptors of sealed segments kept open for
    reads, all partitions together; ``connection_fds`` are kept for the client
    connections the server may hold (``max_connections``): partitions that
    would take them are refused. ``min_segment_bytes`` is the least
    ``segment.bytes`` a topic may set (1 MiB, as in Kafka 4); tests lower it to
    roll segments after a few records.
    """

    restartable = False

    def __init__(
        self,
        data_dir: Path,
        *,
        flush: FlushPolicy = "always",
        flush_interval_ms: int = 1000,
        segment_bytes: int = 64 * MiB,
        segment_ms: int = 7 * DAY_MS,
        retention_ms: int = 7 * DAY_MS,
        retention_bytes: int = -1,
        index_interval_bytes: int = 4096,
        sealed_fds: int = SEALED_FDS,
        connection_fds: int = 0,
        min_segment_bytes: int = MIN_SEGMENT_BYTES,
        clock: Callable[[], float] = time.time,
        advertised_host: str = "localhost",
        advertised_port: int = 8082,
    ) -> None:
        if flush not in ("always", "interval", "never"):
            raise ValueError(f"flush must be 'always', 'interval' or 'never', got {flush!r}")
        if flush_interval_ms < 1 or index_interval_bytes < 1:
            raise ValueError("flush_interval_ms and index_interval_bytes must be positive")
        self._dir = DataDir(Path(data_dir))
        self._defaults = LogDefaults(
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            segment_bytes=segment_bytes,
            segment_ms=segment_ms,
            min_segment_bytes=min_segment_bytes,
        )
        self._fds = FdCache(sealed_fds)
        self._connections = connection_fds
        self._opts = PartitionOptions(flush, index_interval_bytes, clock, self._fds)
        self._flush_interval = flush_interval_ms / 1000
        self._broker = Broker(0, advertised_host, advertised_port)
        self._topics: dict[str, Topic] = {}
        self._unopened: dict[str, str] = {}  # topics found at start that could not be opened: why
        self._admin = asyncio.Lock()
        super().__init__()  # the start/stop state
        self._flusher: asyncio.Task[None] | None = None
        self._cluster_id: str | None = None

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        if self._cluster_id is None:
            self._cluster_id = self._dir.cluster_id()  # before start(): one tiny read, once
        return self._cluster_id

    async def _open(self) -> None:
        """Lock the directory and open (recovering if needed) every partition."""
        start = await asyncio.to_thread(self._dir.open)  # e.g. another process holds the dir: raises
        clean = start != "unclean"
        try:
            self._cluster_id = await asyncio.to_thread(self._dir.cluster_id)
            self._topics, self._unopened = await open_all(self._dir, self._defaults, self._opts, clean=clean)
        except BaseException:
            await asyncio.to_thread(self._dir.close, clean=False)
            raise
        if self._opts.flush == "interval":
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())
        log.info("embedded log open at %s: %d topic(s), %s", self._dir.root, len(self._topics), STARTS[start])

    async def _close(self) -> None:
        """Flush every partition, close all files, mark the shutdown clean."""
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
            self._flusher = None
        clean = True
        async with self._admin:  # no topic is half created or deleted while we close
            for topic in self._topics.values():
                for p in topic.partitions:
                    try:
                        await p.close(flush=True, error=self._stopped_error)
                    except Exception:
                        log.exception("closing %s failed", p.tp)
                        clean = False
        await asyncio.to_thread(self._dir.close, clean=clean)

    @staticmethod
    def _stopped_error() -> Exception:
        return BackendUnavailable("The embedded log is stopped.")

    def _require_started(self) -> None:
        if self._state != "started":
            raise BackendUnavailable(f"The embedded log is not running ({self._state}).")

    async def _open_partitions(
        self, topic: str, numbers: range, config: TopicConfig, *, clean: bool
    ) -> list[Partition]:
        return await open_partitions(self._dir, topic, numbers, config, self._opts, clean=clean)

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(self._flush_interval)
            dirty = [p for t in list(self._topics.values()) for p in t.partitions if p.dirty]
            results = await asyncio.gather(*(p.flush() for p in dirty), return_exceptions=True)
            for p, result in zip(dirty, results, strict=True):
                if isinstance(result, Exception) and not isinstance(result, TopicNotFound):
                    log.error("interval flush of %s failed: %s", p.tp, result)

    # --- metadata -----------------------------------------------------------------------

    async def brokers(self) -> list[Broker]:
        return [self._broker]

    async def list_topics(self) -> list[str]:
        self._require_started()
        return sorted(self._topics)

    async def describe_topic(self, topic: str) -> TopicInfo:
        self._require_started()
        return self._info(self._topic(topic))

    def _topic(self, topic: str) -> Topic:
        found = self._topics.get(topic)
        if found is None:
            if topic in self._unopened:
                raise BackendUnavailable(
                    f"Topic {topic!r} could not be opened at start: {self._unopened[topic]}", retry_after=None
                )
            raise TopicNotFound(f"Topic {topic[:300]!r} not found.")
        return found

    def unopened_topics(self) -> dict[str, str]:
        """Topics found on disk at start that could not be opened, and why (``/readyz`` shows them)."""
        return dict(self._unopened)

    def stopped_partitions(self) -> dict[str, str]:
        """Partitions that stopped taking writes until a restart (``topic-partition``), and why."""
        return {str(p.tp): p.stopped for t in self._topics.values() for p in t.partitions if p.stopped}

    def _partition(self, tp: TopicPartition) -> Partition:
        parts = self._topic(tp.topic).partitions
        if not 0 <= tp.partition < len(parts):
            raise PartitionNotFound(f"Partition {tp.partition} of topic {tp.topic!r} not found.")
        return parts[tp.partition]

    @staticmethod
    def _info(t: Topic) -> TopicInfo:
        parts = tuple(PartitionInfo(n, 0, (0,), (0,)) for n in range(len(t.partitions)))
        return TopicInfo(t.meta.name, parts, 1, t.config.effective())

    async def create_topic(
        self, topic: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> TopicInfo:
        check_topic(topic)
        check_partitions_and_replication(partitions, replication_factor)
        config = TopicConfig.build(configs, self._defaults)
        return await uncancellable(self._create_topic(topic, partitions, config))

    async def _create_topic(self, topic: str, partitions: int, config: TopicConfig) -> TopicInfo:
        async with self._admin:
            self._require_started()
            if topic in self._topics:
                raise TopicExists(f"Topic {topic!r} already exists.")
            if topic in self._unopened:
                raise BackendUnavailable(
                    f"Topic {topic!r} exists but could not be opened: {self._unopened[topic]}"
                )
            self._check_room(topic, partitions)
            meta = TopicMeta(topic, partitions, config.overrides, created_ms=self._opts.now_ms())
            try:
                await asyncio.to_thread(self._dir.create_topic, meta)
            except FileExistsError as exc:
                raise BackendError(f"Directory of topic {topic!r} exists but holds no topic.") from exc
            except OSError as exc:
                raise unavailable(f"Cannot create topic {topic!r}", exc) from exc
            try:
                parts = await self._open_partitions(topic, range(partitions), config, clean=True)
            except GatewayError:
                # Nothing half made: a topic left on disk that cannot be opened would be there again,
                # failing, at every restart.
                await asyncio.to_thread(self._dir.delete_topic, topic)
                raise
            self._topics[topic] = t = Topic(meta, config, parts)
            return self._info(t)

    def _check_room(self, topic: str, new_partitions: int) -> None:
        to_open = sum(p.fds_to_open for t in self._topics.values() for p in t.partitions)
        check_room(
            topic, new_partitions, cache_spare=self._fds.spare, to_open=to_open, connections=self._connections
        )

    async def delete_topic(self, topic: str) -> None:
        check_topic(topic)
        await uncancellable(self._delete_topic(topic))

    async def _delete_topic(self, topic: str) -> None:
        async with self._admin:
            self._require_started()
            if topic in self._unopened:  # what could not be opened can still be deleted
                try:
                    await asyncio.to_thread(self._dir.delete_topic, topic)
                except OSError as exc:
                    why = os_reason(exc)
                    raise BackendError(f"Cannot delete the files of topic {topic!r}: {why}") from exc
                del self._unopened[topic]
                return
            t = self._topic(topic)
            del self._topics[topic]  # from here on appends and fetches see TopicNotFound
            for p in t.partitions:
                await p.close(flush=False)
            try:
                await asyncio.to_thread(self._dir.delete_topic, topic)
            except OSError as exc:
                if await asyncio.to_thread(self._dir.topic_dir(topic).is_dir):
                    # Nothing moved on disk: serve the topic again, or a restart would bring back a
                    # topic this process had answered was deleted.
                    await self._reopen(t)
                raise BackendError(f"Cannot delete the files of topic {topic!r}: {os_reason(exc)}") from exc

    async def _reopen(self, t: Topic) -> None:
        topic = t.meta.name
        try:
            parts = await self._open_partitions(topic, range(len(t.partitions)), t.config, clean=False)
        except (OSError, GatewayError) as exc:
            log.error("topic %r could not be deleted, nor opened again until a restart: %s", topic, exc)
            return
        self._topics[topic] = Topic(t.meta, t.config, parts)

    async def add_partitions(self, topic: str, total: int) -> TopicInfo:
        return await uncancellable(self._add_partitions(topic, total))

    async def _add_partitions(self, topic: str, total: int) -> TopicInfo:
        async with self._admin:
            self._require_started()
            t = self._topic(topic)
            current = len(t.partitions)
            check_partition_growth(topic, current, total)
            self._check_room(topic, total - current)
            meta = dataclasses.replace(t.meta, partitions=total)
            try:
                await asyncio.to_thread(self._dir.grow_topic, t.meta, meta)
            except OSError as exc:
                raise unavailable(f"Cannot add partitions to {topic!r}", exc) from exc
            try:
                added = await self._open_partitions(topic, range(current, total), t.config, clean=True)
            except GatewayError:
                await asyncio.to_thread(self._dir.grow_topic, meta, t.meta)  # back to the count it had
                raise
            t.partitions = [*t.partitions, *added]
            t.meta = meta
            return self._info(t)

    # --- records ------------------------------------------------------------------------

    async def append(self, tp: TopicPartition, records: Sequence[NewRecord]) -> range:
        """Append as one batch; the records get consecutive offsets."""
        self._require_started()
        p = self._partition(tp)
        if not records:
            return range(p.high_watermark, p.high_watermark)
        try:
            batch = encode_batch(records, self._opts.now_ms(), max_record_bytes=p.config.max_message_bytes)
        except RecordTooLarge as exc:
            raise PayloadTooLarge(str(exc)) from exc
        except (BatchError, TypeError, UnicodeEncodeError) as exc:
            raise InvalidPayload(f"Cannot store the records: {exc}") from exc
        base = await p.append(batch)
        return range(base, base + len(records))

    async def fetch(
        self,
        positions: Mapping[TopicPartition, int],
        *,
        max_bytes: int,
        max_wait_ms: int,
        min_bytes: int = 1,
        max_records: int | None = None,
    ) -> dict[TopicPartition, PartitionData]:
        """Read from every position; long-poll until ``min_bytes`` arrive or ``max_wait_ms`` passes.

        Returns at once when a position is out of range, below its partition's log start or
        past its end (``PartitionData.out_of_range``: the caller must reset), ``max_records``
        were read, or the log is stopping.
        """
        self._require_started()
        wanted = [(tp, self._partition(tp), offset) for tp, offset in positions.items()]
        if not wanted:
            return {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(max_wait_ms, 0) / 1000
        while True:
            # Take the futures before reading, so an append landing during the read still wakes us.
            wakeups = [p.changed() for _, p, _ in wanted]
            result, size, answer_now = await self._read(wanted, max_bytes, max_records)
            if size >= min_bytes or size >= max_bytes or answer_now:
                return result
            remaining = deadline - loop.time()
            if remaining <= 0:
                return result
            done, _ = await asyncio.wait(wakeups, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if not done or self._state != "started":
                return result  # (a deleted topic, though, raises TopicNotFound on the next read)

    async def _read(
        self, wanted: list[tuple[TopicPartition, Partition, int]], max_bytes: int, max_records: int | None
    ) -> tuple[dict[TopicPartition, PartitionData], int, bool]:
        views = [p.view() for _, p, _ in wanted]
        reads = [(tp, offset, view) for (tp, _, offset), view in zip(wanted, views, strict=True)]
        if (max_records is None or max_records > 0) and all(
            offset == v.high_watermark for _, offset, v in reads
        ):
            # Every position at its log end (an idle consumer's, most often): nothing to read, so
            # no worker thread for it; what reading would answer.
            nothing = RecordColumns.empty()
            ends = {tp: PartitionData(nothing, v.high_watermark, v.log_start_offset) for tp, _, v in reads}
            return ends, 0, False
        return await self._pinned(views, lambda: read_views(reads, max_bytes, max_records))

    async def _pinned(self, views: list[PartitionView], fn: Callable[[], T]) -> T:
        for v in views:
            v.pin()
        try:
            return await finish_in_thread(fn)  # never unpin while the thread still reads
        except OSError as exc:
            raise unavailable("Cannot read the log", exc) from exc
        except BatchError as exc:  # a CRC-valid batch that does not decode: damaged beyond repair
            raise BackendError(f"Corrupt data in the log: {exc}") from exc
        finally:
            for v in views:
                v.unpin()

    async def offsets(self, tp: TopicPartition) -> tuple[int, int]:
        self._require_started()
        p = self._partition(tp)
        return p.log_start_offset, p.high_watermark

    async def offset_for_timestamp(self, tp: TopicPartition, timestamp_ms: int) -> int | None:
        self._require_started()
        view = self._partition(tp).view()
        return await self._pinned([view], lambda: view.find_timestamp(timestamp_ms))

    async def apply_retention(self) -> int:
        """Delete closed segments past retention.ms / retention.bytes; return how many went."""
        if self._state != "started":
            return 0
        removed = 0
        for t in list(self._topics.values()):
            for p in t.partitions:
                try:
                    removed += await p.apply_retention()
                except GatewayError as exc:
                    log.error("retention of %s failed: %s", p.tp, exc)
        return removed
