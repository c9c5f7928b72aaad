"""What a push deliverer holds: which records may go together now, by ordering, batching and
back-off, and that every record taken leaves by ``remove`` or comes back by ``back``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.core.models import Record, TopicPartition
from service.core.push.holding import Held, Holding, by_partition
from service.core.push.spec import Ordering, PushSpec
from service.core.shares.delivered import Delivered

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def spec(ordering: Ordering = Ordering.NONE, max_records: int = 10, max_bytes: int = 1 << 20) -> PushSpec:
    return PushSpec(
        "https://h.example.com/",
        topics=("t",),
        ordering=ordering,
        max_records=max_records,
        max_bytes=max_bytes,
    )


def records(tp: TopicPartition, offsets: range, key: bytes | None = None) -> list[Delivered]:
    return [Delivered(tp, Record(o, 0, key, b"v" * 10), 1) for o in offsets]


def coordinates(batch: list[Held]) -> list[tuple[int, int]]:
    return [(h.tp.partition, h.record.offset) for h in batch]


def test_without_ordering_any_ready_records_go_together_up_to_the_batch() -> None:
    h = Holding(spec(max_records=3))
    assert h.add(records(A, range(4)) + records(B, range(2)), now_ms=0) == 6
    assert h.add(records(A, range(2)), now_ms=0) == 0  # held already: kept as they are
    first, second = h.next_batch(0), h.next_batch(0)
    assert coordinates(first) == [(0, 0), (0, 1), (0, 2)]
    assert coordinates(second) == [(0, 3), (1, 0), (1, 1)]
    assert all(x.sending for x in first + second)
    assert h.next_batch(0) == [] and h.next_due() is None  # all of them are being sent
    h.remove(first)
    assert len(h) == 3 and sorted(coordinates(list(h))) == [(0, 3), (1, 0), (1, 1)]


def test_a_batch_stops_at_its_bytes_but_always_carries_one() -> None:
    h = Holding(spec(max_bytes=25))  # a record is 10 bytes and its overhead
    h.add(records(A, range(3)), now_ms=0)
    sizes = [len(h.next_batch(0)) for _ in range(3)]
    assert sizes[0] >= 1 and sum(sizes) == 3


def test_a_record_sent_back_waits_out_its_back_off_and_then_goes_first() -> None:
    h = Holding(spec(max_records=2))
    h.add(records(A, range(4)), now_ms=0)
    failed = h.next_batch(0)
    for x in failed:
        x.due_ms = 100
    h.back(failed)
    assert not any(x.sending for x in failed)
    assert coordinates(h.next_batch(50)) == [(0, 2), (0, 3)]  # the others go meanwhile
    assert h.next_batch(50) == [] and h.next_due() == 100
    assert coordinates(h.next_batch(100)) == [(0, 0), (0, 1)]


def test_with_partition_ordering_a_lane_waits_for_its_head_to_be_settled() -> None:
    h = Holding(spec(Ordering.PARTITION, max_records=2))
    h.add(records(A, range(3)) + records(B, range(1)), now_ms=0)
    one, two = h.next_batch(0), h.next_batch(0)
    assert {tuple(coordinates(one)), tuple(coordinates(two))} == {((0, 0), (0, 1)), ((1, 0),)}
    a = one if one[0].tp == A else two
    assert h.next_batch(0) == []  # (0, 2) waits for (0, 0) and (0, 1)
    h.remove(a)
    assert coordinates(h.next_batch(0)) == [(0, 2)]


def test_an_ordered_run_stops_at_the_first_record_that_may_not_go() -> None:
    h = Holding(spec(Ordering.PARTITION))
    h.add(records(A, range(3)), now_ms=0)
    batch = h.next_batch(0)
    batch[0].due_ms, batch[1].due_ms, batch[2].due_ms = 10, 50, 10  # one was retried more often
    h.back(batch)
    assert h.next_batch(5) == [] and h.next_due() == 10
    assert coordinates(h.next_batch(10)) == [(0, 0)]  # not (0, 2) before (0, 1)


def test_with_key_ordering_each_key_is_a_lane() -> None:
    h = Holding(spec(Ordering.KEY))
    h.add(records(A, range(0, 2), b"x") + records(A, range(2, 4), b"y"), now_ms=0)
    x, y = h.next_batch(0), h.next_batch(0)
    assert sorted([coordinates(x), coordinates(y)]) == [[(0, 0), (0, 1)], [(0, 2), (0, 3)]]


def test_a_record_removed_while_waiting_is_never_handed_out() -> None:
    for ordering in Ordering:
        h = Holding(spec(ordering))
        h.add(records(A, range(3)), now_ms=0)
        lost = [x for x in h if x.record.offset == 1]  # its lock ran out: someone else's now
        h.remove(lost)
        assert coordinates(h.next_batch(0)) == [(0, 0), (0, 2)]  # in a lane too: it is not this one's
        assert (0, 1) not in coordinates(list(h)) and len(h) == 2


def test_by_partition_keeps_order_within_each() -> None:
    items = Holding(spec())
    items.add(records(A, range(2)) + records(B, range(2)) + records(A, range(2, 3)), now_ms=0)
    grouped = by_partition(list(items))
    assert {tp: [x.record.offset for x in run] for tp, run in grouped.items()} == {A: [0, 1, 2], B: [0, 1]}
    assert items.by_partition() == {A: [0, 1, 2], B: [0, 1]}


@settings(max_examples=200, deadline=None)
@given(
    ordering=st.sampled_from(list(Ordering)),
    max_records=st.integers(1, 4),
    steps=st.lists(st.tuples(st.sampled_from(["settle", "back"]), st.integers(0, 3)), max_size=40),
)
def test_every_record_is_settled_once_and_in_its_lane_s_order(
    ordering: Ordering, max_records: int, steps: list[tuple[str, int]]
) -> None:
    """Whatever comes back unsettled and when, every record is settled once in the end, and with
    ordering a lane's records are settled in offset order."""
    h = Holding(spec(ordering, max_records=max_records))
    keys = [b"k0", b"k1"]
    h.add([Delivered(tp, Record(o, 0, keys[o % 2], b"v"), 1) for tp in (A, B) for o in range(6)], now_ms=0)
    now, settled, out = 0, [], []
    for what, wait in [*steps, *[("settle", 0)] * 100]:
        batch = h.next_batch(now)
        if batch:
            out.append(batch)
        if not out:
            now = h.next_due() or now
            continue
        taken = out.pop(0)
        if what == "settle":
            h.remove(taken)
            settled += [(x.tp, x.record.offset, x.record.key) for x in taken]
        else:
            for x in taken:
                x.due_ms = now + wait
            h.back(taken)
        now += 1
    assert len(h) == 0 and len(settled) == len(set(settled)) == 12
    if ordering is not Ordering.NONE:
        for tp in (A, B):
            for key in keys:
                lane = [o for t, o, k in settled if t == tp and (ordering is Ordering.PARTITION or k == key)]
                assert lane == sorted(lane)
