"""What the benchmark scripts share: media types, free ports, and the timed client loops."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

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
