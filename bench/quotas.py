"""Benchmark what quotas cost: produce and consume with quotas off, on in-process, on in Redis.

    .venv/bin/python bench/quotas.py [--seconds 1.5] [--rounds 5] [--clients 4] [--flush never] [--part both]

Two measurements, in one run:

(a) Through HTTP: four ``brokergate serve`` processes on the embedded log,
    side by side: quotas off and on (embedded store) with in-process
    sessions, and off and on with Redis sessions (so the quota store is Redis
    too; a Redis of its own is started). Each round measures every off/on
    pair back to back, alternating which goes first, and the figure is the
    median of the per-round on/off ratios, so a machine whose load drifts
    hits both sides of a ratio alike.
(b) In-process, without HTTP: the gateway's own time per produce request,
    calling the ASGI app directly (quotas off, on embedded, on Redis), and
    per record polled by a consumer instance, in alternating rounds too:
    what quotas add to the work of one request.

"On" sets every quota (client and topic byte rates both ways, and a request
rate) so high that nothing is throttled: each produce is charged to three
buckets and each poll to four, the most a request costs. The default flush
policy here is ``never``: without an fsync per request, the per-request cost
of quotas is as large a part of a request as it gets.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import BINARY, V2, rest_consume, rest_produce, start_gateway  # noqa: E402
from deploy.local.redis_server import RedisServer  # noqa: E402
from service.server.app import create_app  # noqa: E402
from service.settings import Settings  # noqa: E402

RATES = {
    "quota_client_produce_bytes_per_s": 10**12,
    "quota_client_consume_bytes_per_s": 10**12,
    "quota_topic_produce_bytes_per_s": 10**12,
    "quota_topic_consume_bytes_per_s": 10**12,
    "quota_client_requests_per_s": 10**9,
}
UNLIMITED = {f"BROKERGATE_{k.upper()}": str(v) for k, v in RATES.items()}
VALUE = b"v" * 100
Measure = Callable[[int], Awaitable[float]]


async def http_figures(args: argparse.Namespace, redis: RedisServer, tmp: Path) -> None:
    base = {"BROKERGATE_FLUSH": args.flush}
    on_redis = {"BROKERGATE_SESSIONS": redis.url, "BROKERGATE_REDIS_KEY_PREFIX": "bench:"}
    configs = {
        ("embedded", "off"): base,
        ("embedded", "on"): {**base, **UNLIMITED},
        ("redis", "off"): {**base, **on_redis},
        ("redis", "on"): {**base, **on_redis, **UNLIMITED},
    }
    servers = {key: start_gateway(tmp / "-".join(key), env=env) for key, env in configs.items()}

    async def consume(port: int) -> float:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            return await rest_consume(http, port, "bench", args.consume)

    measures: dict[str, Measure] = {
        "produce x1  ": lambda port: rest_produce(port, "bench", VALUE, 1, args.clients, args.seconds),
        "produce x100": lambda port: rest_produce(port, "bench", VALUE, 100, args.clients, args.seconds),
        "consume     ": consume,
    }
    rates: dict[tuple[str, str, str], list[float]] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    try:
        for _, port in servers.values():  # every log gets records to consume before the first round
            await rest_produce(port, "bench", VALUE, 1000, 2, 1.0)
        for rnd in range(args.rounds):
            for sessions in ("embedded", "redis"):
                for what, measure in measures.items():
                    got = {}
                    for state in ("off", "on") if rnd % 2 == 0 else ("on", "off"):
                        got[state] = await measure(servers[(sessions, state)][1])
                        rates.setdefault((sessions, state, what), []).append(got[state])
                    ratios.setdefault((sessions, what), []).append(got["on"] / got["off"])
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(15)

    print("(a) through HTTP: records/s, median of rounds; ratio = median of per-round on/off ratios")
    for sessions in ("embedded", "redis"):
        store = "Redis" if sessions == "redis" else "in-process"
        for what in measures:
            off = statistics.median(rates[(sessions, "off", what)])
            on = statistics.median(rates[(sessions, "on", what)])
            ratio = statistics.median(ratios[(sessions, what)])
            print(
                f"  {what}  sessions={sessions:<8}  quotas off {off:>9,.0f}   "
                f"on ({store}) {on:>9,.0f}   ratio {ratio:5.2f}"
            )


async def asgi_produce_us(app: Any, body: bytes, n: int) -> tuple[float, float]:
    """Microseconds of gateway CPU and of wall time per produce request, calling the ASGI app directly.

    CPU time is this process's only, so other load on the machine hardly moves it; wall time adds
    the waits (a Redis round trip).
    """
    headers = [
        (b"content-type", BINARY.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"host", b"bench"),
    ]
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/topics/bench",
        "raw_path": b"/topics/bench",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8082),
        "scheme": "http",
        "http_version": "1.1",
        "root_path": "",
    }
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        await app(dict(scope), receive, send)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert set(status) == {200}, set(status)
    return cpu / n * 1e6, elapsed / n * 1e6


async def asgi_consume_us(app: Any, group: str, count: int) -> tuple[float, float]:
    """Microseconds of gateway CPU and wall time per record for a new consumer instance polling
    ``count`` records of ``bench`` (1 MB polls) through the ASGI app (httpx's in-process transport)."""
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
        r = await http.post(
            f"/consumers/{group}",
            json={"format": "binary", "auto.offset.reset": "earliest"},
            headers={"Content-Type": V2},
        )
        base = r.json()["base_uri"].removeprefix("http://bench")
        await http.post(f"{base}/subscription", json={"topics": ["bench"]}, headers={"Content-Type": V2})
        got = 0
        started, cpu = time.perf_counter(), time.process_time()
        while got < count:
            r = await http.get(
                f"{base}/records",
                params={"timeout": 1000, "max_bytes": 1_000_000},
                headers={"Accept": BINARY},
            )
            assert r.status_code == 200, r.text
            got += r.content.count(b'"offset":')
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        await http.delete(base)
    return cpu / got * 1e6, elapsed / got * 1e6


async def asgi_figures(args: argparse.Namespace, redis: RedisServer, tmp: Path) -> None:
    configs: dict[str, dict[str, Any]] = {
        "off": {},
        "on (in-process)": RATES,
        "on (Redis)": {**RATES, "sessions": redis.url, "redis_key_prefix": "bench-asgi:"},
    }
    samples: dict[str, dict[int, list[tuple[float, float]]]] = {name: {1: [], 100: []} for name in configs}
    consumed: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
    bodies = {
        batch: orjson.dumps({"records": [{"value": base64.b64encode(VALUE).decode()}] * batch})
        for batch in (1, 100)
    }
    apps: dict[str, Any] = {}
    for name, overrides in configs.items():
        settings = Settings(data_dir=tmp / f"asgi-{len(apps)}", flush=args.flush, **overrides)
        apps[name] = create_app(settings)
    contexts = [app.router.lifespan_context(app) for app in apps.values()]
    for context in contexts:
        await context.__aenter__()
    try:
        for app in apps.values():
            await asgi_produce_us(app, bodies[1], 300)  # warm up
        for rnd in range(args.rounds):
            order = list(configs) if rnd % 2 == 0 else list(reversed(configs))
            for name in order:
                for batch, body in bodies.items():
                    samples[name][batch].append(await asgi_produce_us(apps[name], body, 2000 // batch * 5))
        for rnd in range(args.rounds):  # by now each log holds about 20,000 records per round
            order = list(configs) if rnd % 2 == 0 else list(reversed(configs))
            for name in order:
                consumed[name].append(await asgi_consume_us(apps[name], f"bench-{rnd}", 10_000 * args.rounds))
    finally:
        for context in reversed(contexts):
            await context.__aexit__(None, None, None)

    print("\n(b) in-process, no HTTP: gateway CPU (and wall) time per produce request, median of rounds")
    base = {batch: statistics.median(cpu for cpu, _ in samples["off"][batch]) for batch in bodies}
    for name in configs:
        cells = []
        for batch in bodies:
            cpu = statistics.median(c for c, _ in samples[name][batch])
            wall = statistics.median(w for _, w in samples[name][batch])
            cells.append(f"x{batch:<3} {cpu:6.1f} µs CPU (+{cpu - base[batch]:5.1f}), {wall:6.1f} µs wall")
        print(f"  quotas {name:<16} " + "   ".join(cells))
    print("    and per consumed record (a consumer instance polling 1 MB at a time):")
    base_record = statistics.median(c for c, _ in consumed["off"])
    for name in configs:
        cpu = statistics.median(c for c, _ in consumed[name])
        wall = statistics.median(w for _, w in consumed[name])
        print(f"  quotas {name:<16} {cpu:6.2f} µs CPU (+{cpu - base_record:5.2f}), {wall:6.2f} µs wall")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=1.5, help="duration of each produce measurement")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per figure")
    parser.add_argument("--clients", type=int, default=4, help="concurrent produce clients")
    parser.add_argument("--flush", default="never", choices=["always", "interval", "never"])
    parser.add_argument("--consume", type=int, default=100_000, help="records per consume measurement")
    parser.add_argument("--part", choices=["http", "asgi", "both"], default="both", help="(a), (b) or both")
    args = parser.parse_args()
    print(
        f"quota cost: {args.clients} clients, {args.seconds:g} s per produce figure, {args.rounds} rounds, "
        f"100 B records, flush={args.flush}\n"
    )
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp) / "redis") as redis:
        if args.part in ("http", "both"):
            await http_figures(args, redis, Path(tmp))
        if args.part in ("asgi", "both"):
            await asgi_figures(args, redis, Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
