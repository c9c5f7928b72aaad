"""The leases of waiting instances, renewed together (``service.core.consumers.leases``), on the
embedded sessions with a clock the test moves."""

from __future__ import annotations

from service.adapters.embedded.sessions import EmbeddedSessions
from service.core.consumers.leases import WaitingLeases
from service.core.models import InstanceConfig, InstanceState

TIMEOUT_MS = 3_000
WAIT_MS = 60_000  # longer than any renewal these tests wait for


async def _setup() -> tuple[EmbeddedSessions, WaitingLeases, InstanceState, list[int]]:
    now = [1_000_000]
    sessions = EmbeddedSessions()
    state = InstanceState("g", "c", InstanceConfig(instance_timeout_ms=TIMEOUT_MS), now[0], now[0])
    await sessions.create(state)
    return sessions, WaitingLeases(sessions, lambda: now[0]), state, now


async def test_a_waiting_lease_is_renewed_a_third_of_its_length_after_its_last_renewal() -> None:
    sessions, leases, state, now = await _setup()
    with leases.holding(state, WAIT_MS):
        now[0] += TIMEOUT_MS // 3 - 1
        assert await leases.renew() == 0  # not due yet
        now[0] += 1
        assert await leases.renew() == 1
        assert (await sessions.load("g", "c")).last_seen_ms == now[0]
        now[0] += TIMEOUT_MS // 3
        assert await leases.renew() == 1  # and every third after
    now[0] += TIMEOUT_MS
    assert await leases.renew() == 0  # no wait open: nothing renews it
    assert await sessions.expired(now[0] + 1) == [("g", "c")]


async def test_a_wait_opened_long_after_the_last_request_is_renewed_at_once() -> None:
    """A poll that starts when most of the lease is gone must not let it run out while it waits."""
    _, leases, state, now = await _setup()
    now[0] += TIMEOUT_MS - 100
    with leases.holding(state, WAIT_MS):
        assert await leases.renew() == 1


async def test_many_waits_of_one_instance_keep_one_renewal_each() -> None:
    """A client polling again and again leaves one entry behind, not one per poll."""
    _, leases, state, now = await _setup()
    for _ in range(1_000):
        with leases.holding(state, WAIT_MS):
            now[0] += 10
            await leases.renew()
    assert leases.scheduled <= 2 + TIMEOUT_MS // 3 // 10, leases.scheduled
    with leases.holding(state, WAIT_MS), leases.holding(state, WAIT_MS):
        now[0] += TIMEOUT_MS // 3
        assert await leases.renew() == 1  # two waits of one instance: one renewal


async def test_a_wait_that_ends_before_a_renewal_is_due_is_not_registered() -> None:
    """The common long-poll (up to 60 s against a 300 s lease) costs the renewals nothing."""
    _, leases, state, _ = await _setup()
    with leases.holding(state, TIMEOUT_MS // 3 - 1):
        assert leases.waiting == 0 and leases.scheduled == 0
    with leases.holding(state, TIMEOUT_MS // 3):
        assert leases.waiting == 1
