"""Benchmark: KafkaLog.append of N records in one call vs a plain AIOKafkaProducer.send() per record.

Both write the same records (default 1000 x 1 KB) to a partition of their own on an Apache
Kafka broker started here (``--cluster``: three; ``--bootstrap``: an existing one), with Kafka's
defaults, the idempotent producer and acks=all, and wait for every acknowledgement; each side
runs ``--rounds`` times after a warm-up round and the median is reported, with the ratio of the
two in the same run (absolute numbers depend on the machine).

    .venv/bin/python -m bench.kafka_append [--records 1000] [--size 1024] [--rounds 20]
                                           [--bootstrap host:port | --cluster]

Not collected by pytest (no ``test_`` prefix): a benchmark measures, it does not assert.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from aiokafka import AIOKafkaProducer

from bench.common import add_kafka_options, kafka_bootstrap
from service.adapters.kafka import KafkaLog
from service.core.models import NewRecord, TopicPartition


async def timed(rounds: int, run: Callable[[], Awaitable[None]]) -> list[float]:
    await run()  # warm-up: connections, metadata, producer id
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        await run()
        times.append(time.perf_counter() - started)
    return times


async def bench(bootstrap: str, n: int, size: int, rounds: int) -> None:
    records = [NewRecord(None, (b"%08d" % i).ljust(size, b".")) for i in range(n)]
    log = KafkaLog(f"kafka://{bootstrap}")
    await log.start()
    # aiokafka's own defaults are neither: asked for Kafka's, as the gateway's log has them
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    suffix = time.monotonic_ns()  # an existing broker may hold an earlier run's topics
    try:
        await log.create_topic(f"bench-log-{suffix}", 1, 1, {})
        await log.create_topic(f"bench-plain-{suffix}", 1, 1, {})
        tp = TopicPartition(f"bench-log-{suffix}", 0)

        async def via_log() -> None:
            await log.append(tp, records)

        async def via_plain_producer() -> None:
            futures = [await producer.send(f"bench-plain-{suffix}", r.value, partition=0) for r in records]
            await asyncio.gather(*futures)

        results = {
            "KafkaLog.append (1 call)": await timed(rounds, via_log),
            "AIOKafkaProducer.send x N": await timed(rounds, via_plain_producer),
        }
    finally:
        await producer.stop()
        await log.stop()
    mb = n * size / 1e6
    print(f"{n} records x {size} B = {mb:.2f} MB per round, {rounds} rounds, median (min-max)")
    medians = {}
    for name, times in results.items():
        med = statistics.median(times)
        medians[name] = med
        print(
            f"  {name:28s} {med * 1000:8.1f} ms  ({min(times) * 1000:.1f}-{max(times) * 1000:.1f})"
            f"  {n / med:10.0f} rec/s  {mb / med:7.1f} MB/s"
        )
    log_t, plain_t = medians.values()
    print(f"  KafkaLog.append is {plain_t / log_t:.1f}x the throughput of send() per record")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=20)
    add_kafka_options(parser)
    args = parser.parse_args()
    with kafka_bootstrap(args) as kafka:
        asyncio.run(bench(kafka.bootstrap, args.records, args.size, args.rounds))


if __name__ == "__main__":
    main()
