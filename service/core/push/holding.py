"""The records a deliverer holds, in their order lanes, and which of them may be sent now.

A record is held from its acquisition until it is settled, dead-lettered or let go. Each is in
a lane: with ordering by partition, its partition's; by key, its partition's and key's. Within a
lane a record is sent only once every record before it was settled (so a batch is a run from the
head of one lane), and a failed one blocks its lane while it waits out its back-off. Without
ordering there are no lanes: any ready records make a batch, a record being sent is out of the
pool of those waiting, and one that comes back unsettled (``back``) goes in again, at the front.

Each record taken by ``next_batch`` leaves it once more, by ``remove`` (settled, dead-lettered)
or by ``back`` (to be sent again at its ``due_ms``). The work is a constant per record: a
deliverer holds thousands and turns them over at tens of thousands a second.

Pure: the deliverer (``deliverer``) says what time it is and what came back.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..models import Record, TopicPartition
from ..shares.delivered import Delivered
from .spec import Ordering, PushSpec

Coordinate = tuple[TopicPartition, int]


@dataclass(slots=True, eq=False)
class Held:
    """A record the deliverer holds: its attempts so far and when it may be sent next."""

    tp: TopicPartition
    record: Record
    deliveries: int  # the share group's count: 1 + the times another holder let it go
    attempts: int  # requests that carried it (at least one per earlier holder)
    due_ms: int
    lane: Hashable = None  # with ordering, the lane it is in
    first_ms: int | None = None
    last_ms: int | None = None
    status: int | None = None
    error: str | None = None
    sending: bool = False
    gone: bool = False  # removed: skipped where it still stands in a queue

    @property
    def coordinate(self) -> Coordinate:
        return self.tp, self.record.offset

    @property
    def order(self) -> tuple[str, int, int]:
        """Where it stands among records: topic, partition, offset (what a batch is sorted by)."""
        return self.tp.topic, self.tp.partition, self.record.offset


class Holding:
    """What one subscription's deliverer holds on this replica (see the module docstring)."""

    def __init__(self, spec: PushSpec) -> None:
        self._spec = spec
        self._held: dict[TopicPartition, dict[int, Held]] = {}  # by partition, then offset
        self._count = 0
        self._lanes: dict[Hashable, deque[Held]] = {}  # with ordering
        self._pool: deque[Held] = deque()  # without: those not being sent (some may be gone)
        self._turn = 0  # the lane a batch is looked for first, turned each time: no lane starves

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Held]:
        for offsets in self._held.values():
            yield from offsets.values()

    def add(self, delivered: Iterable[Delivered], now_ms: int) -> int:
        """Hold what an acquisition handed out (a record held already is kept as it is); how many."""
        ordering = self._spec.ordering
        held_here = self._held
        tp_now: TopicPartition | None = None
        offsets: dict[int, Held] = {}
        added = 0
        for tp, record, deliveries in delivered:
            if tp is not tp_now:
                tp_now, offsets = tp, held_here.setdefault(tp, {})
            if record.offset in offsets:
                continue
            held = Held(tp, record, deliveries, max(deliveries - 1, 0), now_ms)
            offsets[record.offset] = held
            if ordering is Ordering.NONE:
                self._pool.append(held)
            else:
                held.lane = tp if ordering is Ordering.PARTITION else (tp, record.key)
                lane = self._lanes.get(held.lane)
                if lane is None:
                    lane = self._lanes[held.lane] = deque()
                lane.append(held)
            added += 1
        self._count += added
        return added

    def remove(self, items: Iterable[Held]) -> None:
        """Stop holding ``items`` (settled, dead-lettered, or let go)."""
        tp_now: TopicPartition | None = None
        offsets: dict[int, Held] = {}
        for held in items:
            if held.tp is not tp_now:
                tp_now, offsets = held.tp, self._held.get(held.tp, {})
            if offsets.get(held.record.offset) is not held:
                continue
            del offsets[held.record.offset]
            if not offsets:
                self._held.pop(held.tp, None)
            held.gone = True
            self._count -= 1
            if held.lane is not None:
                lane = self._lanes[held.lane]
                while lane and lane[0].gone:
                    lane.popleft()
                if not lane:
                    del self._lanes[held.lane]

    def back(self, items: Sequence[Held]) -> None:
        """``items`` were sent (taken by ``next_batch``) and not settled: they may go again at their
        ``due_ms``. Without ordering they go back to the front of the pool, first of all."""
        for held in items:
            held.sending = False
        if self._spec.ordering is Ordering.NONE:
            self._pool.extendleft(h for h in reversed(items) if not h.gone)

    def next_batch(self, now_ms: int) -> list[Held]:
        """Records that may go in one request now (none if none may), marked as being sent."""
        if self._spec.ordering is Ordering.NONE:
            batch = self._from_pool(now_ms)
        else:
            batch = []
            lanes = list(self._lanes.values())
            for i in range(len(lanes)):
                queue = lanes[(self._turn + i) % len(lanes)]
                if not queue[0].sending and queue[0].due_ms <= now_ms:
                    self._turn = (self._turn + i + 1) % len(lanes)
                    batch = self._take(_run(queue, now_ms))
                    break
        for held in batch:
            held.sending = True
        return batch

    def next_due(self) -> int | None:
        """When the first record not being sent may be sent (None: all are being sent, or none held)."""
        if self._spec.ordering is Ordering.NONE:
            return min((h.due_ms for h in self._pool if not h.gone), default=None)
        return min((q[0].due_ms for q in self._lanes.values() if not q[0].sending), default=None)

    def by_partition(self) -> dict[TopicPartition, list[int]]:
        """The offsets held, per partition (what a renewal names)."""
        return {tp: list(offsets) for tp, offsets in self._held.items()}

    def _from_pool(self, now_ms: int) -> list[Held]:
        """Ready records from the front of the pool, in order; those waiting out a back-off stay,
        and keep their places."""
        pool, spec = self._pool, self._spec
        batch: list[Held] = []
        waiting: list[Held] = []
        size = 0
        while pool and len(batch) < spec.max_records:
            held = pool.popleft()
            if held.gone:
                continue
            if held.due_ms > now_ms:
                waiting.append(held)
                continue
            size += held.record.size
            if batch and size > spec.max_bytes:
                pool.appendleft(held)
                break
            batch.append(held)
        pool.extendleft(reversed(waiting))
        return batch

    def _take(self, candidates: Iterable[Held]) -> list[Held]:
        """Candidates in order up to the batch's records and bytes (the first one whatever its size)."""
        batch: list[Held] = []
        size = 0
        for held in candidates:
            size += held.record.size
            if batch and (len(batch) >= self._spec.max_records or size > self._spec.max_bytes):
                break
            batch.append(held)
        return batch


def _run(lane: Iterable[Held], now_ms: int) -> Iterator[Held]:
    """The records of a lane that may go now, from its head up to the first that may not."""
    for held in lane:
        if held.gone:
            continue
        if held.sending or held.due_ms > now_ms:
            return
        yield held


def first_and_last(batch: Sequence[Held]) -> tuple[Coordinate, Coordinate]:
    return batch[0].coordinate, batch[-1].coordinate


def by_partition(items: Iterable[Held]) -> dict[TopicPartition, list[Held]]:
    """``items`` per partition, in their order (a partition's records mostly come together: its
    key is hashed once a run, not once a record)."""
    out: dict[TopicPartition, list[Held]] = {}
    tp_now: TopicPartition | None = None
    run: list[Held] = []
    for held in items:
        if held.tp is not tp_now:
            tp_now = held.tp
            run = out.setdefault(tp_now, [])
        run.append(held)
    return out
