"""Benchmark the embedded gateway: REST vs the same work done in-process on the embedded log.

    .venv/bin/python bench/embedded.py [--seconds 3] [--clients 4] [--quick]

Starts ``brokergate serve`` (uvicorn, embedded backends, fsync before ack) on
a free port in a temporary data dir, then measures in one run:

  (a) REST produce records/s and MB/s for batches of 1, 100, 1000 records of
      100 B and 1 KB values, with several concurrent clients;
  (b) the same appends in-process on an ``EmbeddedLog`` (the reference);
  (c) REST consume (a consumer instance polling) vs in-process fetches;
  (d) produce latency p50/p99 (1-record requests, one client) and end-to-end
      latency (produce -> a long-polling consumer sees it).

and prints every figure with the REST/in-process ratio. Request bodies are
encoded once up front so the client's own JSON work does not count.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    BINARY,
    V2,
    create_topic,
    fetch_through,
    produce_body,
    rest_consume,
    rest_produce,
    run_for,
    start_gateway,
)
from service.adapters.embedded.log import EmbeddedLog  # noqa: E402
from service.core.models import NewRecord, TopicPartition  # noqa: E402


class Bench:
    def __init__(self, host: str, port: int, log: EmbeddedLog, seconds: float, clients: int) -> None:
        self.host = host
        self.port = port
        self.url = url = f"http://{host}:{port}"
        self.log = log
        self.seconds = seconds
        self.clients = clients
        self.http = httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=64))
        self.rows: list[tuple[str, float, float, float, float]] = []

    async def topic(self, name: str) -> None:
        await create_topic(self.http, name)  # the gateway's data dir
        await self.log.create_topic(name, 1, 1, {})  # the in-process reference's

    async def produce(self, size: int, batch: int) -> None:
        name = f"p-{size}-{batch}"
        await self.topic(name)
        value = os.urandom(size)
        records = [NewRecord(None, value) for _ in range(batch)]
        tp = TopicPartition(name, 0)

        async def local(n: int) -> int:
            await self.log.append(tp, records)
            return batch

        rest = await rest_produce(self.port, name, value, batch, self.clients, self.seconds)
        n_local, t_local = await run_for(self.seconds, self.clients, local)
        self.record(f"produce {size:>4} B x {batch:>4}", rest, n_local / t_local, size)

    async def consume(self, size: int, count: int) -> None:
        name = f"c-{size}"
        await self.topic(name)
        value = os.urandom(size)
        tp = TopicPartition(name, 0)
        for _ in range(count // 1000):
            await self.log.append(tp, [NewRecord(None, value)] * 1000)
        # the gateway reads the same partition through its own log in the server process
        body = produce_body(value, 1000)
        for _ in range(count // 1000):
            await self.http.post(f"/topics/{name}", content=body, headers={"Content-Type": BINARY})
        rest = await rest_consume(self.http, self.port, name, count)
        self.record(f"consume {size:>4} B", rest, await fetch_through(self.log, tp, count), size)

    async def latency(self) -> None:
        name = "lat"
        await self.topic(name)
        body = orjson.dumps({"records": [{"value": base64.b64encode(b"x" * 100).decode()}]})
        samples = []
        for _ in range(300):
            t = time.perf_counter()
            await self.http.post(f"/topics/{name}", content=body, headers={"Content-Type": BINARY})
            samples.append(time.perf_counter() - t)
        q = statistics.quantiles(samples, n=100)
        print(
            f"\nproduce latency (1 record, fsync):   p50 {q[49] * 1000:6.2f} ms   p99 {q[98] * 1000:6.2f} ms"
        )

        r = await self.http.post(
            "/consumers/bench-e2e",
            json={"format": "binary", "auto.offset.reset": "latest"},
            headers={"Content-Type": V2},
        )
        base = r.json()["base_uri"]
        await self.http.post(f"{base}/subscription", json={"topics": [name]}, headers={"Content-Type": V2})
        await self.http.get(f"{base}/records", params={"timeout": 100}, headers={"Accept": BINARY})
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as consumer_http:
            e2e = []
            for _ in range(100):
                poller = asyncio.create_task(
                    consumer_http.get(f"{base}/records", params={"timeout": 5000}, headers={"Accept": BINARY})
                )
                await asyncio.sleep(0.005)
                t = time.perf_counter()
                await self.http.post(f"/topics/{name}", content=body, headers={"Content-Type": BINARY})
                r = await poller
                e2e.append(time.perf_counter() - t)
                assert r.json(), "long-poll returned without the record"
        q = statistics.quantiles(e2e, n=100)
        print(f"end-to-end (produce -> long-poll):   p50 {q[49] * 1000:6.2f} ms   p99 {q[98] * 1000:6.2f} ms")

    def record(self, label: str, rest: float, local: float, size: int) -> None:
        self.rows.append((label, rest, rest * size / 1e6, local, rest / local))
        print(
            f"{label:<24} REST {rest:>10,.0f} rec/s {rest * size / 1e6:>7.1f} MB/s   "
            f"in-process {local:>10,.0f} rec/s   ratio {rest / local:5.2f}",
            flush=True,
        )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each produce measurement")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients")
    parser.add_argument("--quick", action="store_true", help="1 s per measurement, smaller consume runs")
    args = parser.parse_args()
    seconds = 1.0 if args.quick else args.seconds
    with tempfile.TemporaryDirectory() as tmp:
        server, port = start_gateway(Path(tmp) / "gateway")
        log = EmbeddedLog(Path(tmp) / "inprocess")
        await log.start()
        bench = Bench("127.0.0.1", port, log, seconds, args.clients)
        try:
            print(
                f"brokergate embedded benchmark: {args.clients} clients, "
                f"{seconds:.0f} s per figure, fsync before ack\n"
            )
            for size in (100, 1000):
                for batch in (1, 100, 1000):
                    await bench.produce(size, batch)
            print()
            for size in (100, 1000):
                await bench.consume(size, 20_000 if args.quick else 100_000)
            await bench.latency()
        finally:
            await bench.http.aclose()
            await log.stop()
            server.terminate()
            server.wait(15)


if __name__ == "__main__":
    asyncio.run(main())
