"""A client guessing passwords over HTTP Basic, against a real gateway: it is answered 429 once
over its budget, it does not make another user's sign-in wait behind its guesses, and an unknown
name is answered exactly as a known one.

Each client connects from its own loopback address (127.0.0.0/8 is all this machine's), which is
what the gateway tells clients apart by before they authenticate.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from service.security.users import add_user
from tests.conftest import RunningGateway, running_gateway

GUESSERS = 40  # concurrent wrong-password loops, as in the finding


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
    out of where it works)."""
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
        r = await bob_elsewhere.get("/topics")  # his name's budget is spent: a new place waits it out
        assert r.status_code == 429 and r.json()["error_code"] == 42901, r.text


async def test_an_unknown_name_is_answered_as_a_known_one(strict):
    """The same wrong guesses for bob and for a name no one has, each from its own address:
    the same statuses, bodies and Retry-After, guess by guess; the name's budget counts both."""
    answers = {}
    for name, address in (("bob", "127.0.0.5"), ("nobody", "127.0.0.6")):
        seen = []
        for n in range(4):  # the name's budget is 3
            async with client_at(strict, address) as client:
                r = await client.get("/topics", auth=(name, f"guess-{n}"))
            seen.append((r.status_code, r.json(), r.headers.get("retry-after")))
        answers[name] = seen
    assert answers["bob"] == answers["nobody"]
    assert [status for status, _, _ in answers["bob"]] == [401, 401, 401, 429]
