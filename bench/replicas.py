"""Throughput through 1 replica vs 3 replicas behind nginx, on the same broker, in one run.

    .venv/bin/python bench/replicas.py [--seconds 2] [--rounds 3] [--clients 6] [--quick] [--kafka host:port]

Starts the local cluster of ``deploy/cluster.py`` (an Apache Kafka broker unless ``--kafka``, ZooKeeper,
Redis, three replicas, nginx over all three) plus a second nginx over replica 1 only,
so both sides pay for the same balancer hop. Then, for each side:

  produce: ``clients`` keep-alive connections sending pre-encoded batches of 100 and
           1000 records to a 6-partition topic, for ``seconds``;
  consume: a group of 6 consumer instances, each long-polling its own connection,
           for ``seconds``, on a fresh 6-partition topic holding more records than
           they can read in that time (fresh, so no replica has them cached from an
           earlier figure; never read to its end, where a poll may wait out its timeout).

It also runs the produce figures against replica 1 directly (no balancer) to show what
the nginx hop costs. Every figure is records/s, the best of ``rounds`` measurements
taken in turns with the other side's (the machine may have other work); the ratio is
3 replicas over 1. Under each figure, per side: records per second of replica CPU, and how
many cores the replicas, the broker, Redis, ZooKeeper, nginx, this client and the rest of
the machine kept busy during that best measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TypeVar

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import BINARY, V2, create_topic, produce_body, rest_produce, run_for  # noqa: E402
from bench.httpload import Connection  # noqa: E402
from deploy.local.balancer import NginxBalancer  # noqa: E402
from deploy.local.cluster import ClusterSpec, LocalCluster  # noqa: E402

T = TypeVar("T")

PARTITIONS = 6
MEMBERS = 6  # one per partition: two polls in flight per replica on the 3-replica side
TICK = os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """Cores each part of the cluster kept busy during a measurement (CPU seconds per second),
    and what the rest of the machine used meanwhile: on a small machine that explains a ratio."""

    def __init__(self, groups: dict[str, list[int]]) -> None:
        self.groups = groups  # part -> process group ids (every server leads its own group)

    def sample(self) -> dict[str, float]:
        by_group: dict[int, float] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # ended meanwhile
            group = int(fields[2])
            by_group[group] = by_group.get(group, 0.0) + (int(fields[11]) + int(fields[12])) / TICK
        found = {part: sum(by_group.get(g, 0.0) for g in groups) for part, groups in self.groups.items()}
        times = os.times()
        found["client"] = times.user + times.system
        with open("/proc/stat") as f:
            cpu = [int(x) for x in f.readline().split()[1:]]
        found["machine"] = (sum(cpu) - cpu[3] - cpu[4]) / TICK  # all but idle and iowait
        return found

    @staticmethod
    def cores(before: dict[str, float], after: dict[str, float], elapsed: float) -> dict[str, float]:
        used = {part: (after[part] - before[part]) / elapsed for part in before}
        used["other work"] = max(0.0, used.pop("machine") - sum(used.values()))
        return used


async def measured(meter: CpuMeter, work: Awaitable[T]) -> tuple[T, dict[str, float]]:
    before, start = meter.sample(), time.perf_counter()
    result = await work
    return result, CpuMeter.cores(before, meter.sample(), time.perf_counter() - start)


async def fill(http: httpx.AsyncClient, topic: str, value: bytes, count: int) -> None:
    body = produce_body(value, 1000)
    for _ in range(count // 1000):
        r = await http.post(f"/topics/{topic}", content=body, headers={"Content-Type": BINARY})
        assert r.status_code == 200, r.text


async def group_consume(
    url: str, port: int, topic: str, seconds: float, meter: CpuMeter
) -> tuple[float, int, dict[str, float]]:
    """Records/s read in ``seconds`` by a group of ``MEMBERS`` instances, each on its own connection;
    the number read, which must stay below what the topic holds for the figure to count; and the
    cores each part used while they read."""
    group = f"bench-{topic}"
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        bases = []
        for _ in range(MEMBERS):
            r = await http.post(
                f"/consumers/{group}",
                json={"format": "binary", "auto.offset.reset": "earliest"},
                headers={"Content-Type": V2},
            )
            bases.append(r.json()["base_uri"])
        for base in bases:
            await http.post(f"{base}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2})
        # Time the reading, not the joining: wait until the group settled on one assignment.
        while True:
            owned = [len((await http.get(f"{b}/assignments")).json()["partitions"]) for b in bases]
            if sum(owned) == PARTITIONS and all(owned):
                break
            await asyncio.sleep(0.05)

        connections = [Connection("127.0.0.1", port) for _ in bases]
        requests = []
        for conn, base in zip(connections, bases, strict=True):
            await conn.__aenter__()
            path = "/" + base.split("/", 3)[3] + "/records?timeout=500&max_bytes=1000000"
            requests.append(conn.build("GET", path, accept=BINARY))

        async def poll(n: int) -> int:
            status, payload = await connections[n].send(requests[n])
            assert status == 200, payload[:300]
            # Count without decoding: the figure is the gateway's, not this client's JSON parser's.
            return payload.count(b'"offset":')

        try:
            (records, elapsed), cores = await measured(meter, run_for(seconds, MEMBERS, poll))
        finally:
            for conn in connections:
                await conn.__aexit__()
        for base in bases:
            await http.delete(base, headers={"Content-Type": V2})
    return records / elapsed, records, cores


def report(
    label: str, best: dict[str, tuple[float, dict[str, float]]], size: int, with_direct: bool = False
) -> None:
    one, three = best["one"][0], best["three"][0]
    line = (
        f"{label:<22} 1 replica {one:>9,.0f} rec/s   3 replicas {three:>9,.0f} rec/s "
        f"{three * size / 1e6:>6.1f} MB/s   ratio {three / one:4.2f}"
    )
    if with_direct:
        line += f"   (replica 1 without nginx {best['direct'][0]:>8,.0f} rec/s)"
    print(line, flush=True)
    for side in ("one", "three"):
        rate, cores = best[side]
        used = "  ".join(f"{part} {n:.2f}" for part, n in cores.items())
        # Records per second of replica CPU: equal on both sides means the replicas add no
        # overhead of their own, and throughput follows the cores they get.
        per_core = rate / cores["replicas"] / 1000 if cores["replicas"] else 0.0
        print(f"{'':<6}{side:>5}: {per_core:>5,.0f}k rec per replica core-s; cores: {used}", flush=True)


async def run(cluster: LocalCluster, one: NginxBalancer, seconds: float, clients: int, rounds: int) -> None:
    three = cluster.balancer
    assert three is not None
    servers = {"broker": cluster.broker, "redis": cluster.redis, "zookeeper": cluster.zookeeper}
    meter = CpuMeter(
        {
            "replicas": [r.pid for r in cluster.replicas if r.pid],
            **{part: [s.pid] for part, s in servers.items() if s is not None and s.pid},
            "nginx": [b.pid for b in (one, three) if b.pid],
        }
    )
    direct = cluster.replicas[0].port
    async with httpx.AsyncClient(base_url=three.url, timeout=60) as http:
        for size, batch in ((100, 100), (100, 1000), (1000, 100), (1000, 1000)):
            value = os.urandom(size)
            best: dict[str, tuple[float, dict[str, float]]] = {}
            for n, side, port in interleaved(
                rounds, {"direct": direct, "one": one.port, "three": three.port}
            ):
                topic = f"p-{side}-{size}-{batch}-{n}"
                await create_topic(http, topic, PARTITIONS)
                got = await measured(meter, rest_produce(port, topic, value, batch, clients, seconds))
                if got[0] > best.get(side, (0.0, {}))[0]:
                    best[side] = got
            report(f"produce {size:>4} B x {batch:>4}", best, size, with_direct=True)
        print()
        for size in (100, 1000):
            value = os.urandom(size)
            # Enough that a group cannot read the topic to its end in the time, with room to spare.
            count = int(seconds * (600_000 if size == 100 else 200_000))
            best = {}
            for n, side, balancer in interleaved(rounds, {"one": one, "three": three}):
                topic = f"c-{side}-{size}-{n}"
                await create_topic(http, topic, PARTITIONS)
                await fill(http, topic, value, count)
                rate, read, cores = await group_consume(balancer.url, balancer.port, topic, seconds, meter)
                if read >= count:
                    print(f"  ({side}: read all {count:,} records before the time was up: a lower bound)")
                if rate > best.get(side, (0.0, {}))[0]:
                    best[side] = (rate, cores)
            report(f"consume {size:>4} B", best, size)


def interleaved(rounds: int, sides: dict[str, T]) -> Iterator[tuple[int, str, T]]:
    """Each side once per round, in an order that turns every round, so that a burst of load
    from elsewhere on the machine does not land on one side only."""
    names = list(sides)
    for n in range(rounds):
        shift = n % len(names)
        for name in names[shift:] + names[:shift]:
            yield n, name, sides[name]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kafka", metavar="HOST:PORT", help="an existing broker (default: start Apache Kafka)"
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per side; the best counts")
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="1 s per measurement, 1 round")
    args = parser.parse_args()
    seconds, rounds = (1.0, 1) if args.quick else (args.seconds, args.rounds)
    # The readiness probes' refused connections are expected while the servers start.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        spec = ClusterSpec(Path(tmp) / "cluster", replicas=3, kafka=args.kafka, log_level="warning")
        with LocalCluster(spec) as cluster:
            one = NginxBalancer(Path(tmp) / "nginx-one", [f"127.0.0.1:{cluster.replicas[0].port}"]).start()
            try:
                load = os.getloadavg()[0]
                print(
                    f"brokergate on {cluster.kafka_url}: 1 vs 3 replicas behind nginx; "
                    f"{args.clients} clients, best of {rounds} x {seconds:.0f} s per side and figure; "
                    f"{os.cpu_count()} CPUs, load average {load:.1f} at the start\n",
                    flush=True,
                )
                asyncio.run(run(cluster, one, seconds, args.clients, rounds))
            finally:
                one.stop()


if __name__ == "__main__":
    main()
