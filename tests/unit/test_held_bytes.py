"""The byte budgets of a WebSocket's messages held unanswered: per socket, per holder, given back."""

from __future__ import annotations

import asyncio

from service.core.credit import HeldBudgets, HeldBytes


async def _settled() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_take_waits_until_its_bytes_fit() -> None:
    held = HeldBytes(100)
    assert await held.take(60) == 60
    waiting = asyncio.ensure_future(held.take(50))
    await _settled()
    assert not waiting.done() and held.held == 60
    held.give_back(60)
    assert await waiting == 50 and held.held == 50


async def test_more_than_the_whole_budget_is_taken_alone() -> None:
    held = HeldBytes(100)
    assert await held.take(10) == 10
    alone = asyncio.ensure_future(held.take(1_000))
    await _settled()
    assert not alone.done()
    held.give_back(10)
    assert await alone == 100 and held.held == 100  # counted as the whole budget: nothing else fits


async def test_a_holders_sockets_share_its_budget_and_give_it_back() -> None:
    budgets = HeldBudgets(per_socket=100, per_holder=150)
    with (
        budgets.budget("User:alice") as a,
        budgets.budget("User:alice") as b,
        budgets.budget("User:bob") as c,
    ):
        first = await a.reserve(100)
        assert (await c.reserve(100)) is not None  # another holder's budget is its own
        waiting = asyncio.ensure_future(b.reserve(60))  # b's own has room, alice's does not
        await _settled()
        assert not waiting.done() and budgets.held("User:alice") == 100
        first.release()
        first.release()  # once, however often
        second = await waiting
        assert budgets.held("User:alice") == 60
        unanswered = await a.reserve(50)  # dropped with its stream: given back when it closes
        assert budgets.held("User:alice") == 110
        del second, unanswered
    assert budgets.held("User:alice") == budgets.held("User:bob") == 0


async def test_a_reservation_cancelled_while_waiting_holds_nothing() -> None:
    budgets = HeldBudgets(per_socket=100, per_holder=100)
    with budgets.budget("h") as a, budgets.budget("h") as b:
        kept = await a.reserve(100)
        waiting = asyncio.ensure_future(b.reserve(10))  # own taken, waiting for the holder's
        await _settled()
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        assert b.own.held == 0 and budgets.held("h") == 100
        kept.release()
        assert budgets.held("h") == 0
