"""The sink: DataFrames written into topics through a running gateway, each row once.

A gateway runs in the test's event loop (on the embedded log, or on Kafka), Spark in a worker
thread beside it; what the sink wrote is read back with the batch source, on the log the gateway
writes. Writes that must be retried by Spark (a task that fails halfway, a driver killed with
``kill -9`` in the middle of a micro-batch) run in a process of their own (``sink_driver``), whose
local master lets a task run twice.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from deploy.local.kafka_broker import KafkaBroker
from service.security.users import add_user
from spark_jobs.offsets import OptionError
from spark_jobs.sink import request_key
from spark_jobs.sink_options import SinkOptions
from spark_jobs.sink_records import Columns, body
from tests.conftest import RunningGateway, kafka_settings, start_gateway
from tests.helpers import BINARY, cluster_id, consumer, create_topic, poll, poll_until, produce, subscribe
from tests.spark.sink_driver import PER_BATCH, ROWS

from .helpers import in_this_thread

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 120


@dataclass
class Setup:
    gateway: RunningGateway
    log: str  # what the source reads back: the gateway's data dir or its Kafka


@pytest.fixture(params=["embedded", "kafka"])
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setup]:
    data = tmp_path / "data"
    if request.param == "embedded":
        gateway = await start_gateway(data)
        found = Setup(gateway, str(data))
    else:
        broker: KafkaBroker = request.getfixturevalue("kafka_broker")
        gateway = await start_gateway(data, **kafka_settings(broker))
        found = Setup(gateway, broker.url)
    try:
        yield found
    finally:
        await gateway.client.aclose()
        await gateway.stop()


async def new_topic(setup: Setup, partitions: int = 1) -> str:
    topic = f"t-{uuid.uuid4().hex[:10]}"
    # rows carry times months old: Kafka's time retention (7 days) would delete their records
    kept = {"retention_ms": "-1"} if setup.log.startswith("kafka://") else {}
    await create_topic(setup.gateway.client, topic, partitions, **kept)
    return topic


def write(frame: DataFrame, setup: Setup, **options: Any) -> None:
    in_this_thread(frame.sparkSession)
    writer = frame.write.format("brokergate").mode("append").option("gateway", setup.gateway.url)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


async def consumed(setup: Setup, topic: str, count: int) -> list[dict[str, Any]]:
    """Every record of ``topic``, through a consumer of the gateway, once ``count`` arrived and a
    further poll found nothing more: (partition, offset) order, keys and values as bytes."""
    client = setup.gateway.client
    base = await consumer(client, f"g-{uuid.uuid4().hex[:8]}", fmt="binary")
    await subscribe(client, base, topic)
    got = await poll_until(client, base, count, fmt=BINARY, deadline_s=30)
    got += await poll(client, base, fmt=BINARY, timeout=500)
    for r in got:
        for side in ("key", "value"):
            r[side] = None if r[side] is None else base64.b64decode(r[side])
        r["headers"] = [(h["name"], base64.b64decode(h["value"])) for h in r.get("headers") or []]
    return sorted(got, key=lambda r: (r["partition"], r["offset"]))


async def values(setup: Setup, topic: str, count: int) -> list[bytes]:
    return [r["value"] for r in await consumed(setup, topic, count)]


async def test_rows_become_records_with_keys_headers_partitions_and_timestamps(
    spark: SparkSession, setup: Setup
) -> None:
    topic = await new_topic(setup, 2)
    at = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    rows = [
        ("k0", b"\x00\xffv0", [("h", b"\x01"), ("h", b"\x02")], 0, at),
        (None, b"v1", [], 1, None),
        ("k2", None, None, 1, at),
    ]
    frame = spark.createDataFrame(
        rows,
        "key string, value binary, headers array<struct<key:string,value:binary>>, "
        "partition int, timestamp timestamp",
    )
    await asyncio.to_thread(write, frame.coalesce(1), setup, topic=topic)

    got = await consumed(setup, topic, 3)
    assert [(r["partition"], r["key"], r["value"], r["headers"]) for r in got] == [
        (0, b"k0", b"\x00\xffv0", [("h", b"\x01"), ("h", b"\x02")]),
        (1, None, b"v1", []),
        (1, b"k2", None, []),
    ]
    assert got[0]["timestamp"] == got[2]["timestamp"] == int(at.timestamp() * 1000)
    assert abs(got[1]["timestamp"] / 1000 - datetime.now(UTC).timestamp()) < 600  # the time it was written


async def test_a_topic_column_routes_each_row_and_the_topic_option_wins(
    spark: SparkSession, setup: Setup
) -> None:
    a, b, c = await new_topic(setup), await new_topic(setup), await new_topic(setup)
    frame = spark.createDataFrame(
        [(a, f"a{i}") if i % 2 else (b, f"b{i}") for i in range(10)], "topic string, value string"
    )
    await asyncio.to_thread(write, frame.coalesce(1), setup, maxRecordsPerRequest="2")
    assert await values(setup, a, 5) == [f"a{i}".encode() for i in range(1, 10, 2)]
    assert await values(setup, b, 5) == [f"b{i}".encode() for i in range(0, 10, 2)]
    await asyncio.to_thread(write, frame, setup, topic=c)
    assert len(await values(setup, c, 10)) == 10


async def test_a_write_with_gateway_compression_sends_coded_bodies(spark: SparkSession, setup: Setup) -> None:
    topic = await new_topic(setup)
    frame = spark.createDataFrame([(f"row {i} " + "x" * 50,) for i in range(200)], "value string")
    await asyncio.to_thread(write, frame.coalesce(1), setup, topic=topic, gatewayCompression="zstd")
    assert await values(setup, topic, 200) == [f"row {i} ".encode() + b"x" * 50 for i in range(200)]
    metrics = (await setup.gateway.client.get("/metrics")).text
    coded = [line for line in metrics.splitlines() if line.startswith("brokergate_http_coded_bodies_total")]
    assert any('coding="zstd",direction="request"' in line for line in coded), coded


async def test_a_batch_write_run_again_with_its_write_id_writes_nothing_twice(
    spark: SparkSession, setup: Setup
) -> None:
    topic = await new_topic(setup)
    frame = spark.range(0, 50, numPartitions=3).select(F.col("id").cast("string").alias("value"))
    for _ in range(2):
        await asyncio.to_thread(
            write, frame, setup, topic=topic, writeId="nightly-1", maxRecordsPerRequest="7"
        )
    assert sorted(int(v) for v in await values(setup, topic, 50)) == list(range(50))
    await asyncio.to_thread(write, frame, setup, topic=topic)  # no writeId: a new write each time
    assert len(await values(setup, topic, 100)) == 100


async def test_json_text_and_structs_in_schema_formats(spark: SparkSession, setup: Setup) -> None:
    topic = await new_topic(setup)
    avro = json.dumps(
        {
            "type": "record",
            "name": "Order",
            "fields": [
                {"name": "id", "type": "long"},
                {
                    "name": "total",
                    "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
                },
                {"name": "tags", "type": {"type": "map", "values": "string"}},
            ],
        }
    )
    structs = spark.createDataFrame(
        [(1, b"\x01\x00", {"a": "x"}), (2, b"\x02", {})], "id long, total binary, tags map<string,string>"
    ).select(F.struct("id", "total", "tags").alias("value"))
    await asyncio.to_thread(
        write,
        structs.coalesce(1),
        setup,
        topic=topic,
        format="avro",
        valueSchema=avro,
        maxRecordsPerRequest="1",
    )
    texts = spark.createDataFrame([('{"id": 3, "total": "\\u0003", "tags": {"b": "y"}}',)], "value string")
    await asyncio.to_thread(write, texts, setup, topic=topic, format="avro", valueSchema=avro)

    decoded = await asyncio.to_thread(
        lambda: (
            spark.read.format("brokergate")
            .option("log", setup.log)
            .option("topic", topic)
            .option("valueFormat", "avro")
            .option("schemaRegistryUrl", f"{setup.gateway.url}/schema-registry")
            .load()
            .orderBy("offset")
            .select("value.*")
            .collect()
        )
    )
    # a decimal's unscaled bytes, as Avro's JSON encoding gives them: 256, 2 and 3 hundredths
    assert [(r["id"], r["total"], r["tags"]) for r in decoded] == [
        (1, Decimal("2.56"), {"a": "x"}),
        (2, Decimal("0.02"), {}),
        (3, Decimal("0.03"), {"b": "y"}),
    ]


async def test_json_format_takes_json_text_exactly_and_refuses_text_that_is_not(
    spark: SparkSession, setup: Setup
) -> None:
    topic = await new_topic(setup)
    texts = spark.createDataFrame([('{"n": 123456789012345678901234567890}',), ("[1, 2]",)], "value string")
    await asyncio.to_thread(write, texts.coalesce(1), setup, topic=topic, format="json")
    got = [json.loads(v) for v in await values(setup, topic, 2)]
    assert got == [{"n": 123456789012345678901234567890}, [1, 2]]

    bad = spark.createDataFrame([('{"n": 1}, {"value": 2}',)], "value string")
    with pytest.raises(Exception, match="is not JSON text"):
        await asyncio.to_thread(write, bad, setup, topic=topic, format="json")
    assert len(await values(setup, topic, 2)) == 2  # nothing smuggled in


async def test_a_record_the_gateway_refuses_fails_the_write_in_its_words(
    spark: SparkSession, setup: Setup
) -> None:
    topic = await new_topic(setup)
    frame = spark.createDataFrame([("v", 7)], "value string, partition int")
    with pytest.raises(Exception, match=f"writing to {topic} through"):
        await asyncio.to_thread(write, frame, setup, topic=topic)


@pytest.mark.parametrize(
    ("columns", "options", "said"),
    [
        ("value string", {}, "name the topic"),
        ("value string", {"topic": "t", "format": "xml"}, "format: 'xml' is not one of"),
        ("value struct<a:int>", {"topic": "t"}, "column value is struct<a:int>: the binary format"),
        ("key string, value string", {"topic": "t", "format": "avro", "valueSchemaId": "1"}, "keySchemaId"),
        ("value string", {"topic": "t", "format": "avro"}, "valueSchemaId"),
        ("key long, value string", {"topic": "t"}, "column key is bigint"),
        ("value string, partition string", {"topic": "t"}, "column partition is string"),
        ("value string", {"topic": "t", "writeId": "a b"}, "writeId"),
        ("value string", {"topic": "../etc"}, "topic: '../etc' is not a topic name"),
        ("other string", {"topic": "t"}, "no value column"),
    ],
)
def test_what_the_sink_cannot_write_is_refused_in_one_line(
    spark: SparkSession, columns: str, options: dict[str, str], said: str
) -> None:
    frame = spark.createDataFrame([], columns)
    writer = frame.write.format("brokergate").mode("append").option("gateway", "http://127.0.0.1:9")
    for key, value in options.items():
        writer = writer.option(key, value)
    with pytest.raises(Exception, match=said):
        writer.save()


def test_a_topic_is_never_overwritten_and_a_gateway_is_needed(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BROKERGATE_URL", raising=False)
    frame = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="mode overwrite"):
        frame.write.format("brokergate").mode("overwrite").option("gateway", "http://x").option(
            "topic", "t"
        ).save()
    with pytest.raises(Exception, match="gateway: name the gateway"):
        frame.write.format("brokergate").mode("append").option("topic", "t").save()


async def test_the_sink_signs_in_and_the_gateways_acls_decide(spark: SparkSession, tmp_path: Path) -> None:
    users = tmp_path / "users"
    for name in ("alice", "admin"):
        add_user(users, name, f"{name}-pw")
    gateway = await start_gateway(
        tmp_path / "data", auth="basic", users_file=users, authorize=True, super_users="User:admin"
    )
    try:
        gateway.client.auth = httpx.BasicAuth("admin", "admin-pw")
        setup = Setup(gateway, str(tmp_path / "data"))
        mine, theirs = await new_topic(setup), await new_topic(setup)
        grant = {
            "resource_type": "TOPIC",
            "resource_name": mine,
            "pattern_type": "LITERAL",
            "principal": "User:alice",
            "host": "*",
            "operation": "WRITE",
            "permission": "ALLOW",
        }
        r = await gateway.client.post(f"/v3/clusters/{await cluster_id(gateway.client)}/acls", json=grant)
        assert r.status_code == 201, r.text
        password = tmp_path / "alice-password"
        password.write_text("alice-pw\n")
        frame = spark.createDataFrame([("v0",), ("v1",)], "value string")

        alice = {"gatewayUsername": "alice", "gatewayPasswordFile": str(password)}
        await asyncio.to_thread(write, frame, setup, topic=mine, **alice)
        assert sorted(await values(setup, mine, 2)) == [b"v0", b"v1"]
        with pytest.raises(Exception, match=f"writing to {theirs} through .* 403"):
            await asyncio.to_thread(write, frame, setup, topic=theirs, **alice)
        with pytest.raises(Exception, match="401"):
            await asyncio.to_thread(
                write, frame, setup, topic=mine, gatewayUsername="alice", gatewayPassword="no"
            )
    finally:
        await gateway.client.aclose()
        await gateway.stop()


def test_the_gateways_access_falls_back_to_the_command_line_tools_variables(tmp_path: Path) -> None:
    env = {"BROKERGATE_URL": "https://gw:8443/", "BROKERGATE_USER": "alice", "BROKERGATE_PASSWORD": "pw"}
    access = SinkOptions.parse({"topic": "t"}, env).gateway
    assert (access.url, access.username, access.password) == ("https://gw:8443", "alice", "pw")
    assert "pw" not in repr(access)
    token = tmp_path / "token"
    token.write_text("t0k\n")
    access = SinkOptions.parse({"gateway": "http://x", "gatewayTokenFile": str(token)}, {}).gateway
    assert (access.url, access.token, access.username) == ("http://x", "t0k", None)
    for options, said in [
        ({"gateway": "ftp://x"}, "is not an http:// or https:// URL"),
        ({"gateway": "http://x", "gatewayUsername": "a"}, "needs gatewayPassword"),
        (
            {"gateway": "http://x", "gatewayUsername": "a", "gatewayToken": "t", "gatewayPassword": "p"},
            "give one",
        ),
        ({"gateway": "http://x", "gatewayToken": "t", "gatewayTokenFile": str(token)}, "not both"),
        ({"gateway": "http://x", "gatewayPassword": "p"}, "gatewayPassword needs gatewayUsername"),
        ({"gateway": "http://x", "gatewayCaFile": str(tmp_path / "none.pem")}, "gatewayCaFile"),
        ({"gateway": "http://x", "maxRecordsPerRequest": "0"}, "maxRecordsPerRequest"),
        (
            {"gateway": "http://x", "maxBytesPerRequest": "\u00b2"},
            "maxBytesPerRequest: '\u00b2' is not a positive",
        ),
        ({"gateway": "http://x", "format": "json", "valueSchemaId": "1"}, "schemas are for"),
        ({"gateway": "http://x", "format": "avro", "valueSchemaId": "x"}, "not a schema id"),
        ({"gateway": "http://x", "gatewayCompression": "br"}, "gatewayCompression: 'br' is not one of"),
    ]:
        with pytest.raises(OptionError, match=said):
            SinkOptions.parse(options, {})


def test_request_keys_name_the_write_the_batch_the_task_and_the_request() -> None:
    key = request_key("0" * 36, 123456, 7, 42)
    assert key == f"spark/{'0' * 36}/123456/7/42"
    assert len(request_key("x" * 128, 2**63 - 1, 2**31 - 1, 2**63 - 1)) <= 255


# --- Spark running a task or a micro-batch again ------------------------------------------------


def drive(tmp_path: Path, *argv: str) -> subprocess.Popen[bytes]:
    mode, *rest = argv
    cmd = [sys.executable, "-m", "tests.spark.sink_driver", mode, str(tmp_path / "scratch"), *rest]
    with open(tmp_path / "driver.log", "ab") as err:  # the process keeps its own copy of the file
        return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)


async def finished(proc: subprocess.Popen[bytes], tmp_path: Path) -> None:
    code = await asyncio.to_thread(proc.wait, DEADLINE_S)
    assert code == 0, (tmp_path / "driver.log").read_text(errors="replace")[-4000:]


async def test_a_task_killed_halfway_and_run_again_writes_each_row_once(
    spark: SparkSession, setup: Setup, tmp_path: Path
) -> None:
    topic = await new_topic(setup)
    proc = drive(tmp_path, "retry", setup.gateway.url, topic)
    try:
        deadline = asyncio.get_running_loop().time() + DEADLINE_S
        while (stored := await end_offset(setup, topic)) == 0:
            assert proc.poll() is None, (tmp_path / "driver.log").read_text(errors="replace")[-4000:]
            assert asyncio.get_running_loop().time() < deadline, "the write never began"
            await asyncio.sleep(0.002)
        assert kill_python_workers(proc.pid) > 0  # the task's worker: Spark runs the task again
    finally:
        await finished(proc, tmp_path)
    assert 0 < stored < ROWS  # killed halfway
    assert sorted(int(v) for v in await values(setup, topic, ROWS)) == list(range(ROWS))


def kill_python_workers(driver: int) -> int:
    """SIGKILL the Python workers running tasks under ``driver`` (forked by Spark's daemon, which
    sits in a process group of its own); how many."""
    parents: dict[int, int] = {}
    commands: dict[int, bytes] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            commands[int(stat.parent.name)] = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        parents[int(stat.parent.name)] = parent

    def under_driver(pid: int) -> bool:
        while pid > 1:
            if pid == driver:
                return True
            pid = parents.get(pid, 0)
        return False

    workers = [
        pid
        for pid, command in commands.items()
        if b"pyspark.worker" in command
        and b"pyspark.daemon" in commands.get(parents.get(pid, 0), b"")  # forked by the daemon
        and under_driver(pid)
    ]
    for pid in workers:
        os.kill(pid, signal.SIGKILL)
    return len(workers)


async def end_offset(setup: Setup, topic: str) -> int:
    r = await setup.gateway.client.get(f"/topics/{topic}/partitions/0/offsets")
    return int(r.json()["end_offset"]) if r.status_code == 200 else 0


async def test_a_driver_killed_mid_batch_and_restarted_writes_each_record_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    gateway = await start_gateway(data)
    try:
        setup = Setup(gateway, str(data))
        source, out = await new_topic(setup, 2), await new_topic(setup)
        for i in range(0, 200, 20):
            await produce(
                gateway.client, source, [{"value": f"v{j}", "partition": j % 2} for j in range(i, i + 20)]
            )
        checkpoint = tmp_path / "checkpoint"
        proc = drive(tmp_path, "stream", gateway.url, str(data), source, out, str(checkpoint), "continuous")

        async def mid_batch() -> bool:
            assert proc.poll() is None, (tmp_path / "driver.log").read_text(errors="replace")[-4000:]
            done = batch_ids(checkpoint / "commits")
            started = batch_ids(checkpoint / "offsets")
            # a micro-batch begun, and records of it already in the topic, but not committed
            begun = bool(done) and max(started) > max(done)
            return begun and await end_offset(setup, out) > PER_BATCH * len(done)

        deadline = asyncio.get_running_loop().time() + DEADLINE_S
        while not await mid_batch():
            assert asyncio.get_running_loop().time() < deadline, "no micro-batch caught half-written"
            await asyncio.sleep(0.005)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
        await asyncio.to_thread(proc.wait, 30)

        again = drive(
            tmp_path, "stream", gateway.url, str(data), source, out, str(checkpoint), "available-now"
        )
        await finished(again, tmp_path)
        got = await values(setup, out, 200)
        assert sorted(v.decode() for v in got) == sorted(f"v{i}" for i in range(200))
    finally:
        await gateway.client.aclose()
        await gateway.stop()


def batch_ids(directory: Path) -> set[int]:
    return {int(p.name) for p in directory.glob("[0-9]*")} if directory.is_dir() else set()


def test_values_of_spark_types_are_written_as_json() -> None:
    value_type = pa.struct(
        [
            ("n", pa.decimal128(30, 10)),
            ("at", pa.timestamp("us", tz="UTC")),
            ("day", pa.date32()),
            ("raw", pa.binary()),
            ("by_id", pa.map_(pa.int32(), pa.string())),
            ("tags", pa.list_(pa.string())),
        ]
    )
    value = {
        "n": Decimal("12345678901234567890.0123456789"),
        "at": datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=UTC),
        "day": date(2026, 1, 2),
        "raw": b"\x00\xff",
        "by_id": [(1, "a")],
        "tags": ["x"],
    }
    batch = pa.RecordBatch.from_pydict({"value": pa.array([value], value_type)})
    schema = StructType([StructField("value", StructType())])
    for fmt, raw in (("json", "AP8="), ("avro", "\u0000\u00ff")):
        given = {"gateway": "http://x", "topic": "t", "format": fmt}
        options = SinkOptions.parse({**given, "valueSchemaId": "1"} if fmt == "avro" else given, {})
        columns = Columns.check(schema, options)
        ((topic, text),) = columns.records(batch)
        sent = json.loads(body([text], options, {}), parse_float=Decimal)
        assert topic == "t" and sent.get("value_schema_id") == (1 if fmt == "avro" else None)
        assert sent["records"] == [
            {
                "value": {
                    "n": Decimal("12345678901234567890.0123456789"),
                    "at": "2026-01-02T03:04:05.006000+00:00",
                    "day": "2026-01-02",
                    "raw": raw,
                    "by_id": {"1": "a"},
                    "tags": ["x"],
                }
            }
        ]


def test_binary_records_are_the_json_the_rest_api_takes_nulls_included() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array(["k", None, "ü", None], pa.string()),
            "value": pa.array([b"\x00", b"v", None, None], pa.binary()),
            "partition": pa.array([0, None, 2, None], pa.int32()),
            "timestamp": pa.array([1_000_999, None, 0, None], pa.timestamp("us", tz="UTC")),
            "offset": pa.array([1, 2, 3, 4], pa.int64()),  # not the sink's: left alone
        }
    )
    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField("partition", IntegerType()),
            StructField("timestamp", TimestampType()),
            StructField("offset", LongType()),
        ]
    )
    options = SinkOptions.parse({"gateway": "http://x", "topic": "t"}, {})
    texts = [text for _, text in Columns.check(schema, options).records(batch)]
    assert [json.loads(t) for t in texts] == [
        {"key": "aw==", "value": "AA==", "partition": 0, "timestamp": 1000},
        {"value": "dg=="},
        {"key": "w7w=", "partition": 2, "timestamp": 0},
        {},
    ]
    whole = json.loads(body(texts, options, {}))
    assert whole == {"records": [json.loads(t) for t in texts]}
