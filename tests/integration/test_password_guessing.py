"""A client guessing passwords over HTTP Basic, against a real gateway: it is answered 429 once
over its budget, it does not make another user's sign-in wait behind its guesses, it cannot lock
out a user whose password was verified (not at the user's own address, not for the user's name),
and an unknown name is answered exactly as a known one.

Each client connects from its own loopback address (127.0.0.0/8 is all this machine's), which is
what the gateway tells clients apart by before they authenticate.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from websockets.asyncio.client import connect

from service.security.users import add_user
from tests.conftest import RunningGateway, running_gateway
from tests.helpers import STRING, consumer, create_topic, subscribe
from tests.stream_client import EVENT_STREAM, EventReader, receive, send, socket_url

GUESSERS = 40  # concurrent wrong-password loops, as in the finding
LOOPS = 8  # the loops guessing a user's password at its own address, as in issue 34
# A remembered password costs a lookup, no hash and no budget: each of its requests is answered
# well within the one second the shortest Retry-After would have made it wait.
PROMPT_S = 1.0


def client_at(gw: RunningGateway, address: str, auth: tuple[str, str] | None = None) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=gw.url, transport=transport, timeout=120, auth=auth)


@asynccontextmanager
async def gateway(tmp_path, **overrides: object) -> AsyncIterator[RunningGateway]:
    users = tmp_path / "users"
    add_user(users, "alice", "alice-pw")
    add_user(users, "bob", "bob-pw")
    async with running_gateway(tmp_path / "data", auth="basic", users_file=users, **overrides) as gw:
        yield gw


@pytest.fixture
async def roomy(tmp_path) -> AsyncIterator[RunningGateway]:
    """Budgets no test here exhausts: what is left to prove is the order of the hashing turns."""
    roomy = {"password_guesses_per_address": 100_000, "password_guesses_per_user": 100_000}
    async with gateway(tmp_path, **roomy) as gw:
        yield gw


@pytest.fixture
async def strict(tmp_path) -> AsyncIterator[RunningGateway]:
    strict = {
        "password_guesses_per_address": 5,
        "password_guesses_per_user": 3,
        "password_guess_refill_s": 600,
    }
    async with gateway(tmp_path, **strict) as gw:
        yield gw


async def test_a_first_sign_in_does_not_wait_behind_another_clients_guesses(roomy):
    """While 40 loops guess bob's password from one address, alice's first sign-in from another
    is hashed at the next free turn: only the guesses already being hashed finish before it,
    not the queue of forty (all hashing shared one first-come queue before)."""
    answered: list[int] = []
    stop = asyncio.Event()
    queue_full = asyncio.Event()

    async def guess(client: httpx.AsyncClient, n: int) -> None:
        while not stop.is_set():
            r = await client.get("/topics", auth=("bob", f"guess-{n}"))
            answered.append(r.status_code)
            if len(answered) >= GUESSERS:  # every loop has been round once: the queue is full
                queue_full.set()

    async with client_at(roomy, "127.0.0.1") as guesser, client_at(roomy, "127.0.0.2") as alice:
        loops = [asyncio.create_task(guess(guesser, n)) for n in range(GUESSERS)]
        try:
            await queue_full.wait()
            before = len(answered)
            r = await alice.get("/topics", auth=("alice", "alice-pw"))
            overtaking = len(answered) - before
        finally:
            stop.set()
            await asyncio.gather(*loops)
    assert r.status_code == 200, r.text
    assert set(answered) == {401}  # the guesses were all hashed and refused, none throttled here
    # Two turns: at most the guesses hashing when she came and one beside her own hash finish
    # first; behind one shared queue it would be all forty.
    assert overtaking < GUESSERS // 4, overtaking


async def test_a_guesser_is_answered_429_and_no_one_else_is(strict, caplog):
    """40 loops guessing bob's password from one address: past its budget, 429 (42901) with
    Retry-After, audited; alice from another address signs in, and so do bob and alice from
    where they signed in before, the guesser's address included (a guesser cannot lock a user
    out of where it works), and bob from a new place too: his name's budget is spent, but it
    gates only passwords not yet verified."""
    async with client_at(strict, "127.0.0.4", ("bob", "bob-pw")) as bob_at_work:
        assert (await bob_at_work.get("/topics")).status_code == 200
    async with client_at(strict, "127.0.0.1", ("alice", "alice-pw")) as alice_beside_guesser:
        assert (await alice_beside_guesser.get("/topics")).status_code == 200
    statuses: list[httpx.Response] = []

    async def guess(client: httpx.AsyncClient, n: int) -> None:
        for _ in range(3):
            statuses.append(await client.get("/topics", auth=("bob", f"guess-{n}")))

    with caplog.at_level("INFO", logger="brokergate.audit"):
        async with client_at(strict, "127.0.0.1") as guesser:
            await asyncio.gather(*(guess(guesser, n) for n in range(GUESSERS)))
    codes = [r.status_code for r in statuses]
    assert set(codes) == {401, 429}, codes
    assert codes.count(401) <= 5  # its address's budget: no more were hashed
    throttled = next(r for r in statuses if r.status_code == 429)
    assert throttled.json()["error_code"] == 42901 and throttled.json()["message"]
    assert int(throttled.headers["retry-after"]) >= 1
    audited = [r.getMessage() for r in caplog.records if r.name == "brokergate.audit"]
    assert any(
        '"event": "authentication"' in line
        and '"principal": "User:bob"' in line
        and '"outcome": "FAILED"' in line
        and throttled.json()["message"] in line
        for line in audited
    ), audited

    async with client_at(strict, "127.0.0.2", ("alice", "alice-pw")) as alice:
        assert (await alice.get("/topics")).status_code == 200
    async with client_at(strict, "127.0.0.4", ("bob", "bob-pw")) as bob_at_work:
        assert (await bob_at_work.get("/topics")).status_code == 200
    async with client_at(strict, "127.0.0.1", ("alice", "alice-pw")) as alice_beside_guesser:
        assert (await alice_beside_guesser.get("/topics")).status_code == 200
    async with client_at(strict, "127.0.0.3", ("bob", "bob-pw")) as bob_elsewhere:
        r = await bob_elsewhere.get("/topics")  # his name's budget is spent, but not on his password
        assert r.status_code == 200, r.text
    async with client_at(strict, "127.0.0.5", ("bob", "not-checked-yet")) as someone_new:
        r = await someone_new.get("/topics")  # what it gates: a password not yet verified, from a new place
        assert r.status_code == 429 and r.json()["error_code"] == 42901, r.text


async def test_a_guesser_at_a_users_own_address_does_not_lock_it_out(strict, name):
    """8 loops guess alice's password from 127.0.0.1, where she signed in and goes on working:
    past the budgets their guesses are answered 429, and not one of her requests is, nor waits:
    her produce (the fast path), a long-poll, an SSE stream and a WebSocket, each opened and
    answered while the loops guess. (Every budget was asked before her remembered password was:
    the one of her name at that address, spent by the guesser, refused her for ten minutes.)"""
    async with client_at(strict, "127.0.0.1", ("alice", "alice-pw")) as alice:
        await create_topic(alice, name)
        bases = {kind: await consumer(alice, f"{name}-{kind}") for kind in ("poll", "sse", "socket")}
        for base in bases.values():
            await subscribe(alice, base, name)
        guessed: list[int] = []
        over_budget, stop = asyncio.Event(), asyncio.Event()

        async def guess(client: httpx.AsyncClient, n: int) -> None:
            tries = 0
            while not stop.is_set():
                r = await client.get("/topics", auth=("alice", f"guess-{n}-{tries}"))
                guessed.append(r.status_code)
                tries += 1
                if r.status_code == 429:
                    over_budget.set()

        async with client_at(strict, "127.0.0.1") as guesser:
            loops = [asyncio.create_task(guess(guesser, n)) for n in range(LOOPS)]
            try:
                await asyncio.wait_for(over_budget.wait(), 60)
                waited = await alice_works(strict, alice, name, bases)
            finally:
                stop.set()
                await asyncio.gather(*loops)
    assert set(guessed) == {401, 429}, set(guessed)  # the guesser, though, was held to its budget
    assert all(seconds < PROMPT_S for seconds in waited.values()), sorted(waited.items())


async def alice_works(
    gw: RunningGateway, alice: httpx.AsyncClient, topic: str, bases: dict[str, str]
) -> dict[str, float]:
    """Alice opens an SSE stream and a WebSocket, long-polls and produces ten records, which come
    on all three; how long each step waited for the gateway (the long-poll: past her first
    produce). Any refusal fails the test where it happens."""
    waited: dict[str, float] = {}
    async with client_at(gw, "127.0.0.1", ("alice", "alice-pw")) as streaming:  # the stream's own connection
        start = time.monotonic()
        url, accept = f"{bases['sse']}/records", {"Accept": EVENT_STREAM}
        async with streaming.stream("GET", url, headers=accept) as sse:
            assert sse.status_code == 200, (await sse.aread()).decode()
            waited["sse stream opened"] = time.monotonic() - start
            await alice_pushed_to(alice, topic, bases, EventReader(sse), waited)
    return waited


async def alice_pushed_to(
    alice: httpx.AsyncClient, topic: str, bases: dict[str, str], sse: EventReader, waited: dict[str, float]
) -> None:
    """The WebSocket, the long-poll and the produce of ``alice_works``, while ``sse`` is open."""
    start = time.monotonic()
    credentials = [("Authorization", "Basic " + base64.b64encode(b"alice:alice-pw").decode())]
    async with connect(socket_url(bases["socket"]), additional_headers=credentials) as ws:
        await receive(ws, "hello")
        waited["socket opened"] = time.monotonic() - start
        await send(ws, "credit", records=100, bytes=1 << 20)

        async def long_poll() -> tuple[httpx.Response, float]:
            r = await alice.get(f"{bases['poll']}/records", params={"timeout": 10_000}, headers=accept)
            return r, time.monotonic()

        accept = {"Accept": STRING}
        polling = asyncio.create_task(long_poll())
        await asyncio.sleep(0.2)  # it is waiting for a record now
        first_produced = 0.0
        for n in range(10):  # POST /topics/{topic}: the produce fast path
            start = time.monotonic()
            r = await alice.post(
                f"/topics/{topic}", json={"records": [{"value": f"r{n}"}]}, headers={"Content-Type": STRING}
            )
            assert r.status_code == 200, r.text
            waited[f"produce {n}"] = time.monotonic() - start
            first_produced = first_produced or time.monotonic()
        r, answered = await polling
        assert r.status_code == 200, r.text
        assert r.json() and r.json()[0]["value"] == "r0", r.json()
        waited["long-poll answered"] = answered - first_produced
        start = time.monotonic()
        r = await alice.get("/topics")
        assert r.status_code == 200, r.text
        waited["topics listed"] = time.monotonic() - start
        assert [record["value"] for record in await sse.records(10)] == [f"r{n}" for n in range(10)]
        pushed: list[str] = []
        while len(pushed) < 10:
            message = await receive(ws)
            assert message["type"] in ("rebalance", "records"), message
            pushed.extend(record["value"] for record in message.get("records", ()))
        assert pushed == [f"r{n}" for n in range(10)]
