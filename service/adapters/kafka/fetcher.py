"""``Fetcher``: stateless reads by (topic, partition, offset, max_bytes) with Kafka's long-poll.

No consumer, no group, no position kept between calls (the core owns
positions): every ``fetch`` sends its own FetchRequests through the low-level
client, one per partition leader, concurrently, without waiting at the broker.
The call returns as soon as one leader has records (the other requests are
abandoned). With nothing to return yet, it parks in the ``EndWatch`` until a
partition it reads may have something, or its wait is over, and asks again:
one long fetch per broker watches every parked partition, so a waiting fetch
costs no request of its own until then.

Results follow the ``Log`` port exactly as the embedded log does: partitions in
the order given, one ``max_bytes`` budget (and ``max_records``, when given) shared in that order, the first
record always delivered even if it alone exceeds the budget, records before
the requested offset dropped. A position Kafka answers OFFSET_OUT_OF_RANGE for,
below the log start or past the log end, answers at once, empty and
``out_of_range`` (the core resets); one past the high watermark that Kafka
takes (not past the leader's log end yet) waits like one at the end.

What Kafka returned beyond the budget is kept in the ``ReadAhead`` and served
to the next fetch at the following offset. A reader that took everything a
fetch brought while more waits in Kafka (a backlog) is read ahead in the
background, as Kafka's own consumer does: the next batch is fetched while the
client handles this one, so a sequential reader does not wait a broker round
trip per poll. A fetch that arrives while that read is on its way waits for it
instead of asking twice.

Collaborators: ``ClusterClient``, ``TopicMetadata`` (leaders, existence),
``OffsetLookup`` (after OffsetOutOfRange), ``ReadAhead``, ``EndWatch``, ``records``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiokafka.protocol.fetch import FetchRequest

from service.core.models import PartitionData, RecordColumns, TopicPartition
from service.errors import BackendUnavailable

from ..fetch_budget import FetchBudget
from .cluster import ClusterClient
from .errors import for_code, is_metadata_error
from .metadata import TopicMetadata
from .offsets import OffsetLookup
from .readahead import Chunk, ReadAhead
from .records import Decoded, decode
from .watch import EndWatch

OFFSET_OUT_OF_RANGE: Final = 1
READ_UNCOMMITTED: Final = 0  # like Kafka's consumers by default: the high watermark is the end
RETRY_BACKOFF_S: Final = 0.1  # after a leader change, before asking again
DECODE_IN_THREAD: Final = 1024 * 1024  # response bytes above which decoding leaves the event loop
KNOWN_STATES: Final = 65_536  # partitions whose last high watermark / log start are remembered
MAX_PREFETCHES: Final = 32  # background reads at once, each of kafka_fetch_bytes at most

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Answer:
    """What one FetchRequest said about one partition."""

    decoded: Decoded
    high_watermark: int
    log_start_offset: int
    out_of_range: bool = False  # before the log start or past the log end: the core must reset


@dataclass(slots=True)
class _Part:
    """One partition being assembled: kept + fetched records and the partition's state."""

    tp: TopicPartition
    offset: int
    records: RecordColumns  # with each record's ``Record.size``
    end: int
    high_watermark: int
    log_start_offset: int
    out_of_range: bool = False


class Fetcher:
    """Stateless fetches; see the module docstring for the contract."""

    def __init__(
        self,
        cluster: ClusterClient,
        metadata: TopicMetadata,
        offsets: OffsetLookup,
        readahead: ReadAhead,
        *,
        request_timeout: float,
        max_wait_slice_ms: int,
        fetch_bytes: int,
    ) -> None:
        self._cluster = cluster
        self._metadata = metadata
        self._offsets = offsets
        self._readahead = readahead
        self._timeout = request_timeout
        self._fetch_bytes = fetch_bytes if readahead.capacity > 0 else 0  # no read-ahead: ask for max_bytes
        self._known: OrderedDict[TopicPartition, tuple[int, int]] = OrderedDict()
        self._prefetches: dict[TopicPartition, tuple[int, asyncio.Task[None]]] = {}
        self._watch = EndWatch(cluster, metadata, wait_ms=max_wait_slice_ms, request_timeout=request_timeout)

    async def close(self) -> None:
        """Cancel the background reads and the end watch's rounds."""
        tasks = [task for _, task in self._prefetches.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._prefetches.clear()
        await self._watch.close()

    async def fetch(
        self,
        positions: Mapping[TopicPartition, int],
        *,
        max_bytes: int,
        max_wait_ms: int,
        min_bytes: int,
        max_records: int | None = None,
    ) -> dict[TopicPartition, PartitionData]:
        wanted = list(positions.items())
        for tp, _ in wanted:  # TopicNotFound / PartitionNotFound before anything is sent
            await self._metadata.partition(tp.topic, tp.partition)
        if not wanted:
            return {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(max_wait_ms, 0) / 1000
        ahead = [self._prefetches[tp][1] for tp, off in wanted if self._prefetched_at(tp) == off]
        if ahead:  # on its way already: asking again would only fetch the same bytes twice
            await asyncio.wait(ahead, timeout=self._timeout)
        floors: dict[TopicPartition, int] = {}  # where to wait when a position is past the end
        ask_bytes = max(max_bytes, self._fetch_bytes)
        while True:
            kept, kept_size, remote = self._plan(wanted, floors, min_bytes, max_bytes)
            answers: dict[TopicPartition, _Answer] = {}
            if remote:
                answers = await self._ask(remote, 0, max(min_bytes - kept_size, 1), ask_bytes)
            parts, out_of_range = self._assemble(wanted, kept, answers, floors)
            size = sum(sum(p.records.sizes) for p in parts)
            enough = max_records is not None and sum(len(p.records) for p in parts) >= max_records
            if size >= min_bytes or size >= max_bytes or enough or out_of_range or loop.time() >= deadline:
                return self._deliver(parts, max_bytes, max_records)
            for p in parts:  # not enough yet: keep what came, wait for more after it
                self._keep(p.tp, p.offset, p.records, p)
            _, _, remote = self._plan(wanted, floors, min_bytes, max_bytes)
            await self._watch.wait({tp: pos for tp, (pos, _) in remote.items()}, deadline - loop.time())

    def _plan(
        self,
        wanted: list[tuple[TopicPartition, int]],
        floors: dict[TopicPartition, int],
        min_bytes: int,
        max_bytes: int,
    ) -> tuple[dict[TopicPartition, Chunk], int, dict[TopicPartition, tuple[int, int]]]:
        """What the read-ahead holds (and its size), and what to ask Kafka: tp -> (ask from, keep from)."""
        kept = {tp: c for tp, off in wanted if (c := self._readahead.get(tp, off)) is not None}
        kept_size = sum(sum(c.records.sizes) for c in kept.values())
        remote: dict[TopicPartition, tuple[int, int]] = {}
        if kept_size < min_bytes:  # not enough in memory: ask Kafka for everything after it
            for tp, off in wanted:
                pos = kept[tp].end if tp in kept else floors.get(tp, off)
                remote[tp] = (pos, max(pos, off))
        elif kept_size < max_bytes:  # enough to answer now; fill up from the other partitions
            remote = {tp: (floors.get(tp, off), off) for tp, off in wanted if tp not in kept}
        return kept, kept_size, remote

    def _assemble(
        self,
        wanted: list[tuple[TopicPartition, int]],
        kept: dict[TopicPartition, Chunk],
        answers: dict[TopicPartition, _Answer],
        floors: dict[TopicPartition, int],
    ) -> tuple[list[_Part], bool]:
        parts: list[_Part] = []
        out_of_range = False
        for tp, off in wanted:
            hw, start = self._known.get(tp, (off, 0))
            part = _Part(tp, off, RecordColumns.empty(), off, hw, start)
            chunk = kept.get(tp)
            if chunk is not None:
                part.records = chunk.records
                part.end, part.high_watermark, part.log_start_offset = (
                    chunk.end,
                    chunk.high_watermark,
                    chunk.log_start_offset,
                )
            answer = answers.get(tp)
            if answer is not None:
                if answer.out_of_range:
                    out_of_range = part.out_of_range = True
                    part.records = RecordColumns.empty()
                elif answer.decoded.records:
                    part.records = part.records + answer.decoded.records
                part.end = max(part.end, answer.decoded.next_offset)
                part.high_watermark, part.log_start_offset = answer.high_watermark, answer.log_start_offset
                if off > answer.high_watermark >= 0:
                    floors[tp] = answer.high_watermark  # long-poll at the end, not past it
            parts.append(part)
        return parts, out_of_range

    def _deliver(
        self, parts: list[_Part], max_bytes: int, max_records: int | None
    ) -> dict[TopicPartition, PartitionData]:
        result: dict[TopicPartition, PartitionData] = {}
        budget = FetchBudget(max_bytes, max_records)
        for p in parts:
            records = p.records
            n = budget.grant(records.sizes)
            whole = n == len(records)
            given = records if whole else records[:n]
            start = given.offsets[-1] + 1 if n else p.offset
            self._keep(p.tp, start, RecordColumns.empty() if whole else records[n:], p)
            if n and whole and start < p.high_watermark:
                self._prefetch(p.tp, start)  # all of it taken, and Kafka holds more
            hw = max(p.high_watermark, start) if given else p.high_watermark
            result[p.tp] = PartitionData(given, hw, p.log_start_offset, p.out_of_range)
        return result

    def _keep(self, tp: TopicPartition, start: int, records: RecordColumns, part: _Part) -> None:
        if records:
            end = max(part.end, records.offsets[-1] + 1)
            chunk = Chunk(start, end, records, part.high_watermark, part.log_start_offset)
            self._readahead.put(tp, chunk)
        else:
            self._readahead.drop(tp)

    def _prefetched_at(self, tp: TopicPartition) -> int | None:
        found = self._prefetches.get(tp)
        return None if found is None else found[0]

    def _prefetch(self, tp: TopicPartition, offset: int) -> None:
        if self._readahead.capacity == 0 or tp in self._prefetches or len(self._prefetches) >= MAX_PREFETCHES:
            return
        task = asyncio.get_running_loop().create_task(self._read_ahead(tp, offset))
        self._prefetches[tp] = (offset, task)
        task.add_done_callback(lambda _: self._prefetches.pop(tp, None))

    async def _read_ahead(self, tp: TopicPartition, offset: int) -> None:
        """Fetch what follows ``offset`` into the read-ahead, without waiting at the broker."""
        try:
            answer = (await self._ask({tp: (offset, offset)}, 0, 1, self._fetch_bytes)).get(tp)
        except Exception as exc:  # the reader's next fetch will ask again, and report it
            log.debug("reading %s ahead from %d failed: %s", tp, offset, exc)
            return
        if answer is None or answer.out_of_range or not answer.decoded.records:
            return
        if self._readahead.get(tp, offset) is None:  # nobody stored it meanwhile
            decoded = answer.decoded
            part = _Part(
                tp,
                offset,
                decoded.records,
                decoded.next_offset,
                answer.high_watermark,
                answer.log_start_offset,
            )
            self._keep(tp, offset, decoded.records, part)

    def _remember(self, tp: TopicPartition, high_watermark: int, log_start: int) -> None:
        self._known[tp] = (high_watermark, log_start)
        self._known.move_to_end(tp)
        if len(self._known) > KNOWN_STATES:
            self._known.popitem(last=False)

    async def _ask(
        self, remote: dict[TopicPartition, tuple[int, int]], wait_ms: int, min_bytes: int, ask_bytes: int
    ) -> dict[TopicPartition, _Answer]:
        """One FetchRequest per leader, concurrently; done when one has records or all answered."""
        by_leader: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
        for tp, where in remote.items():
            info = await self._metadata.partition(tp.topic, tp.partition)
            if info.leader < 0:
                self._metadata.invalidate(tp.topic)
                raise BackendUnavailable(f"Partition {tp} has no leader right now; retry shortly.")
            by_leader.setdefault(info.leader, {})[tp] = where
        tasks = [
            asyncio.ensure_future(self._ask_leader(leader, part, wait_ms, min_bytes, ask_bytes))
            for leader, part in by_leader.items()
        ]
        answers: dict[TopicPartition, _Answer] = {}
        pending: set[asyncio.Future[dict[TopicPartition, _Answer]]] = set(tasks)
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    answers.update(task.result())
                if any(a.decoded.records or a.out_of_range for a in answers.values()):
                    break
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        return answers

    async def _ask_leader(
        self,
        leader: int,
        wanted: dict[TopicPartition, tuple[int, int]],
        wait_ms: int,
        min_bytes: int,
        ask_bytes: int,
    ) -> dict[TopicPartition, _Answer]:
        by_topic: dict[str, list[tuple[int, int, int]]] = {}
        for tp, (pos, _) in wanted.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, pos, ask_bytes))
        # max_wait 0 is legal in Kafka, but some brokers (Tansu 0.6) then answer without any
        # partition; 1 ms costs nothing when data is there.
        request = FetchRequest(
            max(wait_ms, 1), min_bytes, ask_bytes, READ_UNCOMMITTED, list(by_topic.items())
        )
        what = f"fetching from broker {leader}"
        response = await self._cluster.send(
            leader, request, timeout=wait_ms / 1000 + self._timeout, what=what
        )
        if error := for_code(getattr(response, "error_code", 0), what):
            raise error
        answers: dict[TopicPartition, _Answer] = {}
        retry = False
        for topic, partitions in response.topics:
            for entry in partitions:
                tp = TopicPartition(topic, entry[0])
                if tp not in wanted:
                    continue
                answer = await self._answer(tp, wanted[tp], entry, response.API_VERSION)
                if answer is None:
                    retry = True
                else:
                    answers[tp] = answer
        if retry and not any(a.decoded.records for a in answers.values()):
            await asyncio.sleep(RETRY_BACKOFF_S)  # a leader is moving: give the election a moment
        return answers

    async def _answer(
        self, tp: TopicPartition, where: tuple[int, int], entry: Any, version: int
    ) -> _Answer | None:
        """The partition's part of a FetchResponse; None when the leader moved (ask again)."""
        pos, keep_from = where
        code, high_watermark = entry[1], entry[2]
        if code == 0:
            log_start = entry[4] if version >= 5 else -1
            if log_start < 0:
                log_start = self._known.get(tp, (0, 0))[1]
            data = entry[-1]
            if data is not None and len(data) > DECODE_IN_THREAD:
                decoded = await asyncio.to_thread(decode, data, keep_from)
            else:
                decoded = decode(data, keep_from)
            self._remember(tp, high_watermark, log_start)
            return _Answer(decoded, high_watermark, log_start)
        if code == OFFSET_OUT_OF_RANGE:
            start, end = await self._offsets.bounds(tp)
            self._remember(tp, end, start)
            outside = not start <= keep_from <= end  # else the log moved since: ask again
            return _Answer(Decoded(RecordColumns.empty(), pos), end, start, out_of_range=outside)
        if is_metadata_error(code):
            self._metadata.invalidate(tp.topic)
            await self._metadata.partition(tp.topic, tp.partition)  # gone for good: Topic/PartitionNotFound
            return None
        error = for_code(code, f"fetching {tp}", topic=tp.topic, partition=tp.partition)
        assert error is not None
        raise error
