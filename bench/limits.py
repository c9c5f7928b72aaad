"""What one large request costs everyone else: peak memory, and other clients' latency.

    .venv/bin/python bench/limits.py [--samples 300]

Starts ``brokergate serve`` (embedded backends, default limits) and measures:

  (a) memory: for the largest request of each shape the default limits allow, a
      fresh gateway's resident set when idle and its peak (``VmHWM``, reset just
      before) while it serves that one request: a produce body of
      ``MAX_REQUEST_BYTES`` in the most records allowed, one in the fewest
      (largest records), the most tiny JSON records, and a poll of
      ``CONSUMER_MAX_BYTES``;
  (b) latency: p50/p99/max of a small request (``GET /topics/{t}``) sent every
      10 ms by one client, alone (the reference), then while two other clients
      send the largest produce bodies and a third makes the largest polls.

The load runs in a separate process, so the client measuring latency has its
core to itself; the figures are the gateway's.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import BINARY, create_topic, start_gateway, subscribed  # noqa: E402
from bench.httpload import Connection  # noqa: E402
from service.settings import Settings  # noqa: E402
from service.wire.formats import content_type_for  # noqa: E402

DEFAULTS = Settings()
JSON = content_type_for("json")
MiB = 1 << 20


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak(pid: int) -> None:
    """Start a new ``VmHWM`` measurement (Linux: writing 5 to ``clear_refs``)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def binary_body(records: int, body_bytes: int) -> bytes:
    """A binary-format produce body of ``records`` equal records, about ``body_bytes`` long."""
    per_record = body_bytes // records - len('{"value":""},')
    value = base64.b64encode(b"v" * (per_record * 3 // 4)).decode()
    return orjson.dumps({"records": [{"value": value}] * records})


def largest_body() -> bytes:
    return binary_body(DEFAULTS.max_records_per_request, DEFAULTS.max_request_bytes - 4096)


def tiny_json_body(records: int) -> bytes:
    return orjson.dumps({"records": [{"value": {"n": i}} for i in range(records)]})


async def consumer_path(http: httpx.AsyncClient, group: str, topic: str) -> str:
    """The records path of a new consumer instance of ``group`` reading ``topic`` in the largest polls."""
    instance = await subscribed(http, group, topic)
    return instance + f"/records?timeout=1000&max_bytes={DEFAULTS.consumer_max_bytes}"


Prepare = Callable[[httpx.AsyncClient, Connection], Awaitable[bytes]]


async def peak_of(data_dir: Path, name: str, prepare: Prepare) -> str:
    """One row: a fresh gateway on ``data_dir``, ``prepare``d and idle, then serving the request
    ``prepare`` built, once."""
    proc, port = start_gateway(data_dir, "--flush", "never")
    try:
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http,
            Connection("127.0.0.1", port) as conn,
        ):
            request = await prepare(http, conn)
            await conn.send(conn.build("GET", "/topics/t"))  # the topic is open, the connection warm
            await asyncio.sleep(0.5)
            idle = status_kib(proc.pid, "VmRSS")
            reset_peak(proc.pid)
            status, answer = await conn.send(request)
            peak = status_kib(proc.pid, "VmHWM") - idle
        assert status == 200, answer[:200]
        size = max(len(request), len(answer))
        return (
            f"{name:32} {size / MiB:5.1f} MiB   idle {idle / 1024:5.1f} MiB   "
            f"peak over idle {peak / 1024:6.1f} MiB = {peak * 1024 / size:5.2f} x its size"
        )
    finally:
        proc.terminate()
        proc.wait(30)


async def memory(tmp: Path) -> list[str]:
    """A row for each largest request the default limits allow, each in a fresh gateway."""
    cases = [
        ("produce, most records", largest_body(), BINARY),
        ("produce, largest records", binary_body(2, DEFAULTS.max_request_bytes - 4096), BINARY),
        ("produce, most tiny JSON records", tiny_json_body(DEFAULTS.max_records_per_request), JSON),
    ]
    rows = []
    for n, (name, body, content_type) in enumerate(cases):

        async def produce(
            http: httpx.AsyncClient, conn: Connection, body: bytes = body, content_type: str = content_type
        ) -> bytes:
            await create_topic(http, "t")
            return conn.build("POST", "/topics/t", body, content_type)

        rows.append(await peak_of(tmp / f"produce-{n}", name, produce))

    async def fill(http: httpx.AsyncClient, conn: Connection) -> bytes:
        """CONSUMER_MAX_BYTES of records and more; the measured request is a cheap one."""
        await create_topic(http, "t")
        body = largest_body()
        for _ in range(DEFAULTS.consumer_max_bytes // len(body) + 1):
            r = await http.post("/topics/t", content=body, headers={"Content-Type": BINARY})
            assert r.status_code == 200
        return conn.build("GET", "/topics/t")

    async def poll(http: httpx.AsyncClient, conn: Connection) -> bytes:
        return conn.build("GET", await consumer_path(http, "bench-memory", "t"), accept=BINARY)

    await peak_of(tmp / "poll", "fill", fill)
    rows.append(await peak_of(tmp / "poll", "poll, CONSUMER_MAX_BYTES", poll))  # a fresh process
    return rows


def load(port: int, path: str, stop_at: float) -> None:
    """The other clients (run in a child process): two produce the largest bodies, one polls."""

    async def main() -> None:
        body = largest_body()

        async def produce() -> None:
            async with Connection("127.0.0.1", port) as conn:
                request = conn.build("POST", "/topics/load", body, BINARY)
                while time.time() < stop_at:
                    status, _ = await conn.send(request)
                    assert status == 200

        async def poll() -> None:
            async with Connection("127.0.0.1", port) as conn:
                request = conn.build("GET", path, accept=BINARY)
                while time.time() < stop_at:
                    await conn.send(request)

        await asyncio.gather(produce(), produce(), poll())

    asyncio.run(main())


async def latencies(port: int, samples: int) -> list[float]:
    async with Connection("127.0.0.1", port) as conn:
        request = conn.build("GET", "/topics/small")
        out = []
        for _ in range(samples):
            start = time.perf_counter()
            status, _ = await conn.send(request)
            out.append((time.perf_counter() - start) * 1000)
            assert status == 200
            await asyncio.sleep(0.01)
        return out


def p99(ms: list[float]) -> float:
    return statistics.quantiles(ms, n=100)[98]


def summary(ms: list[float]) -> str:
    return f"p50 {statistics.median(ms):7.2f} ms   p99 {p99(ms):7.2f} ms   max {max(ms):7.2f} ms"


async def latency(data_dir: Path, samples: int) -> list[str]:
    proc, port = start_gateway(data_dir, "--flush", "never")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            for name in ("big", "small", "load"):
                await create_topic(http, name)
            body = largest_body()
            for _ in range(DEFAULTS.consumer_max_bytes // len(body) + 1):
                r = await http.post("/topics/big", content=body, headers={"Content-Type": BINARY})
                assert r.status_code == 200
            alone = await latencies(port, samples)
            path = await consumer_path(http, "bench-load", "big")
            stop_at = time.time() + samples * 0.015 + 30
            child = multiprocessing.get_context("spawn").Process(target=load, args=(port, path, stop_at))
            child.start()
            try:
                await asyncio.sleep(2)  # the load is under way
                loaded = await latencies(port, samples)
            finally:
                child.terminate()
                child.join()
        return [
            f"GET /topics/small alone          {summary(alone)}",
            f"GET /topics/small under load     {summary(loaded)}",
            f"p99 under load / alone           {p99(loaded) / p99(alone):.1f}",
        ]
    finally:
        proc.terminate()
        proc.wait(30)


async def run(samples: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for row in await memory(Path(tmp)):
            print(row)
        for row in await latency(Path(tmp) / "latency", samples):
            print(row)


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(run(args.samples))


if __name__ == "__main__":
    main()
