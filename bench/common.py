"""What the benchmark scripts share: media types, free ports, and the timed client loops."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import orjson

from bench.httpload import Connection

ROOT = Path(__file__).resolve().parents[1]

BINARY = "application/vnd.kafka.binary.v2+json"
V2 = "application/vnd.kafka.v2+json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run_for(seconds: float, clients: int, one: Callable[[int], Awaitable[int]]) -> tuple[int, float]:
    """Run ``one(client_number)`` in ``clients`` loops for ``seconds``; returns (records, elapsed)."""
    stop = time.perf_counter() + seconds
    total = 0

    async def loop(n: int) -> None:
        nonlocal total
        while time.perf_counter() < stop:
            done = await one(n)  # not `total += await ...`: that reads total before the await
            total += done

    start = time.perf_counter()
    await asyncio.gather(*(loop(n) for n in range(clients)))
    return total, time.perf_counter() - start


def start_gateway(
    data_dir: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """``brokergate serve`` on a free loopback port with ``args``; returns once /readyz answers 200."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
            "--log-level",
            "warning",
            *args,
        ],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc, port
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise SystemExit("the gateway exited")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the gateway did not become ready")


def produce_body(value: bytes, batch: int) -> bytes:
    """A binary-format produce body of ``batch`` copies of ``value``, encoded once up front."""
    return orjson.dumps({"records": [{"value": base64.b64encode(value).decode()}] * batch})


async def rest_produce(
    port: int, topic: str, value: bytes, batch: int, clients: int, seconds: float
) -> float:
    """Records/s of ``clients`` keep-alive connections producing ``batch``-record requests to ``topic``."""
    conns = [Connection("127.0.0.1", port) for _ in range(clients)]
    for conn in conns:
        await conn.__aenter__()
    request = conns[0].build("POST", f"/topics/{topic}", produce_body(value, batch), BINARY)

    async def one(n: int) -> int:
        status, _ = await conns[n].send(request)
        assert status == 200
        return batch

    try:
        records, elapsed = await run_for(seconds, clients, one)
    finally:
        for conn in conns:
            await conn.__aexit__()
    return records / elapsed


async def rest_consume(http: httpx.AsyncClient, port: int, topic: str, count: int) -> float:
    """Records/s of a new consumer instance reading ``count`` records of ``topic`` by long-polling."""
    r = await http.post(
        f"/consumers/bench-{topic}",
        json={"format": "binary", "auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
    )
    base = r.json()["base_uri"]
    await http.post(f"{base}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2})
    got = 0
    async with Connection("127.0.0.1", port) as conn:
        path = "/" + base.split("/", 3)[3] + "/records?timeout=1000&max_bytes=1000000"
        request = conn.build("GET", path, accept=BINARY)
        start = time.perf_counter()
        while got < count:
            _, payload = await conn.send(request)
            # Count without decoding: the figure is the gateway's, not this client's JSON parser's.
            got += payload.count(b'"offset":')
        elapsed = time.perf_counter() - start
    await http.delete(base)
    return count / elapsed
