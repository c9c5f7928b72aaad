"""Benchmark what serving HTTPS costs: 100-record produces over TLS against plain HTTP.

    .venv/bin/python bench/tls.py [--seconds 2] [--rounds 5] [--clients 4]

Two ``brokergate serve`` processes on the embedded log, side by side: one plain, one serving
HTTPS with a certificate of a CA made for the run (``trustme``). ``--clients`` keep-alive httpx
clients send 100-record binary produces of 100 B values for ``--seconds``; each round measures
both (the order turned around every other round), and the figure is the median of the per-round
ratios of HTTPS to plain, with its range.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson
import trustme

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import BINARY, create_topic  # noqa: E402
from deploy.local.gateway import GatewayReplica  # noqa: E402
from deploy.local.security import TlsFiles  # noqa: E402

BODY = orjson.dumps({"records": [{"value": base64.b64encode(b"v" * 100).decode()}] * 100})


def _tls_files(directory: Path) -> TlsFiles:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    files = TlsFiles(cert=directory / "server.pem", key=directory / "server.key", ca=directory / "ca.pem")
    server.cert_chain_pems[0].write_to_path(str(files.cert))
    for pem in server.cert_chain_pems[1:]:
        files.cert.write_bytes(files.cert.read_bytes() + pem.bytes())
    server.private_key_pem.write_to_path(str(files.key))
    ca.cert_pem.write_to_path(str(files.ca))
    return files


async def _produce(url: str, verify: ssl.SSLContext | bool, clients: int, seconds: float) -> float:
    """Records/s of ``clients`` keep-alive clients producing 100-record requests for ``seconds``."""
    records = 0

    async def one() -> None:
        nonlocal records
        async with httpx.AsyncClient(base_url=url, verify=verify, timeout=60) as http:
            while time.perf_counter() < stop:
                r = await http.post("/topics/bench", content=BODY, headers={"Content-Type": BINARY})
                assert r.status_code == 200, r.text
                records += 100

    start = time.perf_counter()
    stop = start + seconds
    await asyncio.gather(*(one() for _ in range(clients)))
    return records / (time.perf_counter() - start)


async def run(args: argparse.Namespace, tmp: Path) -> None:
    files = _tls_files(tmp)
    verify = ssl.create_default_context(cafile=str(files.ca))
    env = {"BROKERGATE_FLUSH": "never"}
    plain = GatewayReplica(tmp / "plain", args=("--log-level", "warning"), env=env).start(timeout=60)
    secure = GatewayReplica(tmp / "tls", args=("--log-level", "warning"), env=env, tls=files).start(
        timeout=60
    )
    sides: dict[str, tuple[str, ssl.SSLContext | bool]] = {
        "http": (plain.url, True),
        "https": (secure.url, verify),
    }
    rates: dict[str, list[float]] = {name: [] for name in sides}
    ratios: list[float] = []
    try:
        for url, check in sides.values():
            async with httpx.AsyncClient(base_url=url, verify=check, timeout=60) as http:
                await create_topic(http, "bench")
        for rnd in range(args.rounds):
            got = {}
            for name in sides if rnd % 2 == 0 else reversed(list(sides)):
                url, check = sides[name]
                got[name] = await _produce(url, check, args.clients, args.seconds)
                rates[name].append(got[name])
            ratios.append(got["https"] / got["http"])
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        plain.stop()
        secure.stop()
    print(f"100-record produce, {args.clients} httpx clients, records/s, median of {args.rounds} rounds")
    for name, values in rates.items():
        print(f"  {name:5}  {statistics.median(values):>9,.0f}")
    print(
        f"  https / http: median {statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each measurement")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--clients", type=int, default=4, help="concurrent produce clients")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
