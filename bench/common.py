"""What the benchmark scripts share: media types, a gateway to measure, and the timed client loops."""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx
import orjson

from bench.httpload import Connection
from deploy.local.gateway import GatewayReplica
from deploy.local.kafka_broker import KafkaBroker, KafkaNode
from deploy.local.kafka_cluster import KafkaCluster
from service.adapters.embedded.log import EmbeddedLog
from service.core.models import Record, TopicPartition
from service.wire.formats import V2, content_type_for

BINARY = content_type_for("binary")


async def run_for(seconds: float, clients: int, one: Callable[[int], Awaitable[int]]) -> tuple[int, float]:
    """Run ``one(client_number)`` in ``clients`` loops for ``seconds``; returns (records, elapsed)."""
    stop = time.perf_counter() + seconds
    total = 0

    async def loop(n: int) -> None:
        nonlocal total
        while time.perf_counter() < stop:
            done = await one(n)  # not `total += await ...`: that reads total before the await
            total += done

    start = time.perf_counter()
    await asyncio.gather(*(loop(n) for n in range(clients)))
    return total, time.perf_counter() - start


def start_gateway(
    data_dir: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """``brokergate serve`` on a free loopback port with ``args``; returns once /readyz answers 200."""
    replica = GatewayReplica(data_dir, args=("--log-level", "warning", *args), env=env).start(timeout=60)
    assert replica.proc is not None
    return replica.proc, replica.port


async def create_topic(http: httpx.AsyncClient, name: str, partitions: int = 1) -> None:
    """Create ``name`` through the v3 API of the gateway ``http`` points at."""
    cluster = (await http.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    r = await http.post(
        f"/v3/clusters/{cluster}/topics", json={"topic_name": name, "partitions_count": partitions}
    )
    assert r.status_code == 201, r.text


def json_values(size: int, count: int) -> list[bytes]:
    """``count`` distinct JSON objects of ``size`` bytes each, as a producer's serializer writes them."""
    out = []
    for n in range(count):
        shell = orjson.dumps({"id": n, "user": f"u{n % 97}", "ok": n % 2 == 0, "score": n / 7, "pad": ""})
        out.append(shell[:-2] + b"x" * (size - len(shell)) + b'"}')
    return out


def produce_body(value: bytes, batch: int) -> bytes:
    """A binary-format produce body of ``batch`` copies of ``value``, encoded once up front."""
    return orjson.dumps({"records": [{"value": base64.b64encode(value).decode()}] * batch})


async def rest_produce(
    port: int,
    topic: str,
    value: bytes,
    batch: int,
    clients: int,
    seconds: float,
    headers: dict[str, str] | None = None,
    body: tuple[bytes, str] | None = None,
) -> float:
    """Records/s of ``clients`` keep-alive connections producing ``batch``-record requests to ``topic``
    (each request with ``headers``, e.g. credentials): binary-format bodies of ``value``, or ``body``,
    a request body of ``batch`` records and its Content-Type."""
    conns = [Connection("127.0.0.1", port) for _ in range(clients)]
    for conn in conns:
        await conn.__aenter__()
    content, content_type = body or (produce_body(value, batch), BINARY)
    request = conns[0].build("POST", f"/topics/{topic}", content, content_type, headers=headers)

    async def one(n: int) -> int:
        status, _ = await conns[n].send(request)
        assert status == 200
        return batch

    try:
        records, elapsed = await run_for(seconds, clients, one)
    finally:
        for conn in conns:
            await conn.__aexit__()
    return records / elapsed


async def subscribed(http: httpx.AsyncClient, group: str, topic: str, fmt: str = "binary") -> str:
    """A new consumer instance of ``group`` in the embedded format ``fmt`` reading ``topic`` from the
    beginning: its path."""
    r = await http.post(
        f"/consumers/{group}",
        json={"format": fmt, "auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
    )
    base = r.json()["base_uri"]
    await http.post(f"{base}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2})
    return "/" + base.split("/", 3)[3]


async def rest_consume(
    http: httpx.AsyncClient, port: int, topic: str, count: int, headers: dict[str, str] | None = None
) -> float:
    """Records/s of a new consumer instance reading ``count`` records of ``topic`` by long-polling
    (``http`` creates the instance; each poll carries ``headers``, e.g. the same credentials)."""
    instance = await subscribed(http, f"bench-{topic}", topic)
    got = 0
    async with Connection("127.0.0.1", port) as conn:
        path = instance + "/records?timeout=1000&max_bytes=1000000"
        request = conn.build("GET", path, accept=BINARY, headers=headers)
        start = time.perf_counter()
        while got < count:
            _, payload = await conn.send(request)
            # Count without decoding: the figure is the gateway's, not this client's JSON parser's.
            got += payload.count(b'"offset":')
        elapsed = time.perf_counter() - start
    await http.delete(instance)
    return count / elapsed


class Brokers(Protocol):
    """What a benchmark needs of the Kafka it starts: a bootstrap address, a start and a stop."""

    @property
    def bootstrap(self) -> str: ...

    def start(self) -> object: ...

    def stop(self) -> None: ...


BROKER_KINDS = ("single", "cluster")


def new_brokers(kind: str, workdir: Path) -> Brokers:
    """The one place a benchmark's Kafka is chosen: ``single``, one Apache Kafka broker (KRaft,
    combined mode), or ``cluster``, three brokers over one controller quorum; not started yet."""
    if kind == "single":
        return KafkaBroker(workdir)
    if kind == "cluster":  # the JIT at full strength, unlike the tests' cluster
        return KafkaCluster(workdir, brokers=3, jvm_options=())
    raise ValueError(f"no Kafka of kind {kind!r}: the kinds are {', '.join(BROKER_KINDS)}")


def add_kafka_options(parser: argparse.ArgumentParser) -> None:
    """The options that pick the Kafka a benchmark runs on (``kafka_bootstrap``)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--bootstrap", help="an existing Kafka broker (default: start Apache Kafka here)")
    where.add_argument("--cluster", action="store_true", help="start three Kafka brokers, not one")


@dataclass(frozen=True, slots=True)
class Kafka:
    """The Kafka a benchmark runs on: its bootstrap address, ``kind`` (``single``, ``cluster`` or
    ``existing``) and the process ids of its servers when they were started here (for their CPU
    time: the broker, or a cluster's controller and brokers)."""

    bootstrap: str
    kind: str
    pids: tuple[int, ...] = ()


@contextmanager
def kafka_bootstrap(args: argparse.Namespace) -> Iterator[Kafka]:
    """The Kafka of ``--bootstrap``, or the one started here for the ``with`` block (three brokers
    with ``--cluster``, else one), with its data in a temporary directory."""
    if args.bootstrap:
        yield Kafka(args.bootstrap, "existing")
        return
    kind = "cluster" if args.cluster else "single"
    with tempfile.TemporaryDirectory(prefix=f"bench-kafka-{kind}-", ignore_cleanup_errors=True) as tmp:
        brokers = new_brokers(kind, Path(tmp))
        brokers.start()
        try:
            nodes = brokers.nodes if isinstance(brokers, KafkaCluster) else [brokers]
            pids = tuple(n.pid for n in nodes if isinstance(n, KafkaNode) and n.pid)
            yield Kafka(brokers.bootstrap, kind, pids)
        finally:
            brokers.stop()


def add_log_options(parser: argparse.ArgumentParser) -> None:
    """The options that pick the logs a benchmark runs on (``on_each_log``)."""
    add_kafka_options(parser)
    parser.add_argument("--no-kafka", action="store_true", help="the embedded log only")


async def on_each_log(
    args: argparse.Namespace, measure: Callable[[subprocess.Popen[bytes], int, str | None], Awaitable[None]]
) -> None:
    """``measure(gateway, port, bootstrap)`` on a fresh ``brokergate serve`` of the embedded log,
    then of a Kafka log (``kafka_bootstrap``) unless ``--no-kafka``; ``bootstrap`` is None for the
    embedded log."""
    await measure_on(None, measure)
    if not args.no_kafka:
        with kafka_bootstrap(args) as kafka:
            await measure_on(kafka.bootstrap, measure)


async def measure_on(
    bootstrap: str | None, measure: Callable[[subprocess.Popen[bytes], int, str | None], Awaitable[None]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        extra = () if bootstrap is None else ("--log", f"kafka://{bootstrap}")
        gateway, port = start_gateway(Path(tmp), *extra)
        try:
            where = "embedded" if bootstrap is None else f"kafka://{bootstrap}"
            print(f"\n== brokergate on the {where} log ==", flush=True)
            await measure(gateway, port, bootstrap)
        finally:
            gateway.terminate()
            gateway.wait(15)


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used (user and system), from Linux's /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def fetch_through(
    log: EmbeddedLog, tp: TopicPartition, count: int, each: Callable[[Sequence[Record]], object] | None = None
) -> float:
    """Records/s of in-process fetches of up to 1 MB reading ``count`` records of ``tp`` from its
    start, ``each`` given every fetch's records (what a native client does with them)."""
    got, offset = 0, 0
    start = time.perf_counter()
    while got < count:
        data = await log.fetch({tp: offset}, max_bytes=1_000_000, max_wait_ms=1000)
        records = data[tp].records
        if each is not None:
            each(records)
        got += len(records)
        offset = records[-1].offset + 1
    return count / (time.perf_counter() - start)
