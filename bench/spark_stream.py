"""Benchmark the Spark data source against Spark's own Kafka source, its streaming side against its
batch side, and its sink against the REST produce, in one run.

    .venv/bin/python bench/spark_stream.py [--records 200000] [--size 100] [--partitions 2]
                                           [--rounds 5] [--quick] [--no-sink] [--no-embedded]
                                           [--bootstrap host:port | --cluster | --no-kafka]

One local[2] SparkSession (the data source registered as the jobs register it, Spark's Kafka
source on ``spark.jars``) serves the run. On each log, the embedded log (a gateway's data dir)
and then a Kafka log (Apache Kafka started here, three brokers with ``--cluster``, or
``--bootstrap``), a ``brokergate serve`` is started on it, and in every round:

  source   the same ``--records`` records of ``--size`` B in a topic of ``--partitions``
           partitions, read (a) by ``spark.read.format("brokergate")...load()`` into Spark's
           ``noop`` sink (the reference) and (b) by ``spark.readStream.format("brokergate")``
           with ``trigger(availableNow=True)`` into the ``noop`` sink, a new checkpoint each
           round; both start from the topic's beginning, both read through the log directly
           (the data dir, or the brokers), not through the gateway; on the Kafka log also (c)
           by Spark's own Kafka source, ``spark.read.format("kafka")`` with ``subscribe`` and
           ``startingOffsets=earliest``, into the same sink (the reference of the
           ``brokergate`` read);
  sink     the same records written (a) by the gateway's REST produce with httpx,
           1000-record binary-format requests each with its own ``Idempotency-Key``, as many
           connections as the DataFrame has partitions (the reference), and (b) by
           ``df.write.format("brokergate")`` of a cached DataFrame with a ``value`` column,
           through the same gateway; each side into a new topic each round.

A figure is records/s from the start of a read or write to its end (planning, the query's
start and its checkpoint included); a row's ratio is brokergate / Spark's Kafka source,
streaming / batch and sink / REST,
reported as the median and the min-max of the per-round ratios (the machine is shared: the
spread says how much to trust a figure). The two sides of a row take turns, the order turned
around every other round; one round before the first is not counted (Spark's Python workers
and the JVM's compiler warm up in it).

Beside the rows: a stream's records/s over its micro-batches' own time (Spark's progress reports,
``triggerExecution``) and the seconds the query spent outside them (its start and stop); for
the writes, the REST produce with each body encoded as it is sent (as the sink does) and the
gateway's CPU per record (from /proc); and the cores other processes took during the run. The
README's section says what they show.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from bench.common import BINARY, add_log_options, cpu_seconds, create_topic, kafka_bootstrap  # noqa: E402
from deploy.jars import spark_kafka_jars  # noqa: E402
from deploy.local.gateway import GatewayReplica  # noqa: E402
from spark_jobs.session import build_session  # noqa: E402

BATCH = 1000  # records per produce request: the fill's, the REST reference's
MICRO_BATCHES = ", micro-batches"  # a stream's figure over its micro-batches' time alone
AS_SENT = ", encoded as sent"  # the REST produce with each body encoded when it is sent
WRITES = frozenset({"embedded sink", "kafka sink"})
# The rows: title, the way measured, its reference.
ROWS: list[tuple[str, str, str]] = [
    (
        "Kafka log: the brokergate source vs Spark's Kafka source (read)",
        "kafka batch",
        "kafka Spark's source",
    ),
    ("embedded log: readStream (availableNow) vs read", "embedded stream", "embedded batch"),
    ("embedded log: df.write vs REST produce", "embedded sink", "embedded REST"),
    ("Kafka log: readStream (availableNow) vs read", "kafka stream", "kafka batch"),
    ("Kafka log: df.write vs REST produce", "kafka sink", "kafka REST"),
]


def value(n: int, size: int) -> bytes:
    """Record ``n``'s value: its number padded on the left with ``x`` to ``size`` bytes (Spark's
    ``lpad`` of the same number gives the same bytes)."""
    return str(n).rjust(size, "x").encode()


def bodies(start: int, count: int, size: int) -> list[bytes]:
    """Binary-format produce bodies of records ``start`` .. ``start + count - 1``, ``BATCH`` a body."""
    out = []
    for first in range(start, start + count, BATCH):
        last = min(first + BATCH, start + count)
        records = [{"value": base64.b64encode(value(n, size)).decode()} for n in range(first, last)]
        out.append(orjson.dumps({"records": records}))
    return out


class Bench:
    """The measurements of one run: a Spark session, the options, and the records/s per way and round."""

    def __init__(self, spark: SparkSession, args: argparse.Namespace, scratch: Path) -> None:
        self.spark = spark
        self.records: int = args.records
        self.size: int = args.size
        self.partitions: int = args.partitions
        self.rounds: int = args.rounds
        self.sink: bool = not args.no_sink
        self.scratch = scratch
        self.rates: dict[str, list[float]] = {}
        self.micro_batch_s = 0.0  # the last streaming query's micro-batches took this long
        self.outside: dict[str, list[float]] = {}  # per stream, the seconds outside its micro-batches
        self.gateway_pid = 0  # the gateway of the log measured
        self.gateway_cpu: dict[str, list[float]] = {}  # per way, the gateway's CPU µs a record

    # --- filling a topic ---------------------------------------------------------------------

    async def fill(self, url: str, topic: str) -> None:
        """``--records`` records in ``topic``, an equal share in each partition, through the gateway."""
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            await create_topic(http, topic, self.partitions)
            share = self.records // self.partitions
            for p in range(self.partitions):
                start = p * share
                for body in bodies(start, share, self.size):
                    r = await http.post(
                        f"/topics/{topic}/partitions/{p}", content=body, headers={"Content-Type": BINARY}
                    )
                    assert r.status_code == 200, r.text

    # --- the source --------------------------------------------------------------------------

    def batch_read(self, log: str, topic: str) -> int:
        df = self.spark.read.format("brokergate").option("log", log).option("topic", topic).load()
        df.write.format("noop").mode("overwrite").save()
        return self.records

    def kafka_read(self, bootstrap: str, topic: str) -> int:
        """Spark's own Kafka source reading the same topic from its start to its end."""
        df = (
            self.spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load()
        )
        df.write.format("noop").mode("overwrite").save()
        return self.records

    def stream_read(self, log: str, topic: str) -> int:
        """The records the query read (its progress reports), so that a short read cannot pass
        for a fast one."""
        checkpoint = tempfile.mkdtemp(prefix="checkpoint-", dir=self.scratch)
        df = self.spark.readStream.format("brokergate").option("log", log).option("topic", topic).load()
        query = (
            df.writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
        progress = query.recentProgress
        # The micro-batches' own time, beside the whole: what is left is the query's start and stop.
        self.micro_batch_s = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
        return sum(int(p["numInputRows"]) for p in progress)

    # --- the sink ----------------------------------------------------------------------------

    def frame(self) -> DataFrame:
        """The records as a cached DataFrame with a binary ``value`` column, ``--partitions``
        partitions: what the sink writes, computed before it is timed."""
        ids = self.spark.range(0, self.records, 1, numPartitions=self.partitions)
        df = ids.select(F.lpad(F.col("id").cast("string"), self.size, "x").cast("binary").alias("value"))
        df = df.cache()
        assert df.count() == self.records
        return df

    def sink_write(self, df: DataFrame, url: str, topic: str) -> int:
        asyncio.run(self.new_topic(url, topic))
        df.write.format("brokergate").option("gateway", url).option("topic", topic).mode("append").save()
        return self.records

    def rest_write(self, requests: Callable[[], Iterator[bytes]], url: str, topic: str) -> int:
        """The bodies ``requests()`` gives, produced to ``topic`` over ``--partitions`` keep-alive
        connections, each taking the next body left until none is."""

        async def run() -> None:
            await self.new_topic(url, topic)
            left = requests()
            limits = httpx.Limits(max_connections=self.partitions)
            async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:

                async def connection() -> None:
                    for body in left:
                        headers = {"Content-Type": BINARY, "Idempotency-Key": uuid.uuid4().hex}
                        r = await http.post(f"/topics/{topic}", content=body, headers=headers)
                        assert r.status_code == 200, r.text

                await asyncio.gather(*(connection() for _ in range(self.partitions)))

        asyncio.run(run())
        return self.records

    async def new_topic(self, url: str, topic: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            await create_topic(http, topic, self.partitions)

    # --- rounds ------------------------------------------------------------------------------

    def timed(self, label: str | None, way: Callable[[], int]) -> None:
        """Records/s of one ``way`` (not kept when ``label`` is None: a warm-up)."""
        self.micro_batch_s = 0.0
        cpu = cpu_seconds(self.gateway_pid)
        start = time.perf_counter()
        done = way()
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds(self.gateway_pid) - cpu
        assert done == self.records, f"{label}: {done} records, not {self.records}"
        if label is not None:
            self.rates.setdefault(label, []).append(done / elapsed)
            self.gateway_cpu.setdefault(label, []).append(cpu / done * 1e6)
            if self.micro_batch_s:
                self.rates.setdefault(f"{label}{MICRO_BATCHES}", []).append(done / self.micro_batch_s)
                self.outside.setdefault(label, []).append(elapsed - self.micro_batch_s)

    def in_turns(self, ways: list[tuple[str, Callable[[], int]]]) -> None:
        for _, way in ways:
            self.timed(None, way)
        for round_ in range(self.rounds):
            for label, way in ways if round_ % 2 == 0 else ways[::-1]:
                self.timed(label, way)
            print(f"  round {round_ + 1} of {self.rounds} done", flush=True)

    def measure(self, prefix: str, log: str, url: str, pid: int, bootstrap: str | None = None) -> None:
        """Every row of one log: ``log`` is what the source reads, ``url`` the gateway on it (``pid``),
        ``bootstrap`` the brokers when the log is Kafka."""
        self.gateway_pid = pid
        topic = f"bench-spark-{os.getpid()}"
        asyncio.run(self.fill(url, topic))
        read = self.spark.read.format("brokergate").option("log", log).option("topic", topic).load()
        assert read.count() == self.records, "the batch source does not read every record"
        reads = [
            (f"{prefix} batch", lambda: self.batch_read(log, topic)),
            (f"{prefix} stream", lambda: self.stream_read(log, topic)),
        ]
        if bootstrap is not None:
            kafka = bootstrap
            native = self.spark.read.format("kafka").option("kafka.bootstrap.servers", kafka)
            native = native.option("subscribe", topic).option("startingOffsets", "earliest")
            assert native.load().count() == self.records, "Spark's Kafka source does not read every record"
            reads.append((f"{prefix} Spark's source", lambda: self.kafka_read(kafka, topic)))
        print(f"  source: {self.records:,} records in {topic}", flush=True)
        self.in_turns(reads)
        if not self.sink:
            return
        df = self.frame()
        requests = bodies(0, self.records, self.size)
        values = [value(n, self.size) for n in range(self.records)]

        def as_sent() -> Iterator[bytes]:
            """The bodies encoded one by one as they are sent, as a client (and the sink) does."""
            for first in range(0, self.records, BATCH):
                chunk = values[first : first + BATCH]
                yield orjson.dumps({"records": [{"value": base64.b64encode(v).decode()} for v in chunk]})

        written: list[str] = []

        def into() -> str:
            written.append(f"{topic}-{len(written)}")
            return written[-1]

        try:
            self.in_turns(
                [
                    (f"{prefix} REST", lambda: self.rest_write(lambda: iter(requests), url, into())),
                    (f"{prefix} sink", lambda: self.sink_write(df, url, into())),
                    (f"{prefix} REST{AS_SENT}", lambda: self.rest_write(as_sent, url, into())),
                ]
            )
        finally:
            df.unpersist()
        asyncio.run(self.check_written(url, written))

    async def check_written(self, url: str, topics: list[str]) -> None:
        """Every topic written holds ``--records`` records: no write passes for fast by writing less."""
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            for topic in topics:
                ends = [
                    (await http.get(f"/topics/{topic}/partitions/{p}/offsets")).json()["end_offset"]
                    for p in range(self.partitions)
                ]
                assert sum(ends) == self.records, f"{topic} holds {sum(ends)} records, not {self.records}"


class TreeCpu:
    """The CPU seconds this process and every process under it use, while it runs.

    A thread looks at /proc four times a second and keeps each process's own CPU time (not its
    children's: a Python worker of the JVM's is gone, or under init, by the time the run ends) as
    last seen under this process; what a process uses after that look and before it ends is lost,
    a quarter of a second at most."""

    def __init__(self) -> None:
        self.root = os.getpid()
        self.seen: dict[tuple[int, int], int] = {}  # (pid, start tick): utime + stime
        self.before: dict[tuple[int, int], int] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)

    def watch(self) -> None:
        while not self.done.wait(0.25):
            self.look()

    def look(self) -> None:
        stats: dict[int, list[str]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stats[int(entry.name)] = (entry / "stat").read_text().rpartition(")")[2].split()
                except OSError:  # gone meanwhile
                    continue
        for pid, fields in stats.items():
            ancestor = pid
            while ancestor > 1 and ancestor != self.root:
                ancestor = int(stats[ancestor][1]) if ancestor in stats else 0
            if ancestor == self.root:
                self.seen[(pid, int(fields[19]))] = int(fields[11]) + int(fields[12])

    def __enter__(self) -> TreeCpu:
        self.look()
        self.before = dict(self.seen)  # what this process used before: not the run's
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        self.look()

    def seconds(self) -> float:
        used = sum(ticks - self.before.get(key, 0) for key, ticks in self.seen.items())
        return used / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> float:
    """CPU seconds every core of the machine spent busy since it started (/proc/stat)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


@contextmanager
def gateway(data_dir: Path, bootstrap: str | None) -> Iterator[tuple[str, int]]:
    """``brokergate serve`` on ``data_dir`` (the embedded log) or on Kafka at ``bootstrap``: its URL
    and process id."""
    args = ["--log-level", "warning"]
    if bootstrap is not None:
        args += ["--log", f"kafka://{bootstrap}"]
    replica = GatewayReplica(data_dir, args=args).start(timeout=60)
    assert replica.proc is not None
    try:
        yield replica.url, replica.proc.pid
    finally:
        replica.stop()


def on_each_log(bench: Bench, args: argparse.Namespace, scratch: Path) -> None:
    if not args.no_embedded:
        with tempfile.TemporaryDirectory(dir=scratch) as tmp:
            data = Path(tmp) / "data"
            print("\n== the embedded log ==", flush=True)
            with gateway(data, None) as (url, pid):
                bench.measure("embedded", str(data), url, pid)
    if args.no_kafka:
        return
    with kafka_bootstrap(args) as kafka, tempfile.TemporaryDirectory(dir=scratch) as tmp:
        bootstrap = kafka.bootstrap
        print(f"\n== the Kafka log, kafka://{bootstrap} ({kafka.kind}) ==", flush=True)
        with gateway(Path(tmp) / "data", bootstrap) as (url, pid):
            bench.measure("kafka", f"kafka://{bootstrap}", url, pid, bootstrap)


def session(scratch: Path) -> SparkSession:
    """local[2], as the Spark tests run it, with its scratch files in ``scratch``, and Spark's
    Kafka source on ``spark.jars`` (the jars resolved once from Maven: nothing fetched here)."""
    spark = build_session(
        "brokergate-bench",
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.local.dir": str(scratch / "local"),
            "spark.sql.warehouse.dir": str(scratch / "warehouse"),
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={scratch}",
            "spark.jars": ",".join(str(jar) for jar in spark_kafka_jars()),
        },
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def report(bench: Bench) -> None:
    print("\nrow: measured / reference, median [min-max] of the per-round ratios")
    for title, label, reference in ROWS:
        if label not in bench.rates or reference not in bench.rates:
            continue
        ratios = [a / b for a, b in zip(bench.rates[label], bench.rates[reference], strict=True)]
        print(
            f"{title}\n  ratio {statistics.median(ratios):5.2f} [{min(ratios):4.2f}-{max(ratios):4.2f}]"
            f" over {len(ratios)} rounds"
        )
        for way in (label, reference, f"{label}{MICRO_BATCHES}", f"{reference}{AS_SENT}"):
            if way not in bench.rates:
                continue
            rates = bench.rates[way]
            beside = statistics.median(a / b for a, b in zip(rates, bench.rates[reference], strict=True))
            # Only the writes go through the gateway; the reads take the log directly.
            cpu = bench.gateway_cpu.get(way) if label in WRITES else None
            print(
                f"    {way:<34} {statistics.median(rates):>10,.0f} rec/s"
                f"  [{min(rates):,.0f}-{max(rates):,.0f}]   x ref {beside:5.2f}"
                + (f"   gateway CPU {statistics.median(cpu):.2f} µs/record" if cpu else "")
            )
        if label in bench.outside:
            outside = bench.outside[label]
            print(
                f"    the query outside its micro-batches (start, stop): {statistics.median(outside):.2f} s"
                f" [{min(outside):.2f}-{max(outside):.2f}]"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000, help="records each read and write moves")
    parser.add_argument("--size", type=int, default=100, help="bytes a value")
    parser.add_argument("--partitions", type=int, default=2, help="the topics' and the DataFrame's")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-sink", action="store_true", help="the source rows only")
    parser.add_argument("--no-embedded", action="store_true", help="the Kafka log only")
    parser.add_argument("--quick", action="store_true", help="20,000 records, 2 rounds")
    add_log_options(parser)
    args = parser.parse_args()
    if args.quick:
        args.records, args.rounds = 20_000, 2
    if args.records % args.partitions or args.records // args.partitions < 2:
        parser.error("--records must be a multiple of --partitions, at least two a partition")
    load = os.getloadavg()
    started = time.perf_counter()
    # What else ran on the machine meanwhile: its busy time less this run's processes'.
    busy = machine_cpu()
    with TreeCpu() as ours, tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        scratch = Path(tmp)
        spark = session(scratch)
        try:
            bench = Bench(spark, args, scratch)
            on_each_log(bench, args, scratch)
        finally:
            spark.stop()
    elapsed = time.perf_counter() - started
    mine = ours.seconds() / elapsed
    other = (machine_cpu() - busy) / elapsed - mine
    print(
        f"\n{args.records:,} records of {args.size} B, {args.partitions} partitions, {args.rounds} rounds, "
        f"{elapsed:.0f} s; load average {load[0]:.1f} before, {os.getloadavg()[0]:.1f} after, "
        f"{os.cpu_count()} CPUs; cores busy on average: this run's processes {mine:.2f}, "
        f"other work {other:.2f}"
    )
    report(bench)


if __name__ == "__main__":
    main()
