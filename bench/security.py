"""Benchmark what authentication and ACLs cost: produce and consume with them off and on.

    .venv/bin/python bench/security.py [--seconds 1.5] [--rounds 5] [--clients 4] [--flush never]

``brokergate serve`` processes on the embedded log, side by side, in one run:

- ``off``: no authentication, no authorization (the default);
- ``basic``: HTTP Basic against a credentials file, no ACLs;
- ``basic+acls``: the same, with ``AUTHORIZE=true`` deciding every request by 1,000 bindings
  (the user's own WRITE and READ bindings among 998 of other teams, literal and prefixed);
- ``jwt+acls``: Bearer JWTs (RS256) checked against the JWKS of a provider served on loopback
  by this script (``tests.oidc``), and the same bindings;
- ``off+flood``: ``off`` while another client floods it: ``--guessers`` loops of requests
  (``GET /topics``) that go on as fast as they are answered;
- ``basic+acls+guess``: ``basic+acls`` while the same client guesses another user's password
  instead: the same loops, each request with a wrong password.

The flood runs in a process of its own (an attacker is not the measuring client's event loop),
from the same address, started before each of those two measurements and stopped after it;
``basic+acls+guess`` is given as a ratio to ``off+flood`` in the same round, so what the ratio
shows is what guessing passwords costs beyond what any flood of requests costs a gateway.

Every request carries its credentials (the same ones over a keep-alive connection, as a client
library sends them). Each round measures every configuration back to back, the order turned
around every other round, and each figure is the median over rounds of the ratio to ``off`` in
the same round, so a machine whose load drifts hits both sides of a ratio alike. The flush
policy defaults to ``never``: without an fsync per request, what authentication adds per request
is as large a part of it as it gets.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import create_topic, rest_consume, rest_produce, start_gateway  # noqa: E402
from service.security.users import add_user  # noqa: E402
from tests.oidc import IdentityProvider  # noqa: E402

VALUE = b"v" * 100
USER, PASSWORD = "alice", "alice-pw"
VICTIM = "bob"  # whose password the guesser tries
ADMIN, ADMIN_PASSWORD = "admin", "admin-pw"
Measure = Callable[[int, dict[str, str]], Awaitable[float]]


def _basic(name: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}


def bindings() -> list[dict[str, str]]:
    """The user's own bindings among those of 998 other teams."""
    own = [
        ("TOPIC", "bench", "LITERAL", "User:alice", "WRITE"),
        ("TOPIC", "bench", "LITERAL", "User:alice", "READ"),
        ("GROUP", "bench-", "PREFIXED", "User:alice", "READ"),
    ]
    others = [
        ("TOPIC", f"team-{n}.", "PREFIXED" if n % 2 else "LITERAL", f"User:team-{n}", "WRITE")
        for n in range(997)
    ]
    return [
        {
            "resource_type": kind,
            "resource_name": name,
            "pattern_type": pattern,
            "principal": principal,
            "host": "*",
            "operation": operation,
            "permission": "ALLOW",
        }
        for kind, name, pattern, principal, operation in own + others
    ]


async def prepare(port: int, admin: dict[str, str], acls: bool) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=admin, timeout=60) as http:
        await create_topic(http, "bench")
        if acls:
            cluster = (await http.get("/v3/clusters")).json()["data"][0]["cluster_id"]
            for binding in bindings():
                r = await http.post(f"/v3/clusters/{cluster}/acls", json=binding)
                assert r.status_code == 201, r.text


async def flood(port: int, loops: int, guess: bool, seconds: float) -> None:
    """The flooding client's process: ``loops`` loops of ``GET /topics`` (with a wrong password for
    ``VICTIM`` each if ``guess``) for ``seconds`` at most, or until stdin closes; prints the
    statuses it was answered as JSON."""
    answers: Counter[int] = Counter()
    stop = asyncio.Event()

    async def loop(n: int) -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            attempt = 0
            while not stop.is_set():
                attempt += 1
                headers = _basic(VICTIM, f"guess-{n}-{attempt}") if guess else {}
                answers[(await http.get("/topics", headers=headers)).status_code] += 1

    async def until_stdin_closes() -> None:
        await asyncio.to_thread(sys.stdin.read)
        stop.set()

    watcher = asyncio.create_task(until_stdin_closes())
    tasks = [asyncio.create_task(loop(n)) for n in range(loops)]
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    watcher.cancel()
    print(json.dumps(answers))


@contextlib.asynccontextmanager
async def flooding(port: int, loops: int, guess: bool, answers: Counter[int]) -> AsyncIterator[None]:
    """``flood`` in a process of its own for the length of the block; its answers counted in ``answers``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--flood",
        str(port),
        "--guessers",
        str(loops),
        *(["--guess"] if guess else []),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None
    await asyncio.sleep(1.0)  # it is going before the measurement starts
    try:
        yield
    finally:
        proc.stdin.close()
        out, _ = await proc.communicate()
        answers.update({int(status): n for status, n in json.loads(out).items()})


async def run(args: argparse.Namespace, tmp: Path, issuer: IdentityProvider) -> None:
    users = tmp / "users"
    add_user(users, USER, PASSWORD)
    add_user(users, VICTIM, "bob-pw")
    add_user(users, ADMIN, ADMIN_PASSWORD)
    base = {"BROKERGATE_FLUSH": args.flush}
    acls = {"BROKERGATE_AUTHORIZE": "true", "BROKERGATE_SUPER_USERS": f"User:{ADMIN}"}
    jwt_env = {
        "BROKERGATE_AUTH": "jwt,basic",
        "BROKERGATE_USERS_FILE": str(users),
        "BROKERGATE_JWT_ISSUER": issuer.issuer,
        "BROKERGATE_JWT_AUDIENCE": issuer.audience,
        "BROKERGATE_JWT_JWKS_URL": issuer.jwks_url,
    }
    basic_env = {"BROKERGATE_AUTH": "basic", "BROKERGATE_USERS_FILE": str(users)}
    bearer = {"Authorization": f"Bearer {issuer.token(USER)}"}
    configs: dict[str, tuple[dict[str, str], dict[str, str], bool]] = {
        # name: (environment, the user's credentials, ACLs)
        "off": (base, {}, False),
        "basic": ({**base, **basic_env}, _basic(USER, PASSWORD), False),
        "basic+acls": ({**base, **basic_env, **acls}, _basic(USER, PASSWORD), True),
        "jwt+acls": ({**base, **jwt_env, **acls}, bearer, True),
        "off+flood": (base, {}, False),
        "basic+acls+guess": ({**base, **basic_env, **acls}, _basic(USER, PASSWORD), True),
    }
    reference = {"basic+acls+guess": "off+flood"}  # the rest: "off"
    floods: dict[str, Counter[int]] = {"off+flood": Counter(), "basic+acls+guess": Counter()}
    servers = {name: start_gateway(tmp / name, env=env) for name, (env, _, _) in configs.items()}

    async def consume(port: int, headers: dict[str, str]) -> float:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60
        ) as http:
            return await rest_consume(http, port, "bench", args.consume, headers)

    measures: dict[str, Measure] = {
        "produce x1  ": lambda port, h: rest_produce(port, "bench", VALUE, 1, args.clients, args.seconds, h),
        "produce x100": lambda port, h: rest_produce(
            port, "bench", VALUE, 100, args.clients, args.seconds, h
        ),
        "consume     ": consume,
    }
    rates: dict[tuple[str, str], list[float]] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    try:
        admin = _basic(ADMIN, ADMIN_PASSWORD)
        for name, (_, headers, with_acls) in configs.items():
            port = servers[name][1]
            await prepare(port, admin if headers else {}, with_acls)
            await rest_produce(port, "bench", VALUE, 1000, 2, 1.0, headers)  # records to consume
        for rnd in range(args.rounds):
            for what, measure in measures.items():
                got = {}
                for name in configs if rnd % 2 == 0 else reversed(configs):
                    port = servers[name][1]
                    if name in floods:
                        async with flooding(port, args.guessers, name.endswith("+guess"), floods[name]):
                            got[name] = await measure(port, configs[name][1])
                    else:
                        got[name] = await measure(port, configs[name][1])
                    rates.setdefault((name, what), []).append(got[name])
                for name in configs:
                    ratio = got[name] / got[reference.get(name, "off")]
                    ratios.setdefault((name, what), []).append(ratio)
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(15)

    print("records/s, median of rounds; ratio = median of per-round ratios to off (+guess: to off+flood)")
    for what in measures:
        cells = []
        for name in configs:
            rate = statistics.median(rates[(name, what)])
            ratio = statistics.median(ratios[(name, what)])
            cells.append(
                f"{name} {rate:>9,.0f}" + ("" if name in ("off", "off+flood") else f" ({ratio:4.2f})")
            )
        print(f"  {what}  " + "   ".join(cells))
    for name, answers in floods.items():
        answered = ", ".join(f"{count:,} x {status}" for status, count in sorted(answers.items()))
        print(f"the flood of {name} was answered: {answered}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=1.5, help="duration of each produce measurement")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per figure")
    parser.add_argument("--clients", type=int, default=4, help="concurrent produce clients")
    parser.add_argument("--flush", default="never", choices=["always", "interval", "never"])
    parser.add_argument("--guessers", type=int, default=40, help="concurrent loops of the flooding client")
    parser.add_argument("--flood", type=int, metavar="PORT", help=argparse.SUPPRESS)  # the flooding process
    parser.add_argument("--guess", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--consume", type=int, default=100_000, help="records per consume measurement")
    args = parser.parse_args()
    if args.flood is not None:
        asyncio.run(flood(args.flood, args.guessers, args.guess, seconds=600))
        return
    print(
        f"authentication and ACL cost: {args.clients} clients, {args.seconds:g} s per produce figure, "
        f"{args.rounds} rounds, 100 B records, flush={args.flush}\n"
    )
    with tempfile.TemporaryDirectory() as tmp, IdentityProvider() as issuer:
        issuer.add_key("bench")
        asyncio.run(run(args, Path(tmp), issuer))


if __name__ == "__main__":
    main()
