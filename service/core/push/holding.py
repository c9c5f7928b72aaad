"""The records a deliverer holds, in their order lanes, and which of them may be sent now.

A record is held from its acquisition until it is settled, dead-lettered or let go. Each is in
a lane: with ordering by partition, its partition's; by key, its partition's and key's; with
no ordering, a lane of its own. Within a lane a record is sent only once every record before it
was settled (so a batch is a run from the head of one lane), and a failed one blocks its lane
while it waits out its back-off. Without ordering, any ready records make a batch.

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
    first_ms: int | None = None
    last_ms: int | None = None
    status: int | None = None
    error: str | None = None
    sending: bool = False

    @property
    def coordinate(self) -> Coordinate:
        return self.tp, self.record.offset


class Holding:
    """What one subscription's deliverer holds on this replica (see the module docstring)."""

    def __init__(self, spec: PushSpec) -> None:
        self._spec = spec
        self._lanes: dict[Hashable, deque[Held]] = {}
        self._held: dict[Coordinate, Held] = {}
        self._turn = 0  # the lane a batch is looked for first, turned each time: no lane starves

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[Held]:
        return iter(self._held.values())

    def add(self, delivered: Iterable[Delivered], now_ms: int) -> int:
        """Hold what an acquisition handed out (a record held already is kept as it is); how many."""
        added = 0
        for d in delivered:
            coordinate = (d.tp, d.record.offset)
            if coordinate in self._held:
                continue
            held = Held(d.tp, d.record, d.deliveries, max(d.deliveries - 1, 0), now_ms)
            self._held[coordinate] = held
            self._lanes.setdefault(self._lane(held), deque()).append(held)
            added += 1
        return added

    def remove(self, items: Iterable[Held]) -> None:
        """Stop holding ``items`` (settled, dead-lettered, or let go)."""
        for held in items:
            if self._held.pop(held.coordinate, None) is None:
                continue
            lane = self._lane(held)
            queue = self._lanes[lane]
            queue.remove(held)
            if not queue:
                del self._lanes[lane]

    def next_batch(self, now_ms: int) -> list[Held]:
        """Records that may go in one request now (none if none may), marked as being sent."""
        spec = self._spec
        if spec.ordering is Ordering.NONE:
            batch = self._take(self._ready(now_ms))
        else:
            batch = []
            lanes = list(self._lanes.values())
            for i in range(len(lanes)):
                queue = lanes[(self._turn + i) % len(lanes)]
                if not queue[0].sending and queue[0].due_ms <= now_ms:
                    self._turn = (self._turn + i + 1) % len(lanes)
                    batch = self._take(h for h in queue if not h.sending and h.due_ms <= now_ms)
                    break
        for held in batch:
            held.sending = True
        return batch

    def next_due(self) -> int | None:
        """When the first record not being sent may be sent (None: all are being sent, or none held)."""
        if self._spec.ordering is Ordering.NONE:
            return min((h.due_ms for h in self._held.values() if not h.sending), default=None)
        return min((q[0].due_ms for q in self._lanes.values() if not q[0].sending), default=None)

    def by_partition(self) -> dict[TopicPartition, list[int]]:
        """The offsets held, per partition (what a renewal names)."""
        out: dict[TopicPartition, list[int]] = {}
        for tp, offset in self._held:
            out.setdefault(tp, []).append(offset)
        return out

    def _ready(self, now_ms: int) -> Iterator[Held]:
        for queue in self._lanes.values():
            for held in queue:
                if not held.sending and held.due_ms <= now_ms:
                    yield held

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

    def _lane(self, held: Held) -> Hashable:
        ordering = self._spec.ordering
        if ordering is Ordering.PARTITION:
            return held.tp
        if ordering is Ordering.KEY:
            return held.tp, held.record.key
        return None  # one pool: any ready record may go with any other


def first_and_last(batch: Sequence[Held]) -> tuple[Coordinate, Coordinate]:
    return batch[0].coordinate, batch[-1].coordinate
