"""Benchmark consuming (and producing) through the gateway against native clients, in one run.

    .venv/bin/python bench/consume.py [--records 100000] [--rounds 5] [--seconds 2] [--quick]
                                      [--bootstrap host:port | --cluster | --no-kafka]

Every row compares a gateway client with its native reference, both measured in every round of
the same run; a row's ratio is gateway / reference, reported as the median and the min-max of the
per-round ratios (the machine is shared: the spread says how much to trust a figure). Values are
100 B JSON objects, and clients parse them as users' programs do, with the standard ``json``
module: a json-format consumer's answer with ``json.loads`` (httpx's ``Response.json``), a
binary-format one with ``json.loads`` of the answer and of every base64-decoded value, aiokafka's
records and in-process records with ``json.loads`` of every value.

On a Kafka log (Apache Kafka started here, three brokers with ``--cluster``, or ``--bootstrap``):
  long-poll    a new consumer instance reading ``--records`` records from the start with
               ``GET …/records`` (1 MB a poll, httpx), json format; binary beside it; vs
               aiokafka's ``AIOKafkaConsumer.getmany`` on the same broker;
  stream       the WebSocket stream of a json-format instance; SSE beside it; same reference.
On the embedded log:
  share        4 share consumers (acquire, accept piggy-backed on the next poll) vs 4 members of
               a consumer group (one per partition of a 4-partition topic, committing after
               every poll), the clients of ``bench/shares.py`` (they find offsets, not values);
               with the gateway's CPU seconds per 10,000 records;
  consume      the long-poll of a json-format instance vs in-process ``fetch`` on an
               ``EmbeddedLog`` in this process, each value parsed; the WebSocket and SSE
               streams beside it;
  produce      4 clients producing 1000 x 100 B binary-format requests (bodies encoded once) vs
               the same appends in-process (fsync before acknowledging, both); json format beside.

Beside the rows: a counting client (records counted, nothing decoded: the gateway's own figure),
the references without ``json.loads``, and for every way the gateway's CPU per record (from
/proc) and this client process's (``time.process_time``): the terms of the model in
``bench/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path

import httpx
import orjson
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import shares  # noqa: E402
from bench.common import (  # noqa: E402
    BINARY,
    add_log_options,
    cpu_seconds,
    create_topic,
    fetch_through,
    json_values,
    on_each_log,
    rest_produce,
    run_for,
    subscribed,
)
from bench.streams import Consumers  # noqa: E402
from service.adapters.embedded.log import EmbeddedLog  # noqa: E402
from service.core.models import NewRecord, Record, TopicPartition  # noqa: E402
from service.wire.formats import content_type_for  # noqa: E402

JSON = content_type_for("json")
SIZE = 100
BATCH = 1000
SHARE_CONSUMERS = 4
CLIENTS = 4  # producing clients, as bench/embedded.py
# A way to read: an async context that gets ready (an instance, a connection) and yields the
# timed part.
Way = Callable[[], AbstractAsyncContextManager[Callable[[], Awaitable[None]]]]
# The rows: title, the way measured, its reference, the ways shown beside them.
ROWS: list[tuple[str, str, str, tuple[str, ...]]] = [
    (
        "long-poll (httpx), Kafka log, vs aiokafka",
        "kafka long-poll json",
        "kafka aiokafka",
        ("kafka long-poll binary", "kafka long-poll counted", "kafka aiokafka counted"),
    ),
    (
        "the best stream, Kafka log, vs aiokafka",
        "kafka WebSocket json",
        "kafka aiokafka",
        ("kafka SSE json",),
    ),
    (
        "4 share consumers vs 4 group members, embedded",
        f"share, {SHARE_CONSUMERS}",
        shares.REFERENCE,
        (),
    ),
    (
        "embedded: REST consume vs in-process fetch",
        "embedded long-poll json",
        "embedded fetch",
        (
            "embedded WebSocket json",
            "embedded SSE json",
            "embedded long-poll binary",
            "embedded long-poll counted",
            "embedded fetch counted",
        ),
    ),
    (
        "embedded: REST produce vs in-process append",
        "produce binary",
        "append",
        ("produce json",),
    ),
]


def count(records: list[dict[str, object]]) -> int:
    """A json-format answer's records: their values were parsed with the answer."""
    return len(records)


def b64json(records: list[dict[str, object]]) -> int:
    """A binary-format answer's records: each value base64-decoded, then parsed."""
    for record in records:
        json.loads(base64.b64decode(record["value"]))  # type: ignore[arg-type]
    return len(records)


def parse_values(records: Sequence[Record]) -> None:
    """What a native client does with the records it fetched: parse every value."""
    for record in records:
        json.loads(record.value)  # type: ignore[arg-type]


class Figures:
    """Per way, a figure per round: records/s, the gateway's and the client's CPU µs per record."""

    def __init__(self) -> None:
        self.rates: dict[str, list[float]] = {}
        self.gateway: dict[str, list[float]] = {}
        self.client: dict[str, list[float]] = {}

    async def timed(self, label: str, way: Way, records: int, pid: int | None) -> None:
        async with way() as read:
            gateway = cpu_seconds(pid) if pid else 0.0
            client = time.process_time()
            start = time.perf_counter()
            await read()
            elapsed = time.perf_counter() - start
            self.add(label, records / elapsed)
            self.client.setdefault(label, []).append((time.process_time() - client) / records * 1e6)
            if pid:
                self.gateway.setdefault(label, []).append((cpu_seconds(pid) - gateway) / records * 1e6)

    def add(self, label: str, rate: float) -> None:
        self.rates.setdefault(label, []).append(rate)

    def ratios(self, label: str, reference: str) -> list[float]:
        return [a / b for a, b in zip(self.rates[label], self.rates[reference], strict=True)]

    def line(self, label: str) -> str:
        rate = statistics.median(self.rates[label])
        cpu = [
            f"{what} {statistics.median(values[label]):5.2f}"
            for what, values in (("gateway", self.gateway), ("client", self.client))
            if label in values
        ]
        return f"{label:<28} {rate:>10,.0f} rec/s" + (f"   µs CPU/record: {', '.join(cpu)}" if cpu else "")


class Bench:
    def __init__(self, args: argparse.Namespace, figures: Figures) -> None:
        self.records: int = args.records
        self.rounds: int = args.rounds
        self.seconds: float = args.seconds
        self.share_seconds: float = args.share_seconds
        self.figures = figures
        self.values = json_values(SIZE, BATCH)
        self.body = orjson.dumps({"records": [{"value": base64.b64encode(v).decode()} for v in self.values]})

    async def fill(self, http: httpx.AsyncClient, topic: str) -> None:
        await create_topic(http, topic)
        for _ in range(self.records // BATCH):
            r = await http.post(f"/topics/{topic}", content=self.body, headers={"Content-Type": BINARY})
            assert r.status_code == 200, r.text

    async def in_turns(self, ways: list[tuple[str, Callable[[], Awaitable[None]]]]) -> None:
        """Each way once a round, turned around every other round so that none always follows another."""
        for round_ in range(self.rounds):
            for _, way in ways if round_ % 2 == 0 else ways[::-1]:
                await way()
            print(f"  round {round_ + 1} of {self.rounds} done", flush=True)

    def rest_ways(
        self, prefix: str, http: httpx.AsyncClient, port: int, topic: str, streams: bool
    ) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        """The gateway's ways to read ``topic``, each a new instance reading every record."""
        parse_json = Consumers(port, json.loads, count, JSON)
        parse_binary = Consumers(port, json.loads, b64json, BINARY)

        def way(fmt: str, read: Callable[[str, int], Awaitable[None]]) -> Way:
            @asynccontextmanager
            async def ready() -> AsyncIterator[Callable[[], Awaitable[None]]]:
                path = await subscribed(http, f"bench-consume-{time.monotonic_ns()}", topic, fmt)
                try:
                    yield partial(read, path, self.records)
                finally:
                    await http.delete(path)

            return ready

        ways = [
            ("long-poll json", way("json", parse_json.poll_parse)),
            ("long-poll binary", way("binary", parse_binary.poll_parse)),
            ("long-poll counted", way("json", parse_json.poll_count)),
        ]
        if streams:
            ways += [
                ("WebSocket json", way("json", partial(parse_json.ws, parse=True))),
                ("SSE json", way("json", parse_json.sse_parse)),
            ]
        gateway = self.pid
        return [
            (f"{prefix} {label}", partial(self.figures.timed, f"{prefix} {label}", w, self.records, gateway))
            for label, w in ways
        ]

    # --- the Kafka log ---------------------------------------------------------------------

    def aiokafka(self, bootstrap: str, topic: str, parse: bool) -> Way:
        @asynccontextmanager
        async def ready() -> AsyncIterator[Callable[[], Awaitable[None]]]:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                max_partition_fetch_bytes=1_000_000,
            )
            await consumer.start()
            consumer.assign([KafkaPartition(topic, 0)])

            async def read() -> None:
                got = 0
                while got < self.records:
                    for records in (await consumer.getmany(timeout_ms=1000)).values():
                        if parse:
                            for record in records:
                                json.loads(record.value)
                        got += len(records)

            try:
                yield read
            finally:
                await consumer.stop()

        return ready

    async def kafka(self, http: httpx.AsyncClient, port: int, bootstrap: str) -> None:
        topic = f"bench-consume-{os.getpid()}"
        await self.fill(http, topic)
        ways = self.rest_ways("kafka", http, port, topic, streams=True)
        for label, parse in (("kafka aiokafka", True), ("kafka aiokafka counted", False)):
            ways.append(
                (
                    label,
                    partial(
                        self.figures.timed, label, self.aiokafka(bootstrap, topic, parse), self.records, None
                    ),
                )
            )
        await self.in_turns(ways)

    # --- the embedded log ------------------------------------------------------------------

    async def embedded(self, http: httpx.AsyncClient, port: int, log: EmbeddedLog) -> None:
        topic = f"bench-consume-{os.getpid()}"
        await self.fill(http, topic)
        tp = TopicPartition(topic, 0)
        await log.create_topic(topic, 1, 1, {})
        records = [NewRecord(None, v) for v in self.values]
        for _ in range(self.records // BATCH):
            await log.append(tp, records)
        ways = self.rest_ways("embedded", http, port, topic, streams=True)

        def fetch(each: Callable[[Sequence[Record]], object] | None) -> Way:
            @asynccontextmanager
            async def ready() -> AsyncIterator[Callable[[], Awaitable[None]]]:
                async def read() -> None:
                    await fetch_through(log, tp, self.records, each)

                yield read

            return ready

        for label, each in (("embedded fetch", parse_values), ("embedded fetch counted", None)):
            ways.append((label, partial(self.figures.timed, label, fetch(each), self.records, None)))

        group = shares.Bench(
            port,
            self.pid,
            self.records,
            SIZE,
            1,
            500,
            self.share_seconds,
            partitions=SHARE_CONSUMERS,
        )
        await group.http.aclose()  # its own client: this one serves every way of the run
        group.http = http
        share_topic = f"{topic}-shares"
        await group.fill(share_topic)
        ways += [
            (shares.REFERENCE, partial(group.consumer_group, share_topic)),
            (f"share, {SHARE_CONSUMERS}", partial(group.share_group, share_topic, SHARE_CONSUMERS, False)),
        ]
        ways += await self.produce_ways(http, port, log)
        await self.in_turns(ways)
        for label in (shares.REFERENCE, f"share, {SHARE_CONSUMERS}"):
            self.figures.rates[label] = group.rates[label]
            self.figures.gateway[label] = group.cpu[label]

    async def produce_ways(
        self, http: httpx.AsyncClient, port: int, log: EmbeddedLog
    ) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        topic = f"bench-produce-{os.getpid()}"
        await create_topic(http, topic)
        await log.create_topic(topic, 1, 1, {})
        tp = TopicPartition(topic, 0)
        records = [NewRecord(None, v) for v in self.values]
        json_body = orjson.dumps({"records": [{"value": orjson.loads(v)} for v in self.values]})

        async def append(n: int) -> int:
            await log.append(tp, records)
            return BATCH

        def produce(label: str, body: tuple[bytes, str]) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                cpu = cpu_seconds(self.pid)
                client = time.process_time()
                rate = await rest_produce(port, topic, b"", BATCH, CLIENTS, self.seconds, body=body)
                done = rate * self.seconds  # about: run_for stops at the first answer after the time
                self.figures.add(label, rate)
                self.figures.gateway.setdefault(label, []).append((cpu_seconds(self.pid) - cpu) / done * 1e6)
                self.figures.client.setdefault(label, []).append((time.process_time() - client) / done * 1e6)

            return run

        async def in_process() -> None:
            client = time.process_time()
            n, elapsed = await run_for(self.seconds, CLIENTS, append)
            self.figures.add("append", n / elapsed)
            self.figures.client.setdefault("append", []).append((time.process_time() - client) / n * 1e6)

        return [
            ("produce binary", produce("produce binary", (self.body, BINARY))),
            ("produce json", produce("produce json", (json_body, JSON))),
            ("append", in_process),
        ]

    pid = 0  # the gateway measured, set per log


def report(figures: Figures) -> None:
    print("\nrow: gateway / reference, median [min-max] of the per-round ratios")
    for title, label, reference, beside in ROWS:
        if label not in figures.rates or reference not in figures.rates:
            continue
        ratios = figures.ratios(label, reference)
        print(
            f"{title}\n  ratio {statistics.median(ratios):5.2f} [{min(ratios):4.2f}-{max(ratios):4.2f}]"
            f" over {len(ratios)} rounds"
        )
        for way in (label, reference, *beside):
            if way in figures.rates:
                beside_ratio = statistics.median(figures.ratios(way, reference))
                print(f"    {figures.line(way)}   x ref {beside_ratio:5.2f}")
        if label.startswith("share"):
            per_10k = [statistics.median(figures.gateway[w]) / 100 for w in (label, reference)]
            print(f"    gateway CPU per 10,000 records: {per_10k[0]:.2f} s vs {per_10k[1]:.2f} s")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000, help="records each read goes through")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="each produce figure's duration")
    parser.add_argument("--share-seconds", type=float, default=5.0, help="the longest a share read runs")
    parser.add_argument("--quick", action="store_true", help="20,000 records, 2 rounds, 1 s figures")
    add_log_options(parser)
    args = parser.parse_args()
    if args.quick:
        args.records, args.rounds, args.seconds, args.share_seconds = 20_000, 2, 1.0, 2.0
    figures = Figures()
    bench = Bench(args, figures)
    load = os.getloadavg()
    started = time.perf_counter()

    async def measure(gateway: subprocess.Popen[bytes], port: int, bootstrap: str | None) -> None:
        bench.pid = gateway.pid
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            if bootstrap is not None:
                await bench.kafka(http, port, bootstrap)
                return
            with tempfile.TemporaryDirectory() as tmp:
                log = EmbeddedLog(Path(tmp))
                await log.start()
                try:
                    await bench.embedded(http, port, log)
                finally:
                    await log.stop()

    await on_each_log(args, measure)
    print(
        f"\n{args.records:,} records of {SIZE} B JSON per read, {args.rounds} rounds, "
        f"{time.perf_counter() - started:.0f} s; load average {load[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after, {os.cpu_count()} CPUs"
    )
    report(figures)


if __name__ == "__main__":
    asyncio.run(main())
