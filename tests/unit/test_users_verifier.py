"""Password checks: unknown names cost what known ones do, guessers are budgeted, turns are fair,
and a change to the users file forgets only the users whose line changed."""

from __future__ import annotations

import asyncio

import pytest
from argon2 import PasswordHasher, extract_parameters

from service.security import users as users_mod
from service.security.guesses import GuessBudget, HashLanes, TooManyGuesses
from service.security.users import UsersFile, UsersFileError, Verifier, add_user, read_users, write_users


class CountingHasher(PasswordHasher):
    """The real argon2, counting what it is asked to verify (the parameters of each hash)."""

    def __init__(self) -> None:
        super().__init__()
        self.verified: list[tuple[object, ...]] = []

    def verify(self, hash: str | bytes, password: str | bytes) -> bool:
        params = extract_parameters(hash if isinstance(hash, str) else hash.decode())
        self.verified.append((params.type, params.time_cost, params.memory_cost, params.parallelism))
        return super().verify(hash, password)


@pytest.fixture
def hasher(monkeypatch: pytest.MonkeyPatch) -> CountingHasher:
    counting = CountingHasher()
    monkeypatch.setattr(users_mod, "_HASHER", counting)
    return counting


@pytest.fixture
def path(tmp_path):
    path = tmp_path / "users"
    add_user(path, "alice", "alice-pw")
    add_user(path, "bob", "bob-pw")
    return path


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- finding 6: an unknown name is checked like a known one -------------------------------------


def test_an_unknown_name_is_hashed_against_a_stand_in_of_the_files_parameters(path, hasher):
    users = UsersFile(path)
    # no fast answer tells the two apart: neither is remembered, both must be hashed
    assert users.remembered("nobody", "x") is False and users.remembered("bob", "x") is False
    assert users.verify("nobody", "x") is False
    assert users.verify("bob", "x") is False
    assert len(hasher.verified) == 2 and hasher.verified[0] == hasher.verified[1]  # the same argon2 work


def test_the_stand_in_has_the_parameters_most_users_have(tmp_path, hasher):
    cheap = PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1)
    path = tmp_path / "users"
    write_users(
        path, {"old": cheap.hash("pw"), "a": users_mod._HASHER.hash("pw"), "b": users_mod._HASHER.hash("pw")}
    )
    users = UsersFile(path)
    users.verify("nobody", "x")
    users.verify("a", "x")
    assert hasher.verified[0] == hasher.verified[1]
    write_users(path, {"old": cheap.hash("pw"), "old2": cheap.hash("pw"), "a": users_mod._HASHER.hash("pw")})
    users.reload()
    users.verify("nobody", "x")
    users.verify("old", "x")
    assert (
        hasher.verified[2] == hasher.verified[3] == (extract_parameters(cheap.hash("x")).type, 1, 8 * 1024, 1)
    )


def test_an_empty_file_has_a_stand_in_of_the_hashers_parameters(tmp_path, hasher):
    users = UsersFile(tmp_path / "users")
    assert users.verify("nobody", "x") is False
    own = extract_parameters(users_mod._HASHER.hash("x"))
    assert hasher.verified == [(own.type, own.time_cost, own.memory_cost, own.parallelism)]


@pytest.mark.parametrize(
    "hashed",
    [
        "$argon2id$v=19$m=65536,t=3,p=4$!!$!!",
        "$argon2id$v=19$m=65536,t=3,p=4$YWJj$YWJj",
        "$argon2id$v=19$m=1",
    ],
)
def test_a_hash_argon2_would_refuse_at_once_is_refused_when_the_file_is_read(tmp_path, hashed):
    path = tmp_path / "users"
    path.write_text(f"alice:{hashed}\n")
    with pytest.raises(UsersFileError, match=":1:"):
        read_users(path)


# --- finding 7: a change forgets only the users whose line changed ------------------------------


def test_a_change_to_the_file_forgets_only_the_users_whose_line_changed(path):
    users = UsersFile(path)
    add_user(path, "carol", "carol-pw")
    users.reload()
    for name in ("alice", "bob", "carol"):
        assert users.verify(name, f"{name}-pw", "10.0.0.1")
    add_user(path, "bob", "bob-new")  # bob's line changes
    users_mod.remove_user(path, "carol")  # carol's goes
    add_user(path, "dave", "dave-pw")  # a line is added
    users.reload()
    assert users.remembered("alice", "alice-pw") is True  # untouched: still a lookup
    assert users.signed_in_from("alice", "10.0.0.1") is True
    assert users.remembered("bob", "bob-pw") is False and users.signed_in_from("bob", "10.0.0.1") is False
    assert (
        users.remembered("carol", "carol-pw") is False and users.signed_in_from("carol", "10.0.0.1") is False
    )
    assert users.verify("bob", "bob-pw") is False and users.verify("bob", "bob-new") is True


# --- the guess budgets ---------------------------------------------------------------------------


def test_a_name_is_budgeted_alike_whether_or_not_it_exists():
    clock = Clock()
    budget = GuessBudget(per_address=100, per_name=3, refill_s=10, clock=clock)
    answers = {}
    for name in ("bob", "nobody"):  # the budget knows no users: it cannot tell them apart
        seen = []
        for n in range(4):
            address = f"10.0.{len(name)}.{n}"  # from a new address each time: the name's budget counts
            seen.append(budget.refusal(name, address, signed_in_here=False))
            if seen[-1] is None:  # a refused check is not made, so it is not charged
                budget.failed(name, address, signed_in_here=False)
        answers[name] = seen
    assert answers["bob"] == answers["nobody"] == [None, None, None, 10]
    clock.now += 10
    assert budget.refusal("bob", "10.9.9.9", signed_in_here=False) is None  # refilled by one


def test_an_address_is_budgeted_whatever_names_it_tries_and_refills():
    clock = Clock()
    budget = GuessBudget(per_address=2, per_name=100, refill_s=5, clock=clock)
    for name in ("a", "b"):
        assert budget.refusal(name, "10.0.0.1", signed_in_here=False) is None
        budget.failed(name, "10.0.0.1", signed_in_here=False)
    assert budget.refusal("c", "10.0.0.1", signed_in_here=False) == 5
    assert budget.refusal("c", "10.0.0.2", signed_in_here=False) is None  # another client is not touched
    assert not budget.clean("10.0.0.1") and budget.clean("10.0.0.2")
    clock.now += 10
    assert budget.refusal("c", "10.0.0.1", signed_in_here=False) is None and budget.clean("10.0.0.1")


def test_a_user_is_not_locked_out_of_where_it_signed_in_from():
    budget = GuessBudget(per_address=1, per_name=1, refill_s=60, clock=Clock())
    budget.failed("alice", "10.6.6.6", signed_in_here=False)  # alice's name is out of guesses
    budget.failed("mallory", "10.0.0.1", signed_in_here=False)  # and so is the address alice works from
    assert budget.refusal("alice", "10.6.6.7", signed_in_here=False) == 60
    assert budget.refusal("bob", "10.0.0.1", signed_in_here=False) == 60
    assert budget.refusal("alice", "10.0.0.1", signed_in_here=True) is None  # where alice signed in
    # a guesser sharing that address has the pair's own budget to guess alice with, no more
    budget.failed("alice", "10.0.0.1", signed_in_here=True)
    assert budget.refusal("alice", "10.0.0.1", signed_in_here=True) == 60


# --- the hashing turns ---------------------------------------------------------------------------


async def test_turns_go_round_the_lanes_clean_ones_first():
    served: list[str] = []
    release = asyncio.Event()
    unclean = {"guesser"}
    lanes = HashLanes(1, lambda lane: lane not in unclean)

    async def one(lane: str) -> None:
        async with lanes.turn(lane):
            served.append(lane)
            await release.wait()

    first = asyncio.create_task(one("guesser"))
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(one("guesser")) for _ in range(5)]
    await asyncio.sleep(0)
    tasks += [asyncio.create_task(one("other")), asyncio.create_task(one("third"))]
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, *tasks)
    assert served[:3] == ["guesser", "other", "third"]  # the queue of guesses is not ahead of them


async def test_a_cancelled_wait_gives_up_its_place_and_the_turns_stay_bounded():
    lanes = HashLanes(1, lambda lane: True)
    holding = asyncio.Event()
    release = asyncio.Event()

    async def hold() -> None:
        async with lanes.turn("a"):
            holding.set()
            await release.wait()

    holder = asyncio.create_task(hold())
    await holding.wait()
    waiting = asyncio.create_task(hold())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()
    await holder
    async with lanes.turn("b"):  # the one turn is free again, and only one
        assert lanes._free == 0


# --- the verifier: all of it from the event loop -------------------------------------------------


async def test_a_client_over_its_budget_is_refused_without_hashing(path, hasher):
    verifier = Verifier(UsersFile(path), guesses_per_address=2, guesses_per_name=100, guess_refill_s=60)
    assert await verifier.check("bob", "guess1", "10.0.0.1") is False
    assert await verifier.check("nobody", "guess2", "10.0.0.1") is False  # an unknown name counts the same
    hashed = len(hasher.verified)
    with pytest.raises(TooManyGuesses) as refused:
        await verifier.check("alice", "alice-pw", "10.0.0.1")
    assert refused.value.http_status == 429 and refused.value.error_code == 42901
    assert refused.value.retry_after == 60
    assert len(hasher.verified) == hashed  # refused before any hashing
    assert await verifier.check("alice", "alice-pw", "10.0.0.2") is True  # another address is not


async def test_the_same_pair_checked_at_once_is_hashed_once(path, hasher):
    verifier = Verifier(UsersFile(path))
    results = await asyncio.gather(*(verifier.check("alice", "alice-pw", f"10.0.0.{n}") for n in range(8)))
    assert results == [True] * 8 and len(hasher.verified) == 1
    assert await verifier.check("alice", "alice-pw", "10.0.0.9") is True and len(hasher.verified) == 1


async def test_a_guesser_delays_only_a_password_not_yet_verified(path, hasher):
    verifier = Verifier(UsersFile(path), guesses_per_address=100, guesses_per_name=2, guess_refill_s=60)
    assert await verifier.check("alice", "alice-pw", "10.0.0.1") is True
    for name in ("alice", "bob"):
        for n in range(2):
            assert await verifier.check(name, f"guess{n}", f"10.6.6.{n}") is False
        with pytest.raises(TooManyGuesses):
            await verifier.check(name, "guess", "10.6.6.9")
    hashed = len(hasher.verified)
    assert await verifier.check("alice", "alice-pw", "10.0.0.1") is True  # where alice works from
    assert await verifier.check("alice", "alice-pw", "10.0.0.2") is True  # and anywhere else: remembered
    assert await verifier.check("alice", "alice-pw", "10.6.6.9") is True  # the guesser's address too
    assert len(hasher.verified) == hashed  # a lookup each, no hash
    with pytest.raises(TooManyGuesses):  # bob never signed in: his password waits out his name's budget
        await verifier.check("bob", "bob-pw", "10.0.0.2")


async def test_a_guesser_of_a_users_password_at_its_address_does_not_lock_it_out(path):
    verifier = Verifier(UsersFile(path), guesses_per_address=100, guesses_per_name=2, guess_refill_s=60)
    assert await verifier.check("alice", "alice-pw", "10.0.0.1") is True
    for n in range(2):
        assert await verifier.check("alice", f"guess{n}", "10.0.0.1") is False
    with pytest.raises(TooManyGuesses):  # the budget of alice at that address is spent
        await verifier.check("alice", "guess", "10.0.0.1")
    assert await verifier.check("alice", "alice-pw", "10.0.0.1") is True


async def test_a_user_keeps_signing_in_where_a_guesser_shares_its_address(path):
    verifier = Verifier(UsersFile(path), guesses_per_address=2, guesses_per_name=100, guess_refill_s=60)
    assert await verifier.check("alice", "alice-pw", "10.0.0.1") is True
    for n in range(2):
        assert await verifier.check("bob", f"guess{n}", "10.0.0.1") is False
    with pytest.raises(TooManyGuesses):
        await verifier.check("bob", "bob-pw", "10.0.0.1")  # bob never signed in there: the address's budget
    assert await verifier.check("alice", "alice-pw", "10.0.0.1") is True
