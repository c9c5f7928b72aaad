"""Benchmark: a poll's sessions work (one load, one compare-and-set save), Redis vs embedded.

Run with ``.venv/bin/python -m bench.redis_sessions``; it
starts its own Redis (``deploy.local.redis_server``) and prints, per adapter and
state size, the median and 99th percentile of load+save over ``--iterations``
rounds, plus a bare redis-py PING as the floor of one round trip. Not a test:
numbers depend on the machine, so they are compared within one run only.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from redis.asyncio import Redis

from deploy.local.redis_server import RedisServer
from service.adapters.embedded.sessions import EmbeddedSessions
from service.adapters.redis import RedisSessions
from service.core.models import InstanceConfig, InstanceState, Subscription, TopicPartition
from service.core.ports import Sessions


def _state(partitions: int) -> InstanceState:
    state = InstanceState(
        group="bench-group",
        name="bench-consumer",
        config=InstanceConfig(format="json", auto_offset_reset="earliest"),
        created_ms=int(time.time() * 1000),
        last_seen_ms=int(time.time() * 1000),
        subscription=Subscription(topics=("orders",)),
        generation=1,
    )
    state.positions = {TopicPartition("orders", p): 1_000_000 for p in range(partitions)}
    return state


async def _poll_rounds(sessions: Sessions, partitions: int, iterations: int) -> list[float]:
    await sessions.create(_state(partitions))
    tp = TopicPartition("orders", 0)
    samples: list[float] = []
    for _ in range(iterations + iterations // 10):  # the first tenth warms up
        started = time.perf_counter()
        state = await sessions.load("bench-group", "bench-consumer")
        state.positions[tp] += 10
        state.last_seen_ms = int(time.time() * 1000)
        if not await sessions.save(state):
            raise RuntimeError("a save lost with no concurrent writer")
        samples.append(time.perf_counter() - started)
    await sessions.delete("bench-group", "bench-consumer")
    return samples[iterations // 10 :]


async def _pings(url: str, iterations: int) -> list[float]:
    client = Redis.from_url(url)
    samples: list[float] = []
    try:
        for _ in range(iterations):
            started = time.perf_counter()
            await client.ping()
            samples.append(time.perf_counter() - started)
    finally:
        await client.aclose()
    return samples


def _line(label: str, samples: list[float]) -> str:
    cut = statistics.quantiles(samples, n=100)
    return f"{label:<36} median {statistics.median(samples) * 1e6:8.1f} µs   p99 {cut[98] * 1e6:8.1f} µs"


async def main(iterations: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp)) as server:
        print(f"{iterations} rounds each; Redis {server.url} on loopback\n")
        print(_line("redis-py PING (one round trip)", await _pings(server.url, iterations)))
        for partitions in (1, 32, 256):
            embedded = EmbeddedSessions()
            async with embedded:
                emb = await _poll_rounds(embedded, partitions, iterations)
            async with RedisSessions(server.url, key_prefix="bench:") as redis_sessions:
                red = await _poll_rounds(redis_sessions, partitions, iterations)
            print(_line(f"embedded load+save, {partitions} partitions", emb))
            print(_line(f"redis    load+save, {partitions} partitions", red))
            ratio = statistics.median(red) / statistics.median(emb)
            print(f"{'':<36} redis/embedded median ratio {ratio:.0f}x\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000)
    asyncio.run(main(parser.parse_args().iterations))
