"""``EndWatch``: fetches waiting at the end of partitions, watched by one long fetch per broker.

A fetch with nothing to return yet would otherwise ask its leaders again every
``kafka_fetch_max_wait_ms`` for its whole wait: a thousand idle long-polls, a thousand
requests a slice. Instead the ``Fetcher`` parks it here. Per broker the watch keeps a
FetchRequest in flight covering every parked partition from the lowest position parked on
it, with Kafka's own long-poll (``max_wait_ms`` a slice, ``min_bytes`` 1, a byte per
partition: it asks whether, not what), and wakes the fetches parked on a partition when the
broker says something is there: records, a high watermark past the position, or an error.
A woken fetch asks again itself, so its results, budgets, ``out_of_range`` and errors stay
the fetcher's; one whose deadline comes first just leaves.

A round "covers" its partitions from its positions on. A fetch parked where no round in
flight covers it gets one at once (one per broker for all that park in the same turn of the
event loop), so it is watched from the moment it parks. When a round ends and some parked
fetch is left uncovered, the next round covers all of the broker's, so rounds merge into
one per broker. A round that fails wakes its fetches (they meet the failure themselves)
and holds its partitions for ``RETRY_BACKOFF_S`` before the next.

The watch's requests go on a connection of their own per broker: Kafka answers a
connection's requests in order, so a long fetch there holds no other request back.

Collaborators: ``ClusterClient``, ``TopicMetadata`` (leaders), ``records.decode``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiokafka.protocol.fetch import FetchRequest

from service.core.models import TopicPartition

from .cluster import ClusterClient
from .errors import for_code
from .metadata import TopicMetadata
from .records import decode

READ_UNCOMMITTED: Final = 0
PROBE_BYTES: Final = 1  # per partition and in all: Kafka still sends a first batch, and counts the byte
RETRY_BACKOFF_S: Final = 0.1

log = logging.getLogger(__name__)


@dataclass(eq=False, slots=True)
class _Parked:
    """One waiting fetch: where it waits, and the future that wakes it."""

    positions: dict[TopicPartition, int]
    woken: asyncio.Future[None]


class EndWatch:
    """Parked fetches and the rounds that watch them; see the module docstring."""

    def __init__(
        self, cluster: ClusterClient, metadata: TopicMetadata, *, wait_ms: int, request_timeout: float
    ) -> None:
        self._cluster = cluster
        self._metadata = metadata
        self._wait_ms = max(wait_ms, 1)
        self._timeout = request_timeout
        self._parked: dict[int, dict[TopicPartition, set[_Parked]]] = {}  # leader -> partition -> fetches
        self._rounds: dict[int, list[dict[TopicPartition, int]]] = {}  # leader -> what rounds in flight cover
        self._skips: dict[TopicPartition, tuple[int, int]] = {}  # [from, to): only control batches there
        self._scheduled: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def wait(self, positions: Mapping[TopicPartition, int], timeout: float) -> None:
        """Return when one of ``positions`` may have something (or fails), or after ``timeout`` s."""
        if timeout <= 0 or not positions:
            return
        leaders = {tp: (await self._metadata.partition(tp.topic, tp.partition)).leader for tp in positions}
        if any(leader < 0 for leader in leaders.values()):
            return  # the fetch's own request says so
        parked = _Parked(dict(positions), asyncio.get_running_loop().create_future())
        for tp, leader in leaders.items():
            self._parked.setdefault(leader, {}).setdefault(tp, set()).add(parked)
        try:
            for leader in set(leaders.values()):
                self._schedule(leader)
            await asyncio.wait({parked.woken}, timeout=timeout)
        finally:
            for tp, leader in leaders.items():
                self._unpark(leader, tp, parked)

    async def close(self) -> None:
        """Cancel the rounds and wake every parked fetch (its own request then fails)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for leader, by_tp in list(self._parked.items()):
            self._wake(leader, dict.fromkeys(by_tp))

    def _unpark(self, leader: int, tp: TopicPartition, parked: _Parked) -> None:
        by_tp = self._parked.get(leader, {})
        waiting = by_tp.get(tp)
        if waiting is None:
            return
        waiting.discard(parked)
        if not waiting:
            del by_tp[tp]
            self._skips.pop(tp, None)
            if not by_tp:
                self._parked.pop(leader, None)

    def _schedule(self, leader: int) -> None:
        """Cover the broker's newly parked fetches at the end of this turn of the loop."""
        if leader not in self._scheduled:
            self._scheduled.add(leader)
            asyncio.get_running_loop().call_soon(self._arrived, leader)

    def _arrived(self, leader: int) -> None:
        self._scheduled.discard(leader)
        self._cover(leader, merge=False)

    def _cover(self, leader: int, *, merge: bool) -> None:
        """Start a round for what no round in flight covers: only that, or (``merge``) everything."""
        by_tp = self._parked.get(leader)
        if not by_tp:
            return
        wanted: dict[TopicPartition, int] = {}
        for tp, waiting in by_tp.items():
            pos = min(p.positions[tp] for p in waiting)
            start, end = self._skips.get(tp, (pos, pos))
            wanted[tp] = end if start <= pos < end else pos
        rounds = self._rounds.get(leader, [])
        uncovered = {
            tp: pos for tp, pos in wanted.items() if not any(r.get(tp, pos + 1) <= pos for r in rounds)
        }
        if not uncovered:
            return
        task = asyncio.get_running_loop().create_task(self._round(leader, wanted if merge else uncovered))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _round(self, leader: int, covers: dict[TopicPartition, int]) -> None:
        rounds = self._rounds.setdefault(leader, [])
        rounds.append(covers)
        try:
            try:
                found = await self._ask(leader, covers)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # every parked fetch asks itself, and meets it (or not)
                log.debug("watching broker %d for records failed: %s", leader, exc)
                self._wake(leader, dict.fromkeys(covers))
                await asyncio.sleep(RETRY_BACKOFF_S)
            else:
                self._wake(leader, found)
        finally:
            rounds.remove(covers)
            if not rounds:
                self._rounds.pop(leader, None)
        self._cover(leader, merge=True)

    def _wake(self, leader: int, found: Mapping[TopicPartition, int | None]) -> None:
        """Wake the fetches parked on ``found``'s partitions below its high watermark (all of them
        for None: an error): one parked past it since the round was sent has nothing new."""
        by_tp = self._parked.get(leader, {})
        for tp, high_watermark in found.items():
            for parked in by_tp.get(tp, ()):
                if high_watermark is None or parked.positions[tp] < high_watermark:
                    if not parked.woken.done():
                        parked.woken.set_result(None)

    async def _ask(self, leader: int, covers: dict[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        """One long FetchRequest for ``covers``: the partitions with something to wake for, and
        their high watermarks (None: an error there)."""
        by_topic: dict[str, list[tuple[int, int, int]]] = {}
        for tp, pos in covers.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, pos, PROBE_BYTES))
        request = FetchRequest(self._wait_ms, 1, PROBE_BYTES, READ_UNCOMMITTED, list(by_topic.items()))
        what = f"watching broker {leader} for records"
        response = await self._cluster.send(
            leader, request, timeout=self._wait_ms / 1000 + self._timeout, what=what, long_poll=True
        )
        if error := for_code(getattr(response, "error_code", 0), what):
            raise error
        found: dict[TopicPartition, int | None] = {}
        for topic, partitions in response.topics:
            for entry in partitions:
                tp = TopicPartition(topic, entry[0])
                at = covers.get(tp)
                if at is None:
                    continue
                code, high_watermark = entry[1], entry[2]
                if code != 0:
                    found[tp] = None
                elif self._has_records(tp, at, high_watermark, entry[-1]):
                    found[tp] = high_watermark
        return found

    def _has_records(self, tp: TopicPartition, pos: int, high_watermark: int, data: Any) -> bool:
        """Records at ``pos`` or after. Only control batches there: watch past them from now on."""
        if high_watermark <= pos:
            return False
        decoded = decode(data, pos)
        if decoded.records or decoded.next_offset <= pos:  # records, or some that did not fit the byte
            return True
        self._skips[tp] = (pos, decoded.next_offset)
        return False
