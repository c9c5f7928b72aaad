"""``spark.readStream.format("brokergate")`` on a real local[2] Spark: micro-batches, restarts, lost records.

The offset arithmetic is tested on its own first (no Spark); the streams run
over the embedded log and, where the broker can do what they need, the Kafka
log. The kill -9 test runs a query in a process of its own and restarts it in
this one, from the same checkpoint. Run as ``python -m
tests.spark.test_streaming_source <data dir> <topic> <checkpoint> <output>
<scratch>``, this module is that process.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming import StreamingQuery

from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.adapters.embedded.log import EmbeddedLog, reader
from service.core.models import NewRecord, TopicPartition
from service.core.schemas.model import SchemaType
from spark_jobs.logs import open_log
from spark_jobs.offsets import AtTime, OffsetRange, OptionError
from spark_jobs.session import build_session
from spark_jobs.stream_offsets import (
    DataLoss,
    available_now,
    micro_batch_end,
    offset_doc,
    parse_offset_doc,
    ranges,
    split_for_tasks,
)
from spark_jobs.stream_source import DataLossError, StreamOptions, checked

from .helpers import TestLog, TestRegistry, records

REPO = Path(__file__).resolve().parents[2]
BASE_TS = records(1)[0].timestamp
FAST_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # as the session fixture starts its JVM
DEADLINE_S = 120.0  # how long a condition may take before the test gives up: never reached when all is well
A, B, C = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


# --- the offset arithmetic -------------------------------------------------------------------------


def test_offsets_round_trip_as_the_same_text() -> None:
    offsets = {C: 1, B: 12, A: 3, TopicPartition("a", 10): 0}
    doc = offset_doc(offsets)
    assert list(doc) == ["a", "b"] and list(doc["a"]) == ["0", "1", "10"]
    assert parse_offset_doc(doc) == offsets
    assert offset_doc(parse_offset_doc(doc)) == doc


def test_a_micro_batch_ends_at_the_log_end_or_shares_the_limit() -> None:
    bounds = {A: (0, 10), B: (0, 4), C: (0, 0)}
    assert micro_batch_end({A: 2}, bounds, None) == {A: 10, B: 4, C: 0}  # new partitions from 0
    # 5 of 12 waiting records: 8/12 and 4/12 of 5 are 3.33 and 1.67; the larger fraction gets the rest
    assert micro_batch_end({A: 2}, bounds, 5) == {A: 5, B: 2, C: 0}
    assert micro_batch_end({A: 10, B: 4, C: 0}, bounds, 5) == {A: 10, B: 4, C: 0}  # nothing new
    for limit in range(1, 13):
        end = micro_batch_end({A: 2}, bounds, limit)
        assert (end[A] - 2) + end[B] == limit
    # below the log start counts from it; a log behind the stream (a re-created topic) is taken as it is
    assert micro_batch_end({A: 1, B: 9}, {A: (6, 10), B: (0, 3)}, 3) == {A: 9, B: 3}


def test_available_now_holds_the_end_at_the_target() -> None:
    assert available_now({A: 10, B: 4, C: 7}, {A: 8, B: 9}) == {A: 8, B: 4}


def test_ranges_report_what_retention_removed() -> None:
    batch, lost = ranges({A: 2, B: 0}, {A: 10, B: 4, C: 3}, {A: (5, 10), B: (0, 4), C: (0, 3)})
    assert batch == [OffsetRange("a", 0, 5, 10), OffsetRange("a", 1, 0, 4), OffsetRange("b", 0, 0, 3)]
    assert lost == [DataLoss(A, 2, 5, 5)]
    assert "a-0: offsets 2..4 were deleted by retention" in lost[0].describe()
    batch, lost = ranges({A: 2}, {A: 4}, {A: (7, 9)})  # all of it gone
    assert batch == [] and lost == [DataLoss(A, 2, 4, 7)]
    batch, lost = ranges({A: 8}, {A: 3}, {A: (0, 3)})  # the log went back
    assert batch == [] and "before offset 8" in lost[0].describe()


def test_min_partitions_splits_a_batch_into_enough_tasks() -> None:
    batch = [OffsetRange("a", 0, 0, 4), OffsetRange("a", 1, 0, 1)]
    assert len(split_for_tasks(batch, 200_000, None)) == 2
    assert len(split_for_tasks(batch, 200_000, 4)) >= 4
    assert len(split_for_tasks(batch, 2, None)) == 3
    assert split_for_tasks([OffsetRange("a", 0, 3, 3)], 10, 4) == []


def test_stream_options_are_checked() -> None:
    base = {"log": "./data", "topic": "orders"}
    parsed = StreamOptions.parse(base | {"MAXOFFSETSPERTRIGGER": "50", "minPartitions": "4"})
    assert (parsed.max_offsets_per_trigger, parsed.min_partitions, parsed.fail_on_data_loss) == (50, 4, True)
    at = AtTime(BASE_TS, "startingTimestamp")
    assert StreamOptions.parse(base | {"startingTimestamp": "1700000000000"}).source.starting == at
    assert not StreamOptions.parse(base | {"failOnDataLoss": "FALSE"}).fail_on_data_loss
    for bad, says in [
        ({"endingOffsets": "latest"}, "endingOffsets"),
        ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({"minPartitions": "x"}, "minPartitions"),
        ({"startingTimestamp": "2024-05-01"}, "startingTimestamp"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ]:
        with pytest.raises(OptionError, match=says):
            StreamOptions.parse(base | bad)


# --- streams on Spark --------------------------------------------------------------------------------


def stream(spark: SparkSession, log_url: str, topic: str, **options: Any) -> DataFrame:
    source = spark.readStream.format("brokergate").option("log", log_url).option("topic", topic)
    for key, value in options.items():
        source = source.option(key, str(value))
    return source.load()


Batch = tuple[int, int, list[Row]]  # batch id, Spark partitions, rows


def run_available_now(frame: DataFrame, checkpoint: Path) -> list[Batch]:
    """Every micro-batch ``trigger(availableNow=True)`` runs, with what it read."""
    batches: list[Batch] = []

    def keep(df: DataFrame, batch_id: int) -> None:
        rows = df.select("topic", "partition", "offset", "value").collect()
        batches.append((batch_id, df.rdd.getNumPartitions(), rows))

    query = (
        frame.writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    finished = query.awaitTermination(DEADLINE_S)
    if not finished:
        query.stop()
    assert finished, "the query did not finish"
    return batches


def read_offsets(batches: list[Batch]) -> list[tuple[str, int, int]]:
    return sorted((r["topic"], r["partition"], r["offset"]) for _, _, rows in batches for r in rows)


def wait_until(condition: Callable[[], bool], what: str | Callable[[], str]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what if isinstance(what, str) else what()}"
        time.sleep(0.1)


def test_available_now_reads_what_is_there_then_only_new_records(
    spark: SparkSession, log: TestLog, tmp_path: Path
) -> None:
    topic = log.create_topic(2)
    log.produce(topic, 0, records(5))
    log.produce(topic, 1, records(3))
    checkpoint = tmp_path / "checkpoint"
    first = run_available_now(stream(spark, log.url, topic), checkpoint)
    assert read_offsets(first) == [(topic, 0, i) for i in range(5)] + [(topic, 1, i) for i in range(3)]
    value = next(r for _, _, rows in first for r in rows if (r["partition"], r["offset"]) == (0, 4))
    assert bytes(value["value"]) == b"v4"

    log.produce(topic, 1, records(4, start=3))
    # startingOffsets applies to a query's first start only: the checkpoint says where this one is
    again = run_available_now(stream(spark, log.url, topic, startingOffsets="latest"), checkpoint)
    assert read_offsets(again) == [(topic, 1, i) for i in range(3, 7)]


def test_a_running_query_sees_new_records_and_new_topics_of_its_pattern(
    spark: SparkSession, log: TestLog, tmp_path: Path
) -> None:
    prefix = log.create_topic(1)  # a unique name; the pattern's topics are named after it
    first, second = f"{prefix}.one", f"{prefix}.two"
    asyncio.run(log._create(first, 2))
    log.produce(first, 0, records(2))
    name = f"stream_{prefix.replace('-', '_')}"
    query = (
        stream(spark, log.url, re.escape(prefix) + r"\..*")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:

        def seen() -> list[tuple[str, int, int]]:
            return sorted(
                (r[0], r[1], r[2]) for r in spark.table(name).select("topic", "partition", "offset").collect()
            )

        wait_until(lambda: len(seen()) >= 2, "the records written before the query started")
        log.produce(first, 1, records(3))
        asyncio.run(log._create(second, 1))
        log.produce(second, 0, records(2))
        want = [
            (first, 0, 0),
            (first, 0, 1),
            (first, 1, 0),
            (first, 1, 1),
            (first, 1, 2),
            (second, 0, 0),
            (second, 0, 1),
        ]
        wait_until(
            lambda: len(seen()) >= len(want),
            lambda: f"the records written while it runs: {seen()}, {query.exception()}",
        )
        assert query.exception() is None
        assert seen() == want
    finally:
        query.stop()


def test_a_stream_can_start_at_a_timestamp(spark: SparkSession, tmp_path: Path) -> None:
    log = embedded_log(tmp_path)
    topic = log.create_topic(2)
    log.produce(topic, 0, records(6))
    log.produce(topic, 1, records(2))
    frame = stream(spark, log.url, topic, startingTimestamp=BASE_TS + 4000)
    got = read_offsets(run_available_now(frame, tmp_path / "checkpoint"))
    assert got == [(topic, 0, 4), (topic, 0, 5)]


def test_a_decoded_stream_from_a_groups_committed_offsets(spark: SparkSession, tmp_path: Path) -> None:
    log = embedded_log(tmp_path)
    topic = log.create_topic(1)
    registry = TestRegistry(log)
    order = {"type": "record", "name": "Order", "fields": [{"name": "customer", "type": "string"}]}
    schema_id = registry.register(f"{topic}-value", SchemaType.AVRO, json.dumps(order))
    values = [registry.framed(schema_id, {"customer": f"c{i}"}) for i in range(4)]
    log.produce(topic, 0, [NewRecord(None, v, (), BASE_TS) for v in values])
    asyncio.run(commit(Path(log.url), "billing", {TopicPartition(topic, 0): 2}))
    frame = stream(spark, log.url, topic, valueFormat="avro", startingOffsets="committed:billing")
    batches = run_available_now(frame, tmp_path / "checkpoint")
    got = sorted((r["offset"], r["value"]["customer"]) for _, _, rows in batches for r in rows)
    assert got == [(2, "c2"), (3, "c3")]


async def commit(data: Path, group: str, offsets: dict[TopicPartition, int]) -> None:
    coordinator = EmbeddedCoordinator(data)
    await coordinator.start()
    try:
        await coordinator.commit(group, offsets)
    finally:
        await coordinator.stop()


def test_max_offsets_per_trigger_bounds_each_micro_batch(spark: SparkSession, tmp_path: Path) -> None:
    log = embedded_log(tmp_path)
    topic = log.create_topic(3)
    log.produce(topic, 0, records(10))
    log.produce(topic, 1, records(4))
    frame = stream(spark, log.url, topic, maxOffsetsPerTrigger=5, minPartitions=4)
    batches = [b for b in run_available_now(frame, tmp_path / "checkpoint") if b[2]]
    assert [len(rows) for _, _, rows in batches] == [5, 5, 4]
    assert all(tasks >= 4 for _, tasks, _ in batches)
    assert read_offsets(batches) == [(topic, 0, i) for i in range(10)] + [(topic, 1, i) for i in range(4)]


def embedded_log(tmp_path: Path) -> TestLog:
    data = tmp_path / "data"
    (data / "topics").mkdir(parents=True)
    return TestLog("embedded", str(data), tmp_path)


# --- a crash, and records lost before they were read -------------------------------------------------


def to_parquet(frame: DataFrame, checkpoint: Path, output: Path) -> StreamingQuery:
    return (
        frame.select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def batch_ids(directory: Path) -> set[int]:
    return {int(p.name) for p in directory.glob("[0-9]*")} if directory.is_dir() else set()


def test_a_query_killed_mid_batch_and_restarted_writes_every_record_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = embedded_log(tmp_path)
    topic = log.create_topic(2)
    for p in range(2):
        log.produce(topic, p, records(100))
    checkpoint, output = tmp_path / "checkpoint", tmp_path / "output"
    stderr_path = tmp_path / "killed-query.log"
    cmd = [sys.executable, "-m", "tests.spark.test_streaming_source"]
    cmd += [log.url, topic, str(checkpoint), str(output), str(tmp_path / "scratch")]
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:

        def mid_batch() -> bool:
            assert proc.poll() is None, stderr_path.read_text(errors="replace")
            started, done = batch_ids(checkpoint / "offsets"), batch_ids(checkpoint / "commits")
            return bool(done) and max(started) > max(done)

        wait_until(mid_batch, "a micro-batch in progress after one was committed")
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL  # killed, not finished: the restart has batches to run

    query = to_parquet(stream(spark, log.url, topic, maxOffsetsPerTrigger=10), checkpoint, output)
    assert query.awaitTermination(DEADLINE_S)
    rows = spark.read.parquet(str(output)).collect()
    got = sorted((r["partition"], r["offset"]) for r in rows)
    assert got == [(p, i) for p in range(2) for i in range(100)]  # each once: none lost, none twice
    assert all(bytes(r["value"]) == f"v{r['offset']}".encode() for r in rows)


async def _small_segments(data: Path, topic: str, batch: list[NewRecord], *, create: bool) -> None:
    """Append one record per segment (so retention can remove some), then apply retention: the
    records' timestamps are years old, so every closed segment goes."""
    log = EmbeddedLog(data, min_segment_bytes=1)
    await log.start()
    try:
        if create:
            await log.create_topic(topic, 1, 1, {"segment.bytes": "100"})
        for r in batch:
            await log.append(TopicPartition(topic, 0), [r])
        await log.apply_retention()
    finally:
        await log.stop()


def big(n: int, start: int) -> list[NewRecord]:
    return [NewRecord(None, b"x" * 200, (), r.timestamp) for r in records(n, start=start)]


def test_records_removed_before_they_were_read_fail_the_query_or_are_skipped(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = embedded_log(tmp_path)
    topic = "lost"
    asyncio.run(_small_segments(Path(log.url), topic, [], create=True))
    asyncio.run(_small_segments(Path(log.url), topic, big(1, 0), create=False))
    failing, skipping = tmp_path / "failing", tmp_path / "skipping"
    assert read_offsets(run_available_now(stream(spark, log.url, topic), failing)) == [(topic, 0, 0)]
    shutil.copytree(failing, skipping)

    asyncio.run(_small_segments(Path(log.url), topic, big(5, 1), create=False))
    log_start, log_end = reader.partition_bounds(reader.partition_dir(Path(log.url), topic, 0))
    assert 1 < log_start < log_end == 6  # offsets 1.. were written and removed while the query was down

    with pytest.raises(StreamingQueryException) as failed:
        run_available_now(stream(spark, log.url, topic), failing)
    assert f"{topic}-0: offsets 1..{log_start - 1} were deleted by retention" in str(failed.value)

    kept = run_available_now(stream(spark, log.url, topic, failOnDataLoss="false"), skipping)
    assert read_offsets(kept) == [(topic, 0, i) for i in range(log_start, log_end)]


def test_a_task_reports_records_removed_after_its_micro_batch_was_planned(tmp_path: Path) -> None:
    data = embedded_log(tmp_path).url
    asyncio.run(_small_segments(Path(data), "lost", [], create=True))
    asyncio.run(_small_segments(Path(data), "lost", big(6, 0), create=False))  # offsets 0..4 removed
    planned = OffsetRange("lost", 0, 2, 6)  # planned before retention ran
    source = open_log(data)
    try:
        with pytest.raises(DataLossError, match=r"lost-0: offsets 2\.\.4 were deleted by retention"):
            list(checked(source, planned, fail=True))
        assert [r.offset for chunk in checked(source, planned, fail=False) for r in chunk] == [5]
        assert [
            r.offset for chunk in checked(source, OffsetRange("lost", 0, 5, 6), fail=True) for r in chunk
        ] == [5]
    finally:
        source.close()


def _drive(argv: list[str]) -> None:
    """The query the kill -9 test kills: ten records a micro-batch into Parquet, until killed."""
    data, topic, checkpoint, output, scratch = argv
    spark = build_session(
        "brokergate-stream-killed",
        "local[2]",
        {
            "spark.ui.enabled": "false",
            "spark.local.dir": str(Path(scratch) / "local"),
            "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={scratch} {FAST_START_JVM}",
        },
    )
    frame = stream(spark, data, topic, maxOffsetsPerTrigger=10)
    to_parquet(frame, Path(checkpoint), Path(output)).awaitTermination()


if __name__ == "__main__":
    _drive(sys.argv[1:])
