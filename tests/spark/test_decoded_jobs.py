"""The stats and lag jobs over schema formats: records decoded as the export decodes them.

stats groups by the decoded key (one row for a key written under two schema versions) and counts
the records that cannot be decoded; lag decodes the records each group has yet to process and
counts, per group and partition, those its consumers could not decode. With the default policy
both fail on such a record, naming it, as the export does.
"""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.core.models import NewRecord, TopicPartition
from service.core.schemas.model import SchemaType
from spark_jobs.decode_options import ColumnOptions, DecodeOptions
from spark_jobs.lag import LagOptions, run_lag
from spark_jobs.progress import Progress
from spark_jobs.stats import StatsOptions, run_stats

from .helpers import TestLog, TestRegistry

T0 = 1_700_000_000_000
SINCE, UNTIL = datetime.fromtimestamp(T0 / 1000 - 60, UTC), datetime.fromtimestamp(T0 / 1000 + 60, UTC)
CUSTOMER_V1 = json.dumps({"type": "record", "name": "Customer", "fields": [{"name": "id", "type": "int"}]})
CUSTOMER_V2 = json.dumps(
    {
        "type": "record",
        "name": "Customer",
        "fields": [{"name": "id", "type": "int"}, {"name": "region", "type": "string", "default": "eu"}],
    }
)
ORDER = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "qty", "type": "int"}]})
AVRO_VALUES = ColumnOptions("value", "avro")


@pytest.fixture
def embedded(tmp_path: Path) -> TestLog:
    data = tmp_path / "data"
    (data / "topics").mkdir(parents=True)
    return TestLog("embedded", str(data), tmp_path)


def quiet() -> Progress:
    return Progress("test", out=io.StringIO(), summary_out=io.StringIO())


def test_stats_group_by_decoded_keys_and_count_what_cannot_be_decoded(
    spark: SparkSession, embedded: TestLog, tmp_path: Path
) -> None:
    registry = TestRegistry(embedded)
    topic = embedded.create_topic(1)
    key_v1 = registry.register(f"{topic}-key", SchemaType.AVRO, CUSTOMER_V1)
    key_v2 = registry.register(f"{topic}-key", SchemaType.AVRO, CUSTOMER_V2)
    order = registry.register(f"{topic}-value", SchemaType.AVRO, ORDER)
    pairs = [
        (registry.framed(key_v1, {"id": 1}), registry.framed(order, {"qty": 1})),
        (registry.framed(key_v2, {"id": 1, "region": "eu"}), registry.framed(order, {"qty": 2})),
        (registry.framed(key_v1, {"id": 2}), b"not the wire format"),
        (b"nor this", registry.framed(order, {"qty": 3})),
    ]
    embedded.produce(topic, 0, [NewRecord(k, v, (), T0 + i * 1000) for i, (k, v) in enumerate(pairs)])
    decode = DecodeOptions(key=ColumnOptions("key", "avro"), value=AVRO_VALUES, on_error="null")
    out, summary = tmp_path / "stats", io.StringIO()
    options = StatsOptions(
        log=embedded.url, topic=topic, since=SINCE, until=UNTIL, output=str(out), format="csv", decode=decode
    )

    rows = run_stats(spark, options, Progress("stats", out=io.StringIO(), summary_out=summary))
    got = {r["key"]: (r["records"], r["undecodable"], r["bytes"]) for r in rows}
    # the key written under both versions is one key, read with the latest; bytes: no stored size
    assert got == {
        '{"id":1,"region":"eu"}': (2, 0, None),
        '{"id":2,"region":"eu"}': (1, 1, None),
        None: (1, 1, None),
    }
    assert summary.getvalue().startswith("stats: 4 records in ")
    assert summary.getvalue().rstrip().endswith("keys=3, undecodable=2")
    written = spark.read.option("header", "true").option("inferSchema", "true").csv(str(out)).collect()
    assert sorted((r["key"] or "", r["undecodable"]) for r in written) == [
        ("", 1),
        ('{"id":1,"region":"eu"}', 0),
        ('{"id":2,"region":"eu"}', 1),
    ]

    with pytest.raises(PySparkException) as failed:
        run_stats(
            spark, StatsOptions(embedded.url, topic, SINCE, UNTIL, decode=DecodeOptions(value=AVRO_VALUES))
        )
    assert f"{topic}-0 at offset 2: the value cannot be decoded" in str(failed.value)


def test_lag_counts_the_records_behind_each_group_that_cannot_be_decoded(
    spark: SparkSession, embedded: TestLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = TestRegistry(embedded)
    topic = embedded.create_topic(2)
    order = registry.register(f"{topic}-value", SchemaType.AVRO, ORDER)

    def values(*bad: int, n: int) -> list[NewRecord]:
        return [
            NewRecord(None, b"junk" if i in bad else registry.framed(order, {"qty": i}), (), T0)
            for i in range(n)
        ]

    embedded.produce(topic, 0, values(1, 4, n=6))
    embedded.produce(topic, 1, values(0, n=2))

    async def commit() -> None:
        coordinator = EmbeddedCoordinator(Path(embedded.url))
        await coordinator.start()
        try:
            await coordinator.commit("a", {TopicPartition(topic, 0): 3})
            await coordinator.commit("b", {TopicPartition(topic, 0): 5})
        finally:
            await coordinator.stop()

    asyncio.run(commit())
    out = tmp_path / "lag"
    options = LagOptions(
        log=embedded.url,
        output=str(out),
        format="csv",
        decode=DecodeOptions(value=AVRO_VALUES, on_error="null"),
    )
    rows = run_lag(spark, options, quiet())
    assert [(r.group, r.partition, r.lag) for r in rows] == [
        ("a", 0, 3),
        ("a", 1, 2),
        ("b", 0, 1),
        ("b", 1, 2),
    ]
    table = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert table[0][-1] == "UNDECODABLE"
    # a: offset 4 of partition 0 (1 was processed), offset 0 of partition 1 (never committed there)
    assert [(row[0], row[2], row[-1]) for row in table[1:]] == [
        ("a", "0", "1"),
        ("a", "1", "1"),
        ("b", "0", "0"),
        ("b", "1", "1"),
    ]
    written = spark.read.option("header", "true").option("inferSchema", "true").csv(str(out)).collect()
    assert sorted((r["group"], r["partition"], r["undecodable"]) for r in written) == [
        ("a", 0, 1),
        ("a", 1, 1),
        ("b", 0, 0),
        ("b", 1, 1),
    ]

    with pytest.raises(PySparkException) as failed:
        run_lag(spark, LagOptions(log=embedded.url, decode=DecodeOptions(value=AVRO_VALUES)), quiet())
    assert "the value cannot be decoded" in str(failed.value)
