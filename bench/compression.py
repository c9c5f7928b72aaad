"""Benchmark compressed bodies: a 1000-record produce and a 1000-record read, plain, gzip and zstd.

    .venv/bin/python bench/compression.py [--records 1000] [--size 200] [--requests 200] [--rounds 5]

It starts ``brokergate serve`` (the embedded log, ``COMPRESSION=true``) and, with httpx and the
standard ``json`` module (what a user's program has), in rounds, the order of the codings turned
each round:

  produce   ``--requests`` requests of ``--records`` JSON records of about ``--size`` bytes each,
            one after the other on one connection, the body built with ``json.dumps`` and coded
            here each time (the client's cost is part of the figure);
  read      as many stateless reads of a topic of ``--records`` such records
            (``GET …/records?offset=0``, ``Accept-Encoding`` naming the coding), each answer
            decoded by httpx and parsed with ``json.loads``.

For each coding: records/s (the median [min-max] of the rounds), the median per-round ratio to
plain, and the bytes of a request or an answer on the wire (its body as sent, or as received:
``num_bytes_downloaded``).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import zstandard

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import create_topic, start_gateway  # noqa: E402
from service.wire.formats import content_type_for  # noqa: E402

JSON_TYPE = content_type_for("json")
CODINGS = ("identity", "gzip", "zstd")


def coded(coding: str, body: bytes) -> bytes:
    if coding == "gzip":
        return gzip.compress(body, compresslevel=6)
    if coding == "zstd":
        return zstandard.ZstdCompressor(level=3).compress(body)
    return body


def records(count: int, size: int) -> list[dict[str, object]]:
    """Order-like JSON values of about ``size`` bytes: distinct, with the repetition real ones have."""
    out = []
    for n in range(count):
        value = {"order": n, "customer": f"c-{n % 97:03d}", "sku": f"sku-{n % 13}", "qty": n % 5 + 1}
        pad = max(0, size - len(json.dumps(value)) - 12)
        note = ("deliver before noon, ring twice, leave with the neighbour if out. " * (size // 60 + 1))[:pad]
        out.append({"key": f"c-{n % 97:03d}", "value": {**value, "note": note}})
    return out


async def produce(
    http: httpx.AsyncClient, topic: str, coding: str, body: list[dict[str, object]], n: int
) -> tuple[float, int]:
    headers = {"Content-Type": JSON_TYPE}
    if coding != "identity":
        headers["Content-Encoding"] = coding
    start = time.perf_counter()
    size = 0
    for _ in range(n):
        content = coded(coding, json.dumps({"records": body}).encode())
        size = len(content)
        r = await http.post(f"/topics/{topic}", content=content, headers=headers)
        assert r.status_code == 200, r.text
    return len(body) * n / (time.perf_counter() - start), size


async def read(http: httpx.AsyncClient, topic: str, coding: str, count: int, n: int) -> tuple[float, int]:
    headers = {"Accept": JSON_TYPE, "Accept-Encoding": coding}
    params = {"offset": 0}
    start = time.perf_counter()
    size = 0
    for _ in range(n):
        r = await http.get(f"/topics/{topic}/partitions/0/records", params=params, headers=headers)
        assert r.status_code == 200, r.text
        assert r.headers.get("content-encoding", "identity") == coding, r.headers
        size = r.num_bytes_downloaded
        assert len(json.loads(r.content)["records"]) == count
    return count * n / (time.perf_counter() - start), size


async def measure(args: argparse.Namespace, port: int) -> None:
    body = records(args.records, args.size)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        await create_topic(http, "compressed", 1)
        await create_topic(http, "read", 1)
        r = await http.post("/topics/read", json={"records": body}, headers={"Content-Type": JSON_TYPE})
        assert r.status_code == 200, r.text
        rates: dict[tuple[str, str], list[float]] = {}
        sizes: dict[tuple[str, str], int] = {}
        for n in range(args.rounds):
            order = CODINGS[n % 3 :] + CODINGS[: n % 3]
            for coding in order:
                for way, run in (
                    ("produce", produce(http, "compressed", coding, body, args.requests)),
                    ("read", read(http, "read", coding, args.records, args.requests)),
                ):
                    rate, size = await run
                    rates.setdefault((way, coding), []).append(rate)
                    sizes[(way, coding)] = size
            print(f"  round {n + 1} of {args.rounds} done", flush=True)
    print(f"\n{args.records} JSON records of about {args.size} B a request, {args.requests} requests a round")
    for way in ("produce", "read"):
        plain = rates[(way, "identity")]
        for coding in CODINGS:
            got = rates[(way, coding)]
            ratios = [g / p for g, p in zip(got, plain, strict=True)]
            print(
                f"  {way:<8} {coding:<9} {statistics.median(got):>9,.0f} [{min(got):,.0f}-{max(got):,.0f}] "
                f"records/s   x plain {statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}]"
                f"   {sizes[(way, coding)]:>9,} B on the wire"
            )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        gateway, port = start_gateway(Path(tmp), env={"BROKERGATE_COMPRESSION": "true"})
        try:
            print("brokergate on the embedded log")
            await measure(args, port)
        finally:
            gateway.terminate()
            gateway.wait(15)


if __name__ == "__main__":
    asyncio.run(main())
