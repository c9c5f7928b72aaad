"""The share-partition state machine against a model of what KIP-932 promises.

A hypothesis state machine drives random acquire / acknowledge (ACCEPT, RELEASE, REJECT) /
renew / expire / member-leaves sequences over a log with gaps, and checks after every step
what a share group owes its users: a record is never held by two members at once, delivery
counts are exact, a record is archived at the delivery limit exactly once, nothing before the
start offset is in flight, the in-flight bound holds, the state survives a round trip through
its stored form — and, at the end, every record of the log is eventually accepted or archived.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from service.core.shares.delivery import NOT_HELD, AckType, Acquired, Delivery, ShareLimits
from service.core.shares.state import SharePartition
from service.core.shares.stored import apply_change

MEMBERS = ("a", "b", "c")
LIMITS = ShareLimits(max_in_flight=6, delivery_limit=3, lock_ms=100)


class ShareModel(RuleBasedStateMachine):
    limits = LIMITS

    @initialize(offsets=st.lists(st.integers(0, 40), min_size=1, max_size=25, unique=True).map(sorted))
    def start(self, offsets: list[int]) -> None:
        self.log = offsets
        self.state = SharePartition(0, limits=self.limits)
        self.now = 0
        self.held: dict[int, tuple[str, int]] = {}  # offset -> (member, lock until)
        self.deliveries: dict[int, int] = {}
        self.done: set[int] = set()  # accepted, rejected or archived
        self.archived: list[int] = []  # at the delivery limit, in the order reported
        self.archiving: dict[int, int] = {}  # parked: offset -> until when its claim holds

    # --- the model's own bookkeeping --------------------------------------------------------

    def _holds(self, member: str, offset: int) -> bool:
        holder = self.held.get(offset)
        return holder is not None and holder[0] == member and holder[1] > self.now

    def _returned(self, offset: int) -> None:
        """A record back from a member: archived at the limit, else available."""
        del self.held[offset]
        if self.deliveries[offset] >= self.limits.delivery_limit:
            self.archived.append(offset)
            if self.limits.park:  # until its dead-letter copy is written
                self.archiving[offset] = self.now + self.limits.lock_ms
            else:
                self.done.add(offset)

    def _expire_model(self) -> list[int]:
        expired = sorted(o for o, (_, until) in self.held.items() if until <= self.now)
        before = len(self.archived)
        for offset in expired:
            self._returned(offset)
        return self.archived[before:]

    def _check_exhausted(self, reported: list[int], expected: list[int]) -> None:
        assert sorted(reported) == sorted(expected)

    # --- rules ------------------------------------------------------------------------------

    @rule(member=st.sampled_from(MEMBERS), most=st.integers(1, 5), wait=st.integers(0, 120))
    def acquire(self, member: str, most: int, wait: int) -> None:
        self.now += wait
        expected_archived = self._expire_model()
        fresh = [o for o in self.log if o >= self.state.end]
        taken, exhausted = self.state.acquire(member, self.now, max_records=most, log_offsets=fresh)
        self._check_exhausted([e.offset for e in exhausted], expected_archived)
        assert len(taken) <= most
        for got in taken:
            assert got.offset in self.log and got.offset not in self.done
            holder = self.held.get(got.offset)
            assert holder is None or holder[1] <= self.now, f"{got.offset} is {holder[0]}'s until {holder[1]}"
            self.deliveries[got.offset] = self.deliveries.get(got.offset, 0) + 1
            assert got == Acquired(got.offset, self.deliveries[got.offset])
            self.held[got.offset] = (member, self.now + self.limits.lock_ms)

    @rule(
        member=st.sampled_from(MEMBERS),
        kind=st.sampled_from(AckType),
        pick=st.lists(st.integers(0, 40), max_size=6, unique=True),
        wait=st.integers(0, 60),
    )
    def acknowledge(self, member: str, kind: AckType, pick: list[int], wait: int) -> None:
        self.now += wait
        refused, exhausted = self.state.acknowledge(member, pick, kind, self.now, error="boom")
        expected_refused = {o for o in pick if not self._holds(member, o)}
        assert refused == dict.fromkeys(expected_refused, NOT_HELD)
        before = len(self.archived)
        for offset in pick:
            if offset in expected_refused:
                continue
            if kind is AckType.RELEASE:
                self._returned(offset)
            elif kind is AckType.RENEW:
                self.held[offset] = (member, self.now + self.limits.lock_ms)
            else:
                del self.held[offset]
                self.done.add(offset)
        self._check_exhausted([e.offset for e in exhausted], self.archived[before:])
        assert all(e.error == "boom" for e in exhausted)

    @rule(
        member=st.sampled_from(MEMBERS),
        kind=st.sampled_from(AckType),
        first=st.integers(0, 40),
        count=st.integers(1, 8),
        step=st.sampled_from([1, 2]),
        wait=st.integers(0, 60),
    )
    def acknowledge_ascending(
        self, member: str, kind: AckType, first: int, count: int, step: int, wait: int
    ) -> None:
        """Offsets as a consumer settles a poll's: ascending, in ranges (settled run by run)."""
        self.acknowledge(member, kind, list(range(first, first + count * step, step)), wait)

    @rule(member=st.sampled_from(MEMBERS), wait=st.integers(0, 60))
    def renew(self, member: str, wait: int) -> None:
        self.now += wait
        mine = [o for o, (m, _) in self.held.items() if m == member]
        refused = self.state.renew(member, mine, self.now)
        for offset in mine:
            if self._holds(member, offset):
                assert offset not in refused
                self.held[offset] = (member, self.now + self.limits.lock_ms)
            else:
                assert refused[offset] == NOT_HELD

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        exhausted = self.state.release_member(member, self.now)
        before = len(self.archived)
        for offset in sorted(o for o, (m, _) in self.held.items() if m == member):
            self._returned(offset)
        self._check_exhausted([e.offset for e in exhausted], self.archived[before:])

    @rule(wait=st.integers(0, 200))
    def time_passes(self, wait: int) -> None:
        self.now += wait
        exhausted = self.state.expire(self.now)
        self._check_exhausted([e.offset for e in exhausted], self._expire_model())

    @rule(wait=st.integers(0, 200))
    def archiving_claimed_again(self, wait: int) -> None:
        self.now += wait
        self.time_passes(0)
        claimed = self.state.claim_archiving(self.now)
        expected = sorted(o for o, until in self.archiving.items() if until <= self.now)
        assert [e.offset for e in claimed] == expected
        for offset in expected:
            self.archiving[offset] = self.now + self.limits.lock_ms

    @rule(pick=st.lists(st.integers(0, 40), max_size=6, unique=True))
    def buried(self, pick: list[int]) -> None:
        self.state.bury(pick)
        for offset in pick:
            if self.archiving.pop(offset, None) is not None:
                self.done.add(offset)

    @rule()
    def stored_now(self) -> None:
        """The state is stored: its changes count from here (``change_json`` is a delta again)."""
        self.its_changes_make_its_stored_form()
        self.base = self.state.to_json()
        self.state.stored()

    # --- what must always hold -------------------------------------------------------------

    @invariant()
    def its_changes_make_its_stored_form(self) -> None:
        """The delta stored instead of the whole state rebuilds it from the state last stored."""
        base = getattr(self, "base", SharePartition(0).to_json())
        assert apply_change(base, self.state.change_json()) == self.state.to_json()

    @invariant()
    def nothing_lost_and_bounds_kept(self) -> None:
        state = self.state
        assert len(state.records) <= self.limits.max_in_flight
        assert state.start == (min(state.records) if state.records else state.end)
        for offset in self.log:
            if offset < state.end:  # acquired once: done, or in flight
                assert (offset in self.done) != (offset in state.records), offset
            else:
                assert offset not in self.done and offset not in self.deliveries
        for offset, record in state.records.items():
            assert record.deliveries == self.deliveries[offset]
            if record.state is Delivery.ACQUIRED:
                assert (record.owner, record.lock_until_ms) == self.held[offset]
            else:
                assert offset not in self.held
            if record.state is Delivery.ARCHIVING:
                assert record.lock_until_ms == self.archiving[offset]
            else:
                assert offset not in self.archiving
        assert len(self.archived) == len(set(self.archived))  # archived, and reported, once

    @invariant()
    def every_change_is_counted(self) -> None:
        """What the state's stored form shows changed, ``changes`` counted: nothing goes unstored."""
        stored = self.state.to_json()
        if stored != getattr(self, "last_stored", None):
            assert self.state.changes > getattr(self, "last_changes", -1)
        self.last_stored, self.last_changes = stored, self.state.changes

    @invariant()
    def indexes_follow_the_records(self) -> None:
        """The available records counted and the expiry floor a poll reads instead of walking the window."""
        state = self.state
        available = {o for o, r in state.records.items() if r.state is Delivery.AVAILABLE}
        assert state._available == len(available)
        locks = [r.lock_until_ms for r in state.records.values() if r.state is Delivery.ACQUIRED]
        assert state._floor <= min(locks, default=state._floor)

    @invariant()
    def survives_its_stored_form(self) -> None:
        assert SharePartition.from_json(self.state.to_json(), self.limits) == self.state

    @invariant()
    def the_previous_versions_stored_forms_load(self) -> None:
        """A state stored, and a change made, by the previous version (a row per record) read as
        the same runs: its data still loads."""
        state = self.state
        rows = [
            [o, r.state.value, r.deliveries, r.owner, r.lock_until_ms, r.error]
            for o, r in state.records.items()
        ]
        old_state = {"start": state.start, "end": state.end, "records": rows}
        assert SharePartition.from_json(old_state, self.limits) == state
        base = getattr(self, "base", SharePartition(0).to_json())
        gone = [
            o for first, last, *_ in base["runs"] for o in range(first, last + 1) if o not in state.records
        ]
        old_change = {"start": state.start, "end": state.end, "records": rows, "drop": gone}
        assert apply_change(base, old_change) == state.to_json()

    def teardown(self) -> None:
        """At least once: members that accept what they get finish the log, whatever came before."""
        if not hasattr(self, "log"):
            return
        for _ in range(len(self.log) * self.limits.delivery_limit + 10):
            self.now += self.limits.lock_ms  # every lock held so far expires
            fresh = [o for o in self.log if o >= self.state.end]
            taken, _ = self.state.acquire("drain", self.now, max_records=100, log_offsets=fresh)
            refused, _ = self.state.acknowledge("drain", [t.offset for t in taken], AckType.ACCEPT, self.now)
            assert not refused
            self.state.claim_archiving(self.now)
            self.state.bury(list(self.state.records))  # the dead-letter copies are written
            if not self.state.records and self.state.end > self.log[-1]:
                return
        pytest.fail(f"the log was not finished: {self.state!r}")


TestShareModel = ShareModel.TestCase
TestShareModel.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)


class ParkedShareModel(ShareModel):
    """The same, with records out of delivery attempts parked for their dead-letter copy."""

    limits = ShareLimits(max_in_flight=6, delivery_limit=3, lock_ms=100, park=True)


TestParkedShareModel = ParkedShareModel.TestCase
TestParkedShareModel.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)


def test_gaps_in_the_log_are_done_and_the_start_moves_past_them() -> None:
    state = SharePartition(0, limits=LIMITS)
    taken, _ = state.acquire("a", 0, max_records=10, log_offsets=[2, 5, 9])
    assert [t.offset for t in taken] == [2, 5, 9] and state.start == 2 and state.end == 10
    state.acknowledge("a", [2, 5], AckType.ACCEPT, 1)
    assert state.start == 9 and state.lag(log_end=12) == 1 + 2


def test_a_record_released_at_the_delivery_limit_is_archived_with_its_last_error() -> None:
    state = SharePartition(0, limits=ShareLimits(delivery_limit=2, lock_ms=10))
    state.acquire("a", 0, max_records=1, log_offsets=[0])
    _, none = state.acknowledge("a", [0], AckType.RELEASE, 1, error="first try failed")
    assert none == [] and state.records[0].state is Delivery.AVAILABLE
    [again], _ = state.acquire("b", 2, max_records=1)
    assert again == Acquired(0, 2)
    _, [gone] = state.acknowledge("b", [0], AckType.RELEASE, 3, error="second try failed")
    assert (gone.offset, gone.deliveries, gone.error) == (0, 2, "second try failed")
    assert state.start == state.end == 1 and not state.records


def test_an_expired_lock_frees_the_record_for_another_member() -> None:
    state = SharePartition(0, limits=ShareLimits(lock_ms=10))
    state.acquire("a", 0, max_records=1, log_offsets=[0])
    assert state.acquire("b", 5, max_records=1)[0] == []  # a's lock holds
    assert state.acquire("b", 10, max_records=1)[0] == [Acquired(0, 2)]
    refused, _ = state.acknowledge("a", [0], AckType.ACCEPT, 11)
    assert refused == {0: NOT_HELD}  # too late: b holds it now


def test_the_in_flight_bound_stops_new_records_not_redeliveries() -> None:
    state = SharePartition(0, limits=ShareLimits(max_in_flight=2, lock_ms=10))
    taken, _ = state.acquire("a", 0, max_records=5, log_offsets=[0, 1, 2, 3])
    assert [t.offset for t in taken] == [0, 1] and state.end == 2
    state.acknowledge("a", [1], AckType.ACCEPT, 1)
    taken, _ = state.acquire("b", 2, max_records=5, log_offsets=[2, 3])
    assert [t.offset for t in taken] == [2]  # 0 still a's, one slot free


def test_truncate_and_reset() -> None:
    state = SharePartition(0, limits=LIMITS)
    state.acquire("a", 0, max_records=3, log_offsets=[0, 1, 2])
    state.truncate(2)
    assert state.start == 2 and list(state.records) == [2]
    state.reset(50)
    assert (state.start, state.end, state.records) == (50, 50, {})


def test_a_full_window_with_errors_stays_small_enough_to_store() -> None:
    import json

    from service.core.shares.delivery import MAX_ERROR_CHARS

    state = SharePartition(0, limits=ShareLimits(max_in_flight=2000, delivery_limit=5, lock_ms=10))
    state.acquire("a-member-with-a-long-name", 0, max_records=2000, log_offsets=range(10**12, 10**12 + 2000))
    offsets = list(state.records)
    state.acknowledge("a-member-with-a-long-name", offsets, AckType.RELEASE, 1, error="x" * 10_000)
    assert all(len(r.error or "") == MAX_ERROR_CHARS for r in state.records.values())
    assert len(json.dumps(state.to_json())) < 512 * 1024
