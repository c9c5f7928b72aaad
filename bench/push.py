"""Benchmark push subscriptions against a share consumer pulling the same records, in one run.

    .venv/bin/python bench/push.py [--records 100000] [--single 5000] [--size 100] [--rounds 5]
                                   [--samples 300] [--bootstrap host:port]

It starts ``brokergate serve`` (the embedded log, or Kafka at ``--bootstrap``) allowed to push to
loopback, and an HTTP endpoint here (uvicorn, the standard ``json`` module parsing each body), then:

  rate      a topic of ``--records`` records of ``--size`` bytes, read from its start each round by
            a new subscription and by a new share group, the order turned every other round:
              push, batched     a subscription of up to 500 records a request (as many as a
                                share consumer polls), 4 in flight;
              push, single      one record a request, 16 in flight (the first ``--single``
                                records only: it is two orders of magnitude slower);
              share consumer    the reference: one share consumer long-polling with
                                ``POST …/records`` (what the previous poll got accepted in the
                                body), the answer parsed with ``json.loads`` (httpx);
  latency   ``--samples`` records produced one at a time (httpx, a request each, the next after the
            previous arrived): from the produce request's start to the record's arrival, at the
            endpoint (push, single) and at a share consumer long-polling (the reference).

Rates are records/s, the median [min-max] of the rounds, and the median of the per-round ratios
to the share consumer's (goal: 1.0 or more); latencies are p50 and p99 in ms (goal p99 <= 20 ms on
the embedded log).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import create_topic, produce_body, start_gateway  # noqa: E402
from deploy.local.process import free_port  # noqa: E402
from service.wire.formats import V2, content_type_for  # noqa: E402

BINARY = content_type_for("binary")


class Endpoint:
    """An HTTP endpoint on loopback: every POST's body parsed with ``json.loads``, its records
    counted by subscription, each record's arrival time kept by its value for the latency test."""

    def __init__(self) -> None:
        self.port = free_port()
        self.counts: dict[str, int] = {}
        self.arrived: dict[bytes, float] = {}
        self.changed = asyncio.Event()
        self._server: uvicorn.Server | None = None
        self._serving: asyncio.Future[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        now = time.perf_counter()
        doc = json.loads(body)
        records = doc["records"]
        self.counts[doc["subscription"]] = self.counts.get(doc["subscription"], 0) + len(records)
        for r in records:
            self.arrived.setdefault(r["value"].encode(), now)
        self.changed.set()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def start(self) -> None:
        config = uvicorn.Config(self, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._serving = asyncio.ensure_future(self._server.serve())
        while not self._server.started:  # noqa: ASYNC110 (uvicorn says it started by a flag only)
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
            if self._serving is not None:
                await self._serving

    async def until(self, name: str, count: int, timeout: float = 300) -> None:
        deadline = time.perf_counter() + timeout
        while self.counts.get(name, 0) < count:
            self.changed.clear()
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"{name}: {self.counts.get(name, 0)} of {count} records")
            try:
                await asyncio.wait_for(self.changed.wait(), min(left, 1))
            except TimeoutError:
                pass


class Bench:
    def __init__(self, http: httpx.AsyncClient, endpoint: Endpoint, cluster: str) -> None:
        self.http = http
        self.endpoint = endpoint
        self.cluster = cluster
        self.serial = 0

    def fresh(self, what: str) -> str:
        self.serial += 1
        return f"{what}-{self.serial}"

    async def subscribe(self, name: str, topic: str, max_records: int, in_flight: int, start: str) -> None:
        spec = {
            "endpoint": self.endpoint.url,
            "topics": [topic],
            "format": "string",
            "start": start,
            "batching": {"max_records": max_records},
            "max_in_flight": in_flight,
        }
        r = await self.http.put(f"/v3/clusters/{self.cluster}/push-subscriptions/{name}", json=spec)
        assert r.status_code == 201, r.text

    async def unsubscribe(self, name: str) -> None:
        r = await self.http.delete(f"/v3/clusters/{self.cluster}/push-subscriptions/{name}")
        assert r.status_code == 204, r.text

    async def pushed(self, topic: str, records: int, max_records: int, in_flight: int) -> float:
        """Records/s of a new subscription delivering ``topic`` from its start."""
        name = self.fresh("push")
        start = time.perf_counter()
        await self.subscribe(name, topic, max_records, in_flight, "earliest")
        await self.endpoint.until(name, records)
        rate = records / (time.perf_counter() - start)
        await self.unsubscribe(name)
        return rate

    async def share_consumer(self, group: str, topic: str, reset: str) -> str:
        body = {"name": "c", "format": "string", "share.auto.offset.reset": reset}
        r = await self.http.post(f"/share-groups/{group}/consumers", json=body, headers={"Content-Type": V2})
        assert r.status_code == 200, r.text
        base = f"/share-groups/{group}/consumers/c"
        r = await self.http.post(
            f"{base}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2}
        )
        assert r.status_code == 204, r.text
        return base

    async def poll(
        self, base: str, acks: list[dict[str, Any]], timeout_ms: int = 1000
    ) -> list[dict[str, Any]]:
        headers = {"Content-Type": V2, "Accept": content_type_for("string")}
        r = await self.http.post(
            f"{base}/records",
            params={"timeout": timeout_ms},
            json={"acknowledgements": acks},
            headers=headers,
        )
        assert r.status_code == 200, r.text
        return list(json.loads(r.content))

    async def pulled(self, topic: str, records: int) -> float:
        """Records/s of a new share group's consumer reading ``topic`` from its start."""
        group = self.fresh("share")
        start = time.perf_counter()
        base = await self.share_consumer(group, topic, "earliest")
        got, acks = 0, []
        while got < records:
            batch = await self.poll(base, acks)
            got += len(batch)
            acks = _accept(batch)
        rate = records / (time.perf_counter() - start)
        await self.poll(base, acks, 0)
        await self.http.delete(base)
        return rate

    async def push_latency(self, samples: int) -> list[float]:
        topic, name = self.fresh("latency"), self.fresh("push")
        await create_topic(self.http, topic, 1)
        await self.subscribe(name, topic, 1, 16, "latest")
        await asyncio.sleep(1.0)  # the runner takes the subscription
        out = []
        for n in range(samples):
            value = f"{name}-{n}".encode()
            sent = time.perf_counter()
            await self.produce_one(topic, value)
            await self.endpoint.until(name, n + 1)
            out.append((self.endpoint.arrived[value] - sent) * 1000)
        await self.unsubscribe(name)
        return out

    async def pull_latency(self, samples: int) -> list[float]:
        topic = self.fresh("latency")
        await create_topic(self.http, topic, 1)
        base = await self.share_consumer(self.fresh("share"), topic, "latest")
        await self.poll(base, [], 0)  # the group's state starts at the end now
        out: list[float] = []
        acks: list[dict[str, Any]] = []
        for n in range(samples):
            value = f"pull-{n}"
            polling = asyncio.ensure_future(self.poll(base, acks, 5000))
            await asyncio.sleep(0.002)  # the long-poll is waiting at the gateway
            sent = time.perf_counter()
            await self.produce_one(topic, value.encode())
            batch = await polling
            while not batch:
                batch = await self.poll(base, [], 5000)
            out.append((time.perf_counter() - sent) * 1000)
            acks = _accept(batch)
        await self.http.delete(base)
        return out

    async def produce_one(self, topic: str, value: bytes) -> None:
        r = await self.http.post(
            f"/topics/{topic}", content=produce_body(value, 1), headers={"Content-Type": BINARY}
        )
        assert r.status_code == 200, r.text


def _accept(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by: dict[tuple[str, int], list[int]] = {}
    for r in batch:
        by.setdefault((r["topic"], r["partition"]), []).append(r["offset"])
    return [{"topic": t, "partition": p, "offsets": o, "type": "accept"} for (t, p), o in by.items()]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(args: argparse.Namespace, port: int, endpoint: Endpoint) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
        cluster = (await http.get("/v3/clusters")).json()["data"][0]["cluster_id"]
        bench = Bench(http, endpoint, cluster)
        topic = "push-rate"
        await create_topic(http, topic, 4)
        value = b"x" * args.size
        for _ in range(args.records // 500):
            r = await http.post(
                f"/topics/{topic}", content=produce_body(value, 500), headers={"Content-Type": BINARY}
            )
            assert r.status_code == 200, r.text
        ways = {
            "push, batched": lambda: bench.pushed(topic, args.records, 500, 4),
            "push, single": lambda: bench.pushed(topic, args.single, 1, 16),
            "share consumer": lambda: bench.pulled(topic, args.records),
        }
        rates: dict[str, list[float]] = {way: [] for way in ways}
        for n in range(args.rounds):
            order = list(ways) if n % 2 == 0 else list(reversed(ways))
            for way in order:
                rates[way].append(await ways[way]())
            print(f"  round {n + 1} of {args.rounds} done", flush=True)
        print(
            f"\nrate: {args.records:,} records of {args.size} B from the start ({args.single:,} one a"
            f" request), {args.rounds} rounds"
        )
        ref = rates["share consumer"]
        for way, got in rates.items():
            ratio = statistics.median(g / r for g, r in zip(got, ref, strict=True))
            print(
                f"  {way:<16} {statistics.median(got):>9,.0f} [{min(got):,.0f}-{max(got):,.0f}] records/s"
                f"   x share consumer {ratio:.2f} [{min(g / r for g, r in zip(got, ref, strict=True)):.2f}-"
                f"{max(g / r for g, r in zip(got, ref, strict=True)):.2f}]"
            )
        pushed = await bench.push_latency(args.samples)
        pulled = await bench.pull_latency(args.samples)
        print(f"\nlatency: {args.samples} records produced one at a time, produce start to arrival")
        for way, got in (("push, single", pushed), ("share consumer", pulled)):
            p50, p99 = _pct(got, 0.5), _pct(got, 0.99)
            print(f"  {way:<16} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   max {max(got):6.2f} ms")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)  # a round of a second or more
    parser.add_argument("--single", type=int, default=5_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--bootstrap", help="a Kafka log at host:port instead of the embedded one")
    args = parser.parse_args()
    endpoint = Endpoint()
    await endpoint.start()
    env = {"BROKERGATE_PUSH_ALLOWED_DESTINATIONS": "http://127.0.0.1", "BROKERGATE_PUSH_REFRESH_MS": "100"}
    with tempfile.TemporaryDirectory() as tmp:
        extra = () if args.bootstrap is None else ("--log", f"kafka://{args.bootstrap}")
        gateway, port = start_gateway(Path(tmp), *extra, env=env)
        try:
            where = "embedded" if args.bootstrap is None else f"kafka://{args.bootstrap}"
            print(f"brokergate on the {where} log")
            await measure(args, port, endpoint)
        finally:
            gateway.terminate()
            gateway.wait(15)
            await endpoint.stop()


if __name__ == "__main__":
    asyncio.run(main())
