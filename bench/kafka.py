"""Benchmark the gateway on Apache Kafka against Kafka's strongest Python clients, in one run.

    .venv/bin/python bench/kafka.py [--rounds 3] [--seconds 2] [--clients 4] [--records 100000]
                                    [--sizes 100,1000] [--quick] [--bootstrap host:port | --cluster]

Without ``--bootstrap`` it starts Apache Kafka here (one KRaft broker, or three with
``--cluster``), then ``brokergate serve --log kafka://…`` on it. Every client is the one a user
has: the REST side uses httpx and the standard ``json`` module (and ``websockets`` for the
stream), the native side aiokafka and confluent-kafka (librdkafka). Values are JSON objects of
``--sizes`` bytes, made by ``json.dumps`` and read with ``json.loads`` on every side. Kafka's
client defaults are kept, except that both producers are asked for what Kafka's own clients do by
default, the idempotent producer and ``acks=all`` (aiokafka's default is neither).

  produce  ``--clients`` concurrent clients, each sending batches of 1, 100 and 1000 records and
           waiting for every acknowledgement before the next, for ``--seconds``:
             REST        ``POST /topics/{t}`` in the json format, the body made by
                         ``json.dumps`` for every request (httpx, a keep-alive connection each);
             aiokafka    one ``AIOKafkaProducer`` shared by the clients: a ``send()`` a record,
                         then the batch's futures awaited;
             confluent   a ``confluent_kafka.Producer`` a client (a thread each): a
                         ``produce()`` a record with a delivery callback, then ``flush()``; the
                         records counted are those whose callback reported no error.
  consume  a topic of ``--records`` records, read from its start by a new reader each time:
             long-poll   a json-format consumer instance, ``GET …/records`` (1 MB a poll, httpx,
                         ``json.loads`` of each answer);
             WebSocket   the WebSocket stream of a json-format instance (``websockets``,
                         ``json.loads`` of each message); SSE beside it (httpx);
             aiokafka    ``AIOKafkaConsumer.getmany``, ``json.loads`` of every value;
             confluent   ``confluent_kafka.Consumer.consume`` (1000 a call), ``json.loads`` of
                         every value.

Each round measures every way once, the order turned around every other round, so that load
from elsewhere on the machine falls on every side; a row gives the median and the min-max of
the per-round figures and of the per-round ratios to each reference. Beside each figure: the
CPU this client process, the gateway and the broker spent per record (from /proc), the terms
of the bound written in ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import confluent_kafka
import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as KafkaPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    Kafka,
    add_kafka_options,
    cpu_seconds,
    create_topic,
    json_values,
    kafka_bootstrap,
    run_for,
    start_gateway,
    subscribed,
)
from bench.streams import Consumers  # noqa: E402
from service.wire.formats import content_type_for  # noqa: E402

JSON = content_type_for("json")
BATCHES = (1, 100, 1000)
# What a timed way answers: records done, seconds taken, and the CPU meter read as the clock started.
Timed = tuple[int, float, tuple[float, float, float]]
FILL_BATCH = 1000
# The goals, gateway / reference: (way, reference) -> the least ratio wanted.
GOALS: dict[tuple[str, str], float] = {
    ("REST", "aiokafka"): 1.0,
    ("REST", "confluent"): 0.5,
    ("long-poll", "aiokafka"): 0.6,
    ("best stream", "aiokafka"): 1.0,
}
PRODUCERS = ("REST", "aiokafka", "confluent")
READERS = ("long-poll", "WebSocket", "SSE", "aiokafka", "confluent")
STREAMS = ("WebSocket", "SSE")
REFERENCES = ("aiokafka", "confluent")


def count(records: list[dict[str, object]]) -> int:
    """A json-format answer's records: their values were parsed with the answer."""
    return len(records)


@dataclass
class Figure:
    """One way's figures over the rounds: records/s, and the CPU µs per record of this client
    process, the gateway and the broker."""

    rates: list[float]
    client: list[float]
    gateway: list[float]
    broker: list[float]


class Meter:
    """CPU seconds of this process (every thread: librdkafka's too), the gateway and the brokers
    (a cluster's controller and brokers together)."""

    def __init__(self, gateway: int, brokers: tuple[int, ...]) -> None:
        self.gateway = gateway
        self.brokers = brokers

    def read(self) -> tuple[float, float, float]:
        brokers = sum(map(cpu_seconds, self.brokers))
        return time.process_time(), cpu_seconds(self.gateway), brokers


class Bench:
    def __init__(self, args: argparse.Namespace, kafka: Kafka, port: int, gateway_pid: int) -> None:
        self.kafka = kafka
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.rounds: int = args.rounds
        self.seconds: float = args.seconds
        self.clients: int = args.clients
        self.records: int = args.records
        self.sizes: list[int] = args.sizes
        self.meter = Meter(gateway_pid, kafka.pids)
        self.figures: dict[str, Figure] = {}
        self.http = httpx.AsyncClient(base_url=self.url, timeout=60)
        # The same objects on every side: each client serializes them with json.dumps as it sends.
        self.objects = {size: [json.loads(v) for v in json_values(size, max(BATCHES))] for size in args.sizes}
        self.producer = AIOKafkaProducer(
            bootstrap_servers=kafka.bootstrap, acks="all", enable_idempotence=True
        )

    async def start(self) -> None:
        await self.producer.start()

    async def stop(self) -> None:
        await self.producer.stop()
        await self.http.aclose()

    def keep(self, label: str, records: float, elapsed: float, before: tuple[float, float, float]) -> None:
        after = self.meter.read()
        used = [(b - a) / records * 1e6 for a, b in zip(before, after, strict=True)]
        figure = self.figures.setdefault(label, Figure([], [], [], []))
        figure.rates.append(records / elapsed)
        figure.client.append(used[0])
        figure.gateway.append(used[1])
        figure.broker.append(used[2])

    # --- produce ---------------------------------------------------------------------------

    async def rest_produce(self, topic: str, objects: list[Any], batch: int) -> Timed:
        limits = httpx.Limits(max_connections=self.clients, max_keepalive_connections=self.clients)
        async with httpx.AsyncClient(base_url=self.url, timeout=60, limits=limits) as http:
            headers = {"Content-Type": JSON}
            warm = json.dumps({"records": [{"value": objects[0]}]})
            await asyncio.gather(
                *(http.post(f"/topics/{topic}", content=warm, headers=headers) for _ in range(self.clients))
            )

            async def one(n: int) -> int:
                body = json.dumps({"records": [{"value": o} for o in objects[:batch]]})
                r = await http.post(f"/topics/{topic}", content=body, headers=headers)
                assert r.status_code == 200, r.text
                return batch

            before = self.meter.read()
            return *(await run_for(self.seconds, self.clients, one)), before

    async def aiokafka_produce(self, topic: str, objects: list[Any], batch: int) -> Timed:
        async def one(n: int) -> int:
            futures = [
                await self.producer.send(topic, json.dumps(o).encode(), partition=0) for o in objects[:batch]
            ]
            await asyncio.gather(*futures)
            return batch

        before = self.meter.read()
        return *(await run_for(self.seconds, self.clients, one)), before

    def confluent_produce(self, topic: str, objects: list[Any], batch: int) -> Timed:
        config = {"bootstrap.servers": self.kafka.bootstrap, "enable.idempotence": True, "acks": "all"}
        producers = [confluent_kafka.Producer(config) for _ in range(self.clients)]
        for producer in producers:  # connected, and its producer id taken, before the clock starts
            producer.produce(topic, json.dumps(objects[0]).encode(), partition=0)
            assert producer.flush(30) == 0
        delivered = [0] * self.clients
        failed: list[object] = []

        def client(n: int, stop: float) -> None:
            producer = producers[n]

            def done(err: object, _msg: object) -> None:
                if err is None:
                    delivered[n] += 1
                else:
                    failed.append(err)

            while time.perf_counter() < stop:
                for o in objects[:batch]:
                    producer.produce(topic, json.dumps(o).encode(), partition=0, on_delivery=done)
                producer.flush()

        before = self.meter.read()
        start = time.perf_counter()
        stop = start + self.seconds
        threads = [threading.Thread(target=client, args=(n, stop)) for n in range(self.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        assert not failed, f"confluent-kafka: {len(failed)} records not delivered, the first: {failed[0]}"
        return sum(delivered), elapsed, before

    async def produce_round(self, size: int, batch: int, reverse: bool) -> None:
        """Each producer once, on a new topic each."""
        objects = self.objects[size]
        ways: list[tuple[str, Callable[[str], Awaitable[Timed]]]] = [
            ("REST", lambda t: self.rest_produce(t, objects, batch)),
            ("aiokafka", lambda t: self.aiokafka_produce(t, objects, batch)),
            ("confluent", lambda t: asyncio.to_thread(self.confluent_produce, t, objects, batch)),
        ]
        for way, run in ways[::-1] if reverse else ways:
            topic = f"bench-p-{size}-{batch}-{way}-{time.monotonic_ns()}"
            await create_topic(self.http, topic)
            records, elapsed, before = await run(topic)
            self.keep(f"produce {size} B x {batch} {way}", records, elapsed, before)

    # --- consume ---------------------------------------------------------------------------

    async def fill(self, topic: str, size: int) -> None:
        await create_topic(self.http, topic)
        body = json.dumps({"records": [{"value": o} for o in self.objects[size][:FILL_BATCH]]})
        for _ in range(self.records // FILL_BATCH):
            r = await self.http.post(f"/topics/{topic}", content=body, headers={"Content-Type": JSON})
            assert r.status_code == 200, r.text

    def rest_reader(self, topic: str, read: Callable[[str, int], Awaitable[None]]) -> Way:
        @asynccontextmanager
        async def ready() -> AsyncIterator[Callable[[], Awaitable[None]]]:
            path = await subscribed(self.http, f"bench-read-{time.monotonic_ns()}", topic, "json")
            try:
                yield partial(read, path, self.records)
            finally:
                await self.http.delete(path)

        return ready

    def aiokafka_reader(self, topic: str) -> Way:
        @asynccontextmanager
        async def ready() -> AsyncIterator[Callable[[], Awaitable[None]]]:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.kafka.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
            )
            await consumer.start()
            consumer.assign([KafkaPartition(topic, 0)])

            async def read() -> None:
                got = 0
                while got < self.records:
                    for records in (await consumer.getmany(timeout_ms=1000)).values():
                        for record in records:
                            json.loads(record.value)
                        got += len(records)

            try:
                yield read
            finally:
                await consumer.stop()

        return ready

    def confluent_reader(self, topic: str) -> Way:
        @asynccontextmanager
        async def ready() -> AsyncIterator[Callable[[], Awaitable[None]]]:
            consumer = confluent_kafka.Consumer(
                {
                    "bootstrap.servers": self.kafka.bootstrap,
                    "group.id": f"bench-read-{time.monotonic_ns()}",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                }
            )
            consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])

            def read() -> None:
                got = 0
                while got < self.records:
                    for message in consumer.consume(num_messages=1000, timeout=1.0):
                        if message.error() is not None:
                            raise RuntimeError(f"confluent-kafka: {message.error()}")
                        json.loads(message.value())  # type: ignore[arg-type]
                        got += 1

            try:
                yield partial(asyncio.to_thread, read)
            finally:
                consumer.close()

        return ready

    async def consume_round(self, topic: str, size: int, reverse: bool) -> None:
        parse = Consumers(self.port, json.loads, count, JSON)
        ways: list[tuple[str, Way]] = [
            ("long-poll", self.rest_reader(topic, parse.poll_parse)),
            ("WebSocket", self.rest_reader(topic, partial(parse.ws, parse=True))),
            ("SSE", self.rest_reader(topic, parse.sse_parse)),
            ("aiokafka", self.aiokafka_reader(topic)),
            ("confluent", self.confluent_reader(topic)),
        ]
        for way, reader in ways[::-1] if reverse else ways:
            async with reader() as read:
                before = self.meter.read()
                start = time.perf_counter()
                await read()
                self.keep(f"consume {size} B {way}", self.records, time.perf_counter() - start, before)

    # --- the run ---------------------------------------------------------------------------

    async def run(self) -> None:
        topics = {}
        for size in self.sizes:
            topics[size] = f"bench-c-{size}-{time.monotonic_ns()}"
            await self.fill(topics[size], size)
        for round_ in range(self.rounds):
            reverse = round_ % 2 == 1
            for size in self.sizes:
                for batch in BATCHES:
                    await self.produce_round(size, batch, reverse)
                await self.consume_round(topics[size], size, reverse)
            print(f"  round {round_ + 1} of {self.rounds} done", flush=True)

    # --- the report ------------------------------------------------------------------------

    def best_stream(self, size: int) -> str:
        rates = {way: statistics.median(self.figures[f"consume {size} B {way}"].rates) for way in STREAMS}
        return max(rates, key=rates.__getitem__)

    def ratios(self, label: str, reference: str) -> list[float]:
        return [a / b for a, b in zip(self.figures[label].rates, self.figures[reference].rates, strict=True)]

    def report(self) -> None:
        print(
            "\nrecords/s: median [min-max] over the rounds; x ref: the median [min-max] of the per-round"
            " ratios; µs CPU a record (medians): this client process / the gateway / the broker"
        )
        for size in self.sizes:
            for batch in BATCHES:
                print(f"\nproduce {size} B JSON, batches of {batch}, {self.clients} clients")
                self.rows(f"produce {size} B x {batch}", PRODUCERS, "REST")
            best = self.best_stream(size)
            print(f"\nconsume {self.records:,} records of {size} B JSON, values parsed (best stream: {best})")
            self.rows(f"consume {size} B", READERS, "long-poll", best)

    def rows(self, prefix: str, ways: tuple[str, ...], *measured: str) -> None:
        for way in ways:
            figure = self.figures[f"{prefix} {way}"]
            rates = figure.rates
            cpu = "/".join(
                f"{statistics.median(values):.1f}"
                for values in (figure.client, figure.gateway, figure.broker)
            )
            line = (
                f"  {way:<10} {statistics.median(rates):>9,.0f} [{min(rates):,.0f}-{max(rates):,.0f}]"
                f"   µs CPU {cpu}"
            )
            if way in measured:
                for reference in REFERENCES:
                    ratios = self.ratios(f"{prefix} {way}", f"{prefix} {reference}")
                    kind = "best stream" if way in STREAMS else way
                    goal = GOALS.get((kind, reference))
                    mark = (
                        ""
                        if goal is None
                        else f" (goal {goal:g}: {'met' if statistics.median(ratios) >= goal else 'MISSED'})"
                    )
                    line += (
                        f"   x {reference} {statistics.median(ratios):.2f}"
                        f" [{min(ratios):.2f}-{max(ratios):.2f}]{mark}"
                    )
            print(line, flush=True)


Way = Callable[[], AbstractAsyncContextManager[Callable[[], Awaitable[None]]]]


async def measure(args: argparse.Namespace, kafka: Kafka) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        gateway, port = start_gateway(Path(tmp), "--log", f"kafka://{kafka.bootstrap}")
        try:
            bench = Bench(args, kafka, port, gateway.pid)
            await bench.start()
            try:
                await bench.run()
            finally:
                await bench.stop()
            bench.report()
        finally:
            gateway.terminate()
            gateway.wait(15)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="each produce figure's duration")
    parser.add_argument("--clients", type=int, default=4, help="concurrent producing clients")
    parser.add_argument("--records", type=int, default=100_000, help="records each read goes through")
    parser.add_argument("--sizes", default="100,1000", help="bytes a JSON value, comma-separated")
    parser.add_argument("--quick", action="store_true", help="1 round, 0.5 s figures, 10,000 records")
    add_kafka_options(parser)
    args = parser.parse_args()
    args.sizes = [int(n) for n in args.sizes.split(",")]
    if args.quick:
        args.rounds, args.seconds, args.records = 1, 0.5, 10_000
    if args.records % FILL_BATCH:
        parser.error(f"--records must be a multiple of {FILL_BATCH}")
    load = os.getloadavg()
    started = time.perf_counter()
    with kafka_bootstrap(args) as kafka:
        print(
            f"brokergate on kafka://{kafka.bootstrap} ({kafka.kind}) vs aiokafka {aiokafka_version()} and "
            f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}): "
            f"{args.rounds} rounds, {args.seconds:g} s a produce figure, {args.records:,} records a read; "
            "idempotent producers, acks=all",
            flush=True,
        )
        asyncio.run(measure(args, kafka))
    print(
        f"\n{time.perf_counter() - started:.0f} s; load average {load[0]:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after, {os.cpu_count()} CPUs"
    )


def aiokafka_version() -> str:
    import aiokafka

    return str(aiokafka.__version__)


if __name__ == "__main__":
    main()
