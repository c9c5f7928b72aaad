"""Benchmark what a password guesser can learn and cost: timings of HTTP Basic refusals.

    .venv/bin/python bench/passwords.py [--samples 40] [--guessers 40] [--signins 5]

One ``brokergate serve --auth basic`` process on the embedded log, with the budgets of wrong
passwords raised out of reach (so every guess is hashed: the worst case for the others), and:

- **unknown vs known**: ``GET /topics`` with a wrong password, alternately for a name the
  credentials file holds and one it does not (from one address per sample, so no budget
  interferes); the time to each 401, median and 10th/90th percentiles. The two must not tell
  a user's existence apart;
- **a first sign-in beside a guesser**: a user's first correct sign-in (nothing remembered yet:
  its password is set again before each) from 127.0.0.2, alone, then while ``--guessers`` loops
  guess another user's password from 127.0.0.1; the ratio of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import start_gateway  # noqa: E402
from service.security.users import add_user  # noqa: E402


def _client(port: int, address: str) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", transport=transport, timeout=120)


async def _refusal_ms(port: int, address: str, name: str) -> float:
    async with _client(port, address) as http:
        start = time.perf_counter()
        r = await http.get("/topics", auth=(name, "wrong"))
        elapsed = (time.perf_counter() - start) * 1000
    assert r.status_code == 401, r.text
    return elapsed


async def _sign_in_ms(port: int, users: Path, n: int) -> float:
    add_user(users, "carol", f"carol-pw-{n}")  # a new password: nothing remembered of it
    await asyncio.sleep(1.2)  # the gateway reads the file again within a second
    async with _client(port, "127.0.0.2") as http:
        start = time.perf_counter()
        r = await http.get("/topics", auth=("carol", f"carol-pw-{n}"))
        elapsed = (time.perf_counter() - start) * 1000
    assert r.status_code == 200, r.text
    return elapsed


def _spread(ms: list[float]) -> str:
    deciles = statistics.quantiles(ms, n=10)
    return f"median {statistics.median(ms):6.1f} ms  (p10 {deciles[0]:6.1f}, p90 {deciles[-1]:6.1f})"


async def run(args: argparse.Namespace, tmp: Path) -> None:
    users = tmp / "users"
    for name in ("alice", "bob", "carol"):
        add_user(users, name, f"{name}-pw")
    env = {
        "BROKERGATE_AUTH": "basic",
        "BROKERGATE_USERS_FILE": str(users),
        "BROKERGATE_PASSWORD_GUESSES_PER_ADDRESS": "1000000",
        "BROKERGATE_PASSWORD_GUESSES_PER_USER": "1000000",
    }
    proc, port = start_gateway(tmp / "data", env=env)
    try:
        known: list[float] = []
        unknown: list[float] = []
        for n in range(args.samples):
            address = f"127.0.1.{n % 250 + 1}"
            known.append(await _refusal_ms(port, address, "alice"))
            unknown.append(await _refusal_ms(port, address, f"nobody-{n}"))
        print("401 for a wrong password")
        print(f"  known name    {_spread(known)}")
        print(f"  unknown name  {_spread(unknown)}")

        alone = [await _sign_in_ms(port, users, n) for n in range(args.signins)]
        stop = asyncio.Event()
        guessed = 0

        async def guess(n: int) -> None:
            nonlocal guessed
            async with _client(port, "127.0.0.1") as http:
                while not stop.is_set():
                    await http.get("/topics", auth=("bob", f"guess-{n}-{guessed}"))
                    guessed += 1

        guessers = [asyncio.create_task(guess(n)) for n in range(args.guessers)]
        await asyncio.sleep(1.0)
        beside = [await _sign_in_ms(port, users, args.signins + n) for n in range(args.signins)]
        stop.set()
        await asyncio.gather(*guessers)
        print(f"a first sign-in from another address ({args.guessers} loops guessing: {guessed:,} guesses)")
        print(f"  alone          {_spread(alone)}")
        print(f"  beside guesser {_spread(beside)}")
        print(f"  ratio of medians {statistics.median(beside) / statistics.median(alone):.2f}")
    finally:
        proc.terminate()
        proc.wait(15)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=40, help="refusals timed per kind of name")
    parser.add_argument("--guessers", type=int, default=40, help="concurrent password-guessing loops")
    parser.add_argument("--signins", type=int, default=5, help="first sign-ins timed, alone and beside")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
