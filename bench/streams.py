"""Benchmark push streams against the long-poll consumer: one gateway, one run, per log.

    .venv/bin/python bench/streams.py [--records 100000] [--size 100] [--rounds 3] [--samples 300]
                                      [--quick] [--bootstrap host:port | --cluster | --no-kafka]

For the embedded log, then for a Kafka log (Apache Kafka started here, three brokers with
``--cluster``, or ``--bootstrap``), it starts ``brokergate serve`` and measures, on that one gateway:

  throughput   records/s of a new consumer instance reading the same records from the start,
               three ways: long-polling ``GET …/records`` (1 MB per poll), the Server-Sent
               Events stream of the same route, and the WebSocket stream (a window of 4 MiB
               of credit, renewed as records arrive). The clients count records without decoding them:
               the figure is the gateway's, and so is its CPU time per record (from /proc);
  latency      produce -> delivery, p50 and p99: one record produced (one POST, fsync on the
               embedded log) while a consumer waits, until that consumer has it; the three ways;
  a client     records/s of a Python client that parses what it receives (orjson, and base64
               for every value) over each of the three, and on Kafka against aiokafka's own
               consumer reading the same records from the same broker (``getmany``).

Throughput runs ``--rounds`` rounds, each way once per round: the figures are the medians, each
ratio the median of the per-round ratios (the machine is shared; rounds even its noise out).

Clients that count use a minimal keep-alive HTTP client (``bench/httpload.py``), a raw connection
(SSE) or the ``websockets`` library; parsing clients use httpx (long-poll, SSE) and ``websockets``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    BINARY,
    add_log_options,
    cpu_seconds,
    create_topic,
    on_each_log,
    produce_body,
    subscribed,
)
from bench.httpload import Connection  # noqa: E402

EVENT_STREAM = "text/event-stream"
# The WebSocket clients' window: four batches of the gateway's (1 MiB), so that it never waits for
# the client's renewal while there are records to send.
CREDIT_BYTES = 4 * 1024 * 1024
CREDIT_RECORDS = 100_000


def _b64values(records: list[dict[str, object]]) -> int:
    """What a client does with each record it is given: its value as bytes."""
    for record in records:
        value = record["value"]
        if isinstance(value, str):
            base64.b64decode(value)
    return len(records)


class Consumers:
    """The three ways to consume from one gateway, counting or parsing (parsing clients read an
    answer with ``loads`` and each record list with ``values``, polling with ``accept``)."""

    def __init__(
        self,
        port: int,
        loads: Callable[[str | bytes], Any] = orjson.loads,
        values: Callable[[list[dict[str, object]]], int] = _b64values,
        accept: str = BINARY,
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.loads = loads
        self.values = values
        self.accept = accept

    # --- long-poll -----------------------------------------------------------------------

    async def poll_count(self, path: str, count: int) -> None:
        async with Connection("127.0.0.1", self.port) as conn:
            request = conn.build("GET", path + "/records?timeout=1000&max_bytes=1000000", accept=self.accept)
            got = 0
            while got < count:
                _, payload = await conn.send(request)
                got += payload.count(b'"offset":')

    async def poll_parse(self, path: str, count: int) -> None:
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as http:
            got = 0
            while got < count:
                r = await http.get(
                    path + "/records",
                    params={"timeout": 1000, "max_bytes": 1000000},
                    headers={"Accept": self.accept},
                )
                got += self.values(self.loads(r.content))

    # --- Server-Sent Events --------------------------------------------------------------

    async def sse_count(self, path: str, count: int) -> None:
        """The stream read as the long-poll counter reads its answers: a raw connection, its
        chunks (uvicorn sends each event as one) counted, not parsed."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 24)
        try:
            writer.write(
                f"GET {path}/records HTTP/1.1\r\nHost: bench\r\nAccept: {EVENT_STREAM}\r\n\r\n".encode()
            )
            await reader.readuntil(b"\r\n\r\n")
            got = 0
            while got < count:
                size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
                got += (await reader.readexactly(size + 2)).count(b'"offset":')  # only records hold any
        finally:
            writer.close()

    async def sse_parse(self, path: str, count: int) -> None:
        """The stream read as a Python program would: httpx, events split, records parsed."""
        async with (
            httpx.AsyncClient(base_url=self.url, timeout=60) as http,
            http.stream("GET", path + "/records", headers={"Accept": EVENT_STREAM}) as response,
        ):
            got = 0
            pending = bytearray()  # appended to in place: an event of a megabyte comes in many chunks
            async for chunk in response.aiter_bytes():
                scan = max(0, len(pending) - 1)
                pending += chunk
                while (end := pending.find(b"\n\n", scan)) >= 0:
                    event = bytes(pending[:end])
                    del pending[: end + 2]
                    scan = 0
                    if event.startswith(b"event: records"):
                        data = event[event.index(b"\ndata: ") + 7 :]
                        got += self.values(self.loads(data))
                if got >= count:
                    return

    # --- WebSocket ---------------------------------------------------------------------

    async def ws(self, path: str, count: int, parse: bool) -> None:
        async with connect(f"ws://127.0.0.1:{self.port}{path}/records", max_size=None) as ws:
            credit = {"v": 1, "type": "credit", "records": CREDIT_RECORDS, "bytes": CREDIT_BYTES}
            await ws.send(orjson.dumps(credit).decode())
            got = 0
            async for raw in ws:
                if parse:
                    message = self.loads(raw)
                    if message["type"] != "records":
                        continue
                    n = self.values(message["records"])
                    size = message["bytes"]
                else:
                    text = raw if isinstance(raw, str) else raw.decode()  # the gateway sends text
                    if not text.startswith('{"v":1,"type":"records"'):
                        continue
                    start = text.index(',"records":')  # the positions before it hold offsets too
                    n = text.count('"offset":', start)
                    size = int(text[text.index('"bytes":') + 8 : start])
                got += n
                if got >= count:
                    return
                renew = {"v": 1, "type": "credit", "records": n, "bytes": size}
                await ws.send(orjson.dumps(renew).decode())


class Bench:
    def __init__(self, port: int, pid: int, records: int, size: int, rounds: int, samples: int) -> None:
        self.port = port
        self.pid = pid  # the gateway's, whose CPU time per record is measured
        self.url = f"http://127.0.0.1:{port}"
        self.records = records
        self.size = size
        self.rounds = rounds
        self.samples = samples
        self.http = httpx.AsyncClient(base_url=self.url, timeout=60)
        self.consumers = Consumers(port)
        self.rates: dict[str, list[float]] = {}  # per way, a rate per round
        self.cpu: dict[str, list[float]] = {}  # per way, the gateway's CPU µs per record, per round

    async def fill(self, topic: str) -> None:
        await create_topic(self.http, topic)
        body = produce_body(os.urandom(self.size), 1000)
        for _ in range(self.records // 1000):
            r = await self.http.post(f"/topics/{topic}", content=body, headers={"Content-Type": BINARY})
            assert r.status_code == 200, r.text

    async def rate(self, label: str, topic: str, read: Callable[[str, int], Awaitable[None]]) -> float:
        """Records/s of a new instance reading ``records`` of ``topic`` with ``read``."""
        path = await subscribed(self.http, f"bench-{label.replace(' ', '-')}-{time.monotonic_ns()}", topic)
        cpu = cpu_seconds(self.pid)
        start = time.perf_counter()
        await read(path, self.records)
        elapsed = time.perf_counter() - start
        self.cpu.setdefault(label, []).append((cpu_seconds(self.pid) - cpu) / self.records * 1e6)
        await self.http.delete(path)
        return self.records / elapsed

    def ratio(self, label: str, reference: str) -> float:
        """The median of the per-round ratios of ``label`` to ``reference``."""
        return statistics.median(a / b for a, b in zip(self.rates[label], self.rates[reference], strict=True))

    async def throughput(self, topic: str, reference: Callable[[], Awaitable[float]] | None = None) -> None:
        c = self.consumers
        ways: list[tuple[str, Callable[[str, int], Awaitable[None]]]] = [
            ("long-poll", c.poll_count),
            ("SSE", c.sse_count),
            ("WebSocket", lambda path, n: c.ws(path, n, parse=False)),
            ("long-poll, parsed (httpx)", c.poll_parse),
            ("SSE, parsed (httpx)", c.sse_parse),
            ("WebSocket, parsed", lambda path, n: c.ws(path, n, parse=True)),
        ]
        for _ in range(self.rounds):
            for label, read in ways:
                self.rates.setdefault(label, []).append(await self.rate(label, topic, read))
            if reference is not None:
                self.rates.setdefault("aiokafka", []).append(await reference())
        print(
            f"throughput: {self.records:,} records of {self.size} B read from the start, "
            f"median of {self.rounds} rounds"
        )
        for label, _ in ways:
            rate = statistics.median(self.rates[label])
            base = "long-poll, parsed (httpx)" if "parsed" in label else "long-poll"
            print(
                f"  {label:<28} {rate:>10,.0f} rec/s {rate * self.size / 1e6:>7.1f} MB/s   "
                f"x long-poll {self.ratio(label, base):5.2f}   "
                f"gateway {statistics.median(self.cpu[label]):4.2f} µs CPU/record",
                flush=True,
            )
        if reference is not None:
            native = statistics.median(self.rates["aiokafka"])
            print(f"a Python client that parses what it receives, against aiokafka ({native:,.0f} rec/s):")
            for label in ("long-poll, parsed (httpx)", "SSE, parsed (httpx)", "WebSocket, parsed"):
                print(f"  {label:<28} x aiokafka {self.ratio(label, 'aiokafka'):5.2f}", flush=True)

    async def latency(self, topic: str) -> None:
        """Produce -> delivery of one record at a time, for each way of consuming."""
        await create_topic(self.http, topic)
        body = produce_body(b"x" * self.size, 1)
        print(f"latency: produce -> delivery, {self.samples} records one at a time")
        for label in ("long-poll", "SSE", "WebSocket"):
            path = await subscribed(self.http, f"lat-{label}-{time.monotonic_ns()}", topic)
            await self.http.post(
                f"{path}/positions/end",
                json={"partitions": [{"topic": topic, "partition": 0}]},
                headers={"Content-Type": "application/vnd.kafka.v2+json"},
            )
            arrived: asyncio.Queue[float] = asyncio.Queue()
            reader = asyncio.create_task(self._deliveries(label, path, arrived))
            await asyncio.sleep(0.5)  # the consumer waits
            samples = []
            async with Connection("127.0.0.1", self.port) as producer:
                request = producer.build("POST", f"/topics/{topic}", body, BINARY)
                for _ in range(self.samples):
                    sent = time.perf_counter()
                    status, _ = await producer.send(request)
                    assert status == 200
                    samples.append(await asyncio.wait_for(arrived.get(), 10) - sent)
                    await asyncio.sleep(0.002)
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            await self.http.delete(path)
            q = statistics.quantiles(samples, n=100)
            print(f"  {label:<12} p50 {q[49] * 1000:6.2f} ms   p99 {q[98] * 1000:6.2f} ms", flush=True)

    async def _deliveries(self, label: str, path: str, arrived: asyncio.Queue[float]) -> None:
        if label == "long-poll":
            async with Connection("127.0.0.1", self.port) as conn:
                request = conn.build("GET", path + "/records?timeout=5000", accept=BINARY)
                while True:
                    _, payload = await conn.send(request)
                    for _ in range(payload.count(b'"offset":')):
                        arrived.put_nowait(time.perf_counter())
        elif label == "SSE":
            async with (
                httpx.AsyncClient(base_url=self.url, timeout=60) as http,
                http.stream("GET", path + "/records", headers={"Accept": EVENT_STREAM}) as response,
            ):
                async for chunk in response.aiter_bytes():
                    for _ in range(chunk.count(b'"offset":')):
                        arrived.put_nowait(time.perf_counter())
        else:
            async with connect(f"ws://127.0.0.1:{self.port}{path}/records") as ws:
                credit = {"v": 1, "type": "credit", "records": CREDIT_RECORDS, "bytes": CREDIT_BYTES}
                await ws.send(orjson.dumps(credit).decode())
                async for raw in ws:
                    text = raw if isinstance(raw, str) else raw.decode()
                    if not text.startswith('{"v":1,"type":"records"'):
                        continue
                    for _ in range(text.count('"offset":', text.index(',"records":'))):
                        arrived.put_nowait(time.perf_counter())
                        await ws.send(orjson.dumps({**credit, "records": 1, "bytes": self.size}).decode())

    async def aiokafka(self, bootstrap: str, topic: str) -> float:
        """Records/s of aiokafka's consumer reading ``records`` of ``topic`` from the start."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=1_000_000,
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            got = 0
            start = time.perf_counter()
            while got < self.records:
                batches = await consumer.getmany(timeout_ms=1000)
                got += sum(len(records) for records in batches.values())
            return self.records / (time.perf_counter() - start)
        finally:
            await consumer.stop()

    async def run(self, bootstrap: str | None) -> None:
        topic = f"bench-streams-{os.getpid()}"
        await self.fill(topic)
        reference = None
        if bootstrap is not None:
            kafka = bootstrap

            def reference() -> Awaitable[float]:
                return self.aiokafka(kafka, topic)

        await self.throughput(topic, reference)
        await self.latency(f"{topic}-lat")
        await self.http.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="20,000 records, 1 round, 100 latency samples")
    add_log_options(parser)
    args = parser.parse_args()
    records, rounds, samples = (20_000, 1, 100) if args.quick else (args.records, args.rounds, args.samples)

    async def measure(gateway: subprocess.Popen[bytes], port: int, bootstrap: str | None) -> None:
        await Bench(port, gateway.pid, records, args.size, rounds, samples).run(bootstrap)

    await on_each_log(args, measure)


if __name__ == "__main__":
    asyncio.run(main())
