"""``ShareGroups`` over a real log and real coordinators: what KIP-932 promises its members.

Two ``ShareGroups`` over one coordinator are two replicas: on ZooKeeper each has its own
coordinator session on the same chroot, so their stores race through ZooKeeper's versions. The
clock is the test's, so lock expiry is exact.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.adapters.embedded.log import EmbeddedLog
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.core.models import NewRecord, TopicPartition
from service.core.ports import Coordinator
from service.core.shares import service as share_service
from service.core.shares.dead_letters import DeadLetters
from service.core.shares.delivery import NOT_HELD, AckType, ShareLimits
from service.core.shares.service import Acknowledgement, ShareGroups
from service.core.topics import TopicService
from tests.integration.zookeeper.conftest import (
    CONNECT_TIMEOUT_MS,
    REQUEST_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    chroot_url,
)

TP = TopicPartition("jobs", 0)
LIMITS = ShareLimits(max_in_flight=50, delivery_limit=3, lock_ms=1000)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[EmbeddedLog]:
    embedded = EmbeddedLog(tmp_path / "log")
    await embedded.start()
    await embedded.create_topic("jobs", 2, 1, {})
    await embedded.append(TP, [NewRecord(None, f"job-{i}".encode()) for i in range(20)])
    try:
        yield embedded
    finally:
        await embedded.stop()


@pytest.fixture(params=["embedded", "zookeeper"])
async def coordinators(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[Coordinator]]:
    """Two coordinators of one deployment (one, shared, for the embedded coordinator)."""
    started: list[Coordinator] = []
    if request.param == "embedded":
        one = EmbeddedCoordinator(tmp_path / "coordinator")
        await one.start()
        started = [one, one]
    else:
        url = chroot_url(request.getfixturevalue("zookeeper"))
        for node in ("replica-a", "replica-b"):
            c = ZooKeeperCoordinator(
                url,
                node_id=node,
                session_timeout_ms=SESSION_TIMEOUT_MS,
                connect_timeout_ms=CONNECT_TIMEOUT_MS,
                request_timeout_ms=REQUEST_TIMEOUT_MS,
            )
            await c.start()
            started.append(c)
    try:
        yield started
    finally:
        for c in {id(c): c for c in started}.values():
            await c.stop()


def replicas(log: EmbeddedLog, coordinators: list[Coordinator], clock: Clock) -> list[ShareGroups]:
    return [ShareGroups(log, c, limits=LIMITS, clock=clock) for c in coordinators]


async def test_members_on_two_replicas_never_hold_one_record_and_every_record_is_done_once(
    log: EmbeddedLog, coordinators: list[Coordinator]
) -> None:
    clock = Clock()
    a, b = replicas(log, coordinators, clock)
    delivered: Counter[int] = Counter()

    async def work(groups: ShareGroups, member: str) -> None:
        while True:
            got, _ = await groups.acquire(
                "workers", member, [TP], max_records=3, max_bytes=1 << 20, wait_ms=0, start_at="earliest"
            )
            if not got:
                return
            for d in got:
                delivered[d.record.offset] += 1
            refused, _ = await groups.acknowledge(
                "workers", member, [Acknowledgement(TP, tuple(d.record.offset for d in got), AckType.ACCEPT)]
            )
            assert not refused

    await asyncio.gather(work(a, "m1"), work(b, "m2"), work(a, "m3"), work(b, "m4"))
    assert sorted(delivered) == list(range(20)) and set(delivered.values()) == {1}
    [report] = await a.describe("workers")
    assert (report.start, report.end, report.available, report.acquired, report.lag) == (20, 20, 0, 0, 0)


async def test_release_expiry_and_the_delivery_limit(
    log: EmbeddedLog, coordinators: list[Coordinator]
) -> None:
    clock = Clock()
    a, b = replicas(log, coordinators, clock)
    got, _ = await a.acquire(
        "g", "m1", [TP], max_records=2, max_bytes=1 << 20, wait_ms=0, start_at="earliest"
    )
    assert [(d.record.offset, d.deliveries) for d in got] == [(0, 1), (1, 1)]
    # released: offered again at once, through the other replica, with its delivery count
    refused, _ = await a.acknowledge("g", "m1", [Acknowledgement(TP, (0,), AckType.RELEASE, "flaky")])
    assert not refused
    got, _ = await b.acquire("g", "m2", [TP], max_records=1, max_bytes=1 << 20, wait_ms=0)
    assert [(d.record.offset, d.deliveries) for d in got] == [(0, 2)]
    # m1 still holds 1 until its lock expires; then m2 gets it
    got, _ = await b.acquire("g", "m2", [TP], max_records=1, max_bytes=1 << 20, wait_ms=0)
    assert [d.record.offset for d in got] == [2]
    clock.now += LIMITS.lock_ms / 1000
    got, _ = await b.acquire("g", "m2", [TP], max_records=2, max_bytes=1 << 20, wait_ms=0)
    assert [(d.record.offset, d.deliveries) for d in got] == [(0, 3), (1, 2)]  # m2's locks expired too
    refused, _ = await a.acknowledge("g", "m1", [Acknowledgement(TP, (1,), AckType.ACCEPT)])
    assert refused == {TP: {1: NOT_HELD}}  # too late for m1
    # offset 0's third delivery fails: archived, reported once with the worker's error
    _, exhausted = await b.acknowledge(
        "g", "m2", [Acknowledgement(TP, (0,), AckType.RELEASE, "still failing")]
    )
    assert [(tp, e.offset, e.deliveries, e.error) for tp, e in exhausted] == [(TP, 0, 3, "still failing")]
    got, _ = await a.acquire("g", "m1", [TP], max_records=20, max_bytes=1 << 20, wait_ms=0)
    assert 0 not in [d.record.offset for d in got]


async def test_a_member_that_leaves_gives_back_what_it_held(
    log: EmbeddedLog, coordinators: list[Coordinator]
) -> None:
    clock = Clock()
    a, b = replicas(log, coordinators, clock)
    got, _ = await a.acquire(
        "g", "m1", [TP], max_records=5, max_bytes=1 << 20, wait_ms=0, start_at="earliest"
    )
    assert len(got) == 5
    await a.leave("g", "m1", [TP])
    got, _ = await b.acquire("g", "m2", [TP], max_records=5, max_bytes=1 << 20, wait_ms=0)
    assert [(d.record.offset, d.deliveries) for d in got] == [(o, 2) for o in range(5)]


async def test_start_at_latest_reads_only_what_comes_after_and_a_wait_ends_when_it_comes(
    log: EmbeddedLog, coordinators: list[Coordinator]
) -> None:
    a, _ = replicas(log, coordinators, Clock())
    got, _ = await a.acquire("late", "m1", [TP], max_records=5, max_bytes=1 << 20, wait_ms=0)
    assert got == []  # the group starts at the end: the 20 records before are not its

    async def produce_soon() -> None:
        await asyncio.sleep(0.2)
        await log.append(TP, [NewRecord(None, b"new")])

    task = asyncio.create_task(produce_soon())
    got, _ = await a.acquire("late", "m1", [TP], max_records=5, max_bytes=1 << 20, wait_ms=5000)
    await task
    assert [(d.record.offset, d.record.value) for d in got] == [(20, b"new")]


async def test_reset_and_renew(log: EmbeddedLog, coordinators: list[Coordinator]) -> None:
    clock = Clock()
    a, _ = replicas(log, coordinators, clock)
    got, _ = await a.acquire(
        "g", "m1", [TP], max_records=2, max_bytes=1 << 20, wait_ms=0, start_at="earliest"
    )
    clock.now += 0.9
    refused, _ = await a.acknowledge("g", "m1", [Acknowledgement(TP, (0, 1, 7), AckType.RENEW)])
    assert refused == {TP: {7: NOT_HELD}}
    clock.now += 0.9  # past the first lock, within the renewed one
    refused, _ = await a.acknowledge("g", "m1", [Acknowledgement(TP, (0, 1), AckType.ACCEPT)])
    assert not refused
    await a.reset("g", [TP], {TP: 15})
    got, _ = await a.acquire("g", "m1", [TP], max_records=10, max_bytes=1 << 20, wait_ms=0)
    assert [d.record.offset for d in got] == list(range(15, 20))


async def test_a_record_out_of_attempts_is_copied_to_the_dead_letter_topic_once(
    log: EmbeddedLog, coordinators: list[Coordinator]
) -> None:
    """Released by members of two replicas until the limit: one copy, with where it came from and
    the last error; a copy that cannot be written waits, counted, until a sweep writes it."""
    clock = Clock()
    topics = TopicService(log, auto_create=True, default_partitions=1)
    parked = ShareLimits(max_in_flight=50, delivery_limit=2, lock_ms=1000, park=True)
    a, b = (
        ShareGroups(log, c, limits=parked, dead_letters=DeadLetters(log, topics, "{group}.dlq"), clock=clock)
        for c in coordinators
    )
    for attempt, groups in enumerate((a, b)):
        got, _ = await groups.acquire(
            "g", f"m{attempt}", [TP], max_records=1, max_bytes=1 << 20, wait_ms=0, start_at="earliest"
        )
        assert [(d.record.offset, d.deliveries) for d in got] == [(0, attempt + 1)]
        await groups.acknowledge(
            "g", f"m{attempt}", [Acknowledgement(TP, (0,), AckType.RELEASE, error=f"boom {attempt}")]
        )
    copies = (await log.fetch({TopicPartition("g.dlq", 0): 0}, max_bytes=1 << 20, max_wait_ms=0))[
        TopicPartition("g.dlq", 0)
    ].records
    assert [(c.value, dict(c.headers)) for c in copies] == [
        (
            b"job-0",
            {
                "dlq.group": b"g",
                "dlq.topic": b"jobs",
                "dlq.partition": b"0",
                "dlq.offset": b"0",
                "dlq.delivery.count": b"2",
                "dlq.error": b"boom 1",
            },
        )
    ]
    [report] = await a.describe("g")
    assert (report.start, report.archiving) == (1, 0)  # buried: done

    # A copy that cannot be written (no legal topic name) stays archiving, and holds the start.
    for groups in (a, b):
        assert groups.dead_letters is not None
        groups.dead_letters.template = "{group}/dlq"
    for _ in range(2):
        got, _ = await a.acquire("g", "m", [TP], max_records=1, max_bytes=1 << 20, wait_ms=0)
        assert [d.record.offset for d in got] == [1]
        await a.acknowledge("g", "m", [Acknowledgement(TP, (1,), AckType.RELEASE)])
    [report] = await a.describe("g")
    assert (report.start, report.archiving) == (1, 1)
    for groups in (a, b):
        assert groups.dead_letters is not None
        groups.dead_letters.template = "{group}.dlq"
    assert await b.sweep() == 0  # its claim holds yet
    clock.now += 1.0
    assert await b.sweep() == 1 and await a.sweep() == 0  # claimed by one, written once
    copies = (await log.fetch({TopicPartition("g.dlq", 0): 0}, max_bytes=1 << 20, max_wait_ms=0))[
        TopicPartition("g.dlq", 0)
    ].records
    assert [(c.offset, dict(c.headers)["dlq.offset"]) for c in copies] == [(0, b"0"), (1, b"1")]
    [report] = await a.describe("g")
    assert (report.start, report.archiving) == (2, 0)


class CountingCoordinator:
    """A coordinator that counts the share-state reads made through it."""

    def __init__(self, inner: Coordinator) -> None:
        self.inner = inner
        self.reads = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def share_states(self, *args: object, **kw: object) -> object:
        self.reads += 1
        return await self.inner.share_states(*args, **kw)  # type: ignore[arg-type]


async def test_a_poll_on_a_full_window_waits_instead_of_spinning(
    log: EmbeddedLog, coordinators: list[Coordinator]
) -> None:
    """Every record a partition may have in flight is held: another member's poll waits out its
    time (or the first lock's expiry) with a few reads of the state, not thousands."""
    counting = CountingCoordinator(coordinators[0])
    groups = ShareGroups(log, counting, limits=ShareLimits(max_in_flight=5, lock_ms=60_000))  # type: ignore[arg-type]
    got, _ = await groups.acquire(
        "full", "m1", [TP], max_records=10, max_bytes=1 << 20, wait_ms=0, start_at="earliest"
    )
    assert len(got) == 5
    counting.reads = 0
    got, _ = await groups.acquire("full", "m2", [TP], max_records=10, max_bytes=1 << 20, wait_ms=600)
    assert got == [] and counting.reads <= 5, counting.reads


async def test_a_full_partition_does_not_starve_the_others(
    log: EmbeddedLog, coordinators: list[Coordinator]
) -> None:
    """Partition 0's window is full (held by m1) and has records past it; partition 1 has records:
    a poll of m2 whose byte budget partition 0 alone would fill gets partition 1's, at once."""
    groups = ShareGroups(log, coordinators[0], limits=ShareLimits(max_in_flight=5, lock_ms=60_000))
    other = TopicPartition("jobs", 1)
    await log.append(other, [NewRecord(None, f"other-{i}".encode()) for i in range(5)])
    got, _ = await groups.acquire(
        "busy", "m1", [TP], max_records=10, max_bytes=1 << 20, wait_ms=0, start_at="earliest"
    )
    assert len(got) == 5
    for _ in range(5):  # whichever partition the log is read from first
        got, _ = await groups.acquire(
            "busy", "m2", [TP, other], max_records=1, max_bytes=20, wait_ms=2000, start_at="earliest"
        )
        assert [d.tp for d in got] == [other]


async def test_an_acquisition_reads_a_bounded_slice_of_the_log(
    log: EmbeddedLog, coordinators: list[Coordinator]
) -> None:
    """A poll with the largest byte budget still reads at most a slice of the log: what it does not
    hand out would be read again by the next poll."""
    budgets: list[int] = []
    fetch = log.fetch

    async def counted(positions: Any, *, max_bytes: int, **kw: Any) -> Any:
        budgets.append(max_bytes)
        return await fetch(positions, max_bytes=max_bytes, **kw)

    log.fetch = counted  # type: ignore[method-assign]
    groups = ShareGroups(log, coordinators[0], limits=LIMITS)
    got, _ = await groups.acquire(
        "slices", "m1", [TP], max_records=3, max_bytes=64 << 20, wait_ms=0, start_at="earliest"
    )
    assert len(got) == 3 and budgets and max(budgets) <= 1 << 20


async def test_a_poll_waiting_on_a_full_window_wakes_when_a_member_here_settles(
    log: EmbeddedLog, coordinators: list[Coordinator], monkeypatch: pytest.MonkeyPatch
) -> None:
    """m1 holds every record the window allows; m2 waits. m1 accepts one: m2 is woken at once (its
    slice made long here, so only the wake can end its wait in time) and takes the next record."""
    monkeypatch.setattr(share_service, "_WAIT_SLICE_MS", 60_000)
    groups = ShareGroups(log, coordinators[0], limits=ShareLimits(max_in_flight=5, lock_ms=120_000))
    got, _ = await groups.acquire(
        "woken", "m1", [TP], max_records=10, max_bytes=1 << 20, wait_ms=0, start_at="earliest"
    )
    assert [d.record.offset for d in got] == [0, 1, 2, 3, 4]
    waiting = asyncio.create_task(
        groups.acquire("woken", "m2", [TP], max_records=10, max_bytes=1 << 20, wait_ms=60_000)
    )
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await groups.acknowledge("woken", "m1", [Acknowledgement(TP, (0,), AckType.ACCEPT)])
    got, _ = await asyncio.wait_for(waiting, 10)
    assert [d.record.offset for d in got] == [5]
