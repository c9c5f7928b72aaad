"""Reading from and up to a time: Spark's Kafka timestamp options, answered by the log's own lookup.

Producers give records their timestamps, so timestamps need not grow with
offsets: every test writes them out of order, and expects what Kafka's
ListOffsets by time answers (the first offset whose record is timestamped at
or after the time; none: the partition's end). The options are checked on
their own first (no Spark), the embedded log's lookup against the gateway's,
then batch reads and a stream on real Spark, over the embedded log and the
Kafka log (where Kafka's ListOffsets by time answers).
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from service.adapters.embedded.log import EmbeddedLog
from service.core.models import NewRecord, TopicPartition
from spark_jobs.embedded_source import EmbeddedSource
from spark_jobs.offsets import (
    EARLIEST,
    LATEST,
    AtTime,
    ByTimestamp,
    Explicit,
    OptionError,
    found_offsets,
    parse_side,
    times_for,
)
from spark_jobs.plan import SourceOptions
from spark_jobs.stream_source import StreamOptions

from .helpers import TestLog

T0 = 1_700_000_000_000
# Timestamps (ms after T0) of each partition's records, in offset order: not in time order.
STAMPS = {0: [5000, 1000, 3000, 9000, 2000, 7000, 4000], 1: [8000, 6000, 100]}
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
DEADLINE_S = 120.0  # how long a query may take before the test gives up: never reached when all is well


def first_at(stamps: list[int], ms: int) -> int:
    """Kafka's answer, by reading every record: the first offset at or after ``ms``, else the end."""
    return next((offset for offset, ts in enumerate(stamps) if T0 + ts >= ms), len(stamps))


# --- the options --------------------------------------------------------------------------------------


def test_time_options_win_over_offsets_as_in_spark() -> None:
    by = '{"a": {"0": 1000, "1": 2000}}'
    assert parse_side({}, "start") == EARLIEST and parse_side({}, "end") == LATEST
    assert parse_side({"startingtimestamp": "1000"}, "start") == AtTime(1000, "startingTimestamp")
    everything = {"startingtimestamp": "5", "startingoffsetsbytimestamp": by, "startingoffsets": "latest"}
    assert parse_side(everything, "start") == AtTime(5, "startingTimestamp")
    del everything["startingtimestamp"]
    assert parse_side(everything, "start") == ByTimestamp({A0: 1000, A1: 2000}, "startingOffsetsByTimestamp")
    ending = {"endingoffsetsbytimestamp": by, "endingoffsets": "latest"}
    assert parse_side(ending, "end") == ByTimestamp({A0: 1000, A1: 2000}, "endingOffsetsByTimestamp")
    options = SourceOptions.parse(
        {"log": "./data", "topic": "a", "ENDINGTIMESTAMP": "7", "startingOffsets": "latest"}
    )
    assert (options.starting, options.ending) == (LATEST, AtTime(7, "endingTimestamp"))


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("startingTimestamp", "2024-05-01", "not a time in milliseconds"),
        ("endingTimestamp", "-5", "not a time in milliseconds"),
        ("startingTimestamp", "1e3", "not a time in milliseconds"),
        ("endingTimestamp", str(2**63), "not a time in milliseconds"),
        ("startingOffsetsByTimestamp", '{"a": {"0": 1000', "not valid JSON"),
        ("startingOffsetsByTimestamp", "[1000]", "expected an object"),
        ("endingOffsetsByTimestamp", '{"a": {"0": -1}}', "-1 of a-0 is not a time"),
        ("endingOffsetsByTimestamp", '{"a": {"0": "1000"}}', "'1000' of a-0 is not a time"),
        ("startingOffsetsByTimestamp", '{"a": {"x": 1000}}', "'x' of topic 'a' is not a partition"),
        ("startingOffsetsByTimestamp", '{"a": [1000]}', "must be an object of partitions"),
        ("startingOffsetsByTimestampStrategy", "earliest", "'earliest' is not latest or error"),
    ],
)
def test_bad_time_options_are_one_line_naming_the_option(option: str, value: str, says: str) -> None:
    with pytest.raises(OptionError) as caught:
        SourceOptions.parse({"log": "./data", "topic": "a", option: value})
    message = str(caught.value)
    assert message.startswith(f"{option}: ") and says in message and "\n" not in message


def test_per_partition_times_name_exactly_the_partitions_read() -> None:
    by = ByTimestamp({A0: 10, A1: 20}, "startingOffsetsByTimestamp")
    assert times_for(by, [A1, A0]) == {A0: 10, A1: 20}
    assert times_for(AtTime(7, "startingTimestamp"), [B0, A0]) == {A0: 7, B0: 7}
    with pytest.raises(
        OptionError, match=r"^startingOffsetsByTimestamp: a-1 is not a partition of the topics"
    ):
        times_for(by, [A0])
    with pytest.raises(
        OptionError, match=r"^startingOffsetsByTimestamp: no time for b-0; name every partition"
    ):
        times_for(by, [A0, A1, B0])
    assert found_offsets({A0: 4, A1: None}, by) == Explicit({A0: 4, A1: -1})  # none found: the end
    strict = ByTimestamp({A0: 10, A1: 20}, "startingOffsetsByTimestamp", strict=True)
    assert found_offsets({A0: 4, A1: 5}, strict) == Explicit({A0: 4, A1: 5})
    with pytest.raises(OptionError, match=r"^startingOffsetsByTimestamp: a-1 has no record at or after"):
        found_offsets({A0: 4, A1: None}, strict)


def test_a_stream_takes_a_starting_time_and_no_ending_one() -> None:
    base = {"log": "./data", "topic": "a"}
    by = '{"a": {"0": 1000}}'
    parsed = StreamOptions.parse(base | {"startingOffsetsByTimestamp": by})
    assert parsed.source.starting == ByTimestamp({A0: 1000}, "startingOffsetsByTimestamp")
    for ending in ("endingTimestamp", "endingOffsetsByTimestamp"):
        with pytest.raises(OptionError, match=f"^{ending}: a stream has no end"):
            StreamOptions.parse(base | {ending: "1000" if ending == "endingTimestamp" else by})


# --- the embedded log's lookup ------------------------------------------------------------------------


def test_the_embedded_source_finds_what_the_gateways_log_finds(tmp_path: Path) -> None:
    """Across segments and time-index entries, with timestamps in no order: the Spark source's
    lookup (a reader of the data dir) answers as the gateway's log and as reading every record."""
    rng = random.Random(27)
    batches = [[T0 + rng.randrange(0, 50_000, 10) for _ in range(rng.randint(1, 3))] for _ in range(40)]
    stamps = [ts for batch in batches for ts in batch]
    times = sorted({0, T0 - 1, T0 + 50_000} | {ts + d for ts in stamps for d in (-1, 0, 1)})
    tp = TopicPartition("t", 0)

    async def write_and_ask() -> list[int | None]:
        log = EmbeddedLog(tmp_path, segment_bytes=400, min_segment_bytes=1, index_interval_bytes=100)
        await log.start()
        try:
            await log.create_topic("t", 1, 1, {})
            for batch in batches:
                await log.append(tp, [NewRecord(None, b"x" * 20, (), ts) for ts in batch])
            return [await log.offset_for_timestamp(tp, ms) for ms in times]
        finally:
            await log.stop()

    gateway = asyncio.run(write_and_ask())
    directory = tmp_path / "topics" / "t" / "0"
    assert len(list(directory.glob("*.log"))) > 3 and any(
        p.stat().st_size > 12 for p in directory.glob("*.timeindex")
    )
    source = EmbeddedSource(tmp_path)
    found = [source.offset_for_timestamp(tp, ms) for ms in times]
    every_record = [next((o for o, ts in enumerate(stamps) if ts >= ms), None) for ms in times]
    assert found == gateway == every_record
    assert found[-1] is None  # nothing at or after the last time


# --- on Spark -------------------------------------------------------------------------------------------


def written(log: TestLog) -> str:
    """A topic of two partitions holding ``STAMPS``."""
    topic = log.create_topic(2)
    for partition, stamps in STAMPS.items():
        log.produce(
            topic, partition, [NewRecord(None, f"v{i}".encode(), (), T0 + ts) for i, ts in enumerate(stamps)]
        )
    return topic


def read(spark: SparkSession, log_url: str, topic: str, **options: Any) -> list[tuple[int, int]]:
    reader = spark.read.format("brokergate").option("log", log_url).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value if isinstance(value, str) else json.dumps(value))
    frame: DataFrame = reader.load()
    return sorted((r["partition"], r["offset"]) for r in frame.select("partition", "offset").collect())


def expected(starts: dict[int, int], ends: dict[int, int] | None = None) -> list[tuple[int, int]]:
    """(partition, offset) a read from ``starts`` to ``ends`` (times per partition) gives, by Kafka's rule."""
    out = []
    for partition, stamps in STAMPS.items():
        first = first_at(stamps, starts[partition]) if partition in starts else 0
        end = first_at(stamps, ends[partition]) if ends and partition in ends else len(stamps)
        out.extend((partition, offset) for offset in range(first, end))
    return out


def test_a_batch_read_by_time(spark: SparkSession, log: TestLog) -> None:
    topic = written(log)

    def by(p0: int, p1: int) -> dict[str, dict[str, int]]:
        return {topic: {"0": T0 + p0, "1": T0 + p1}}

    # 2.5 s: partition 0's first record (5 s) is after it, though the next two are not: all is read
    assert read(spark, log.url, topic, startingTimestamp=str(T0 + 2500)) == expected({})
    six_and_a_half = [(0, 3), (0, 4), (0, 5), (0, 6), (1, 0), (1, 1), (1, 2)]
    assert read(spark, log.url, topic, startingTimestamp=str(T0 + 6500)) == six_and_a_half
    assert read(spark, log.url, topic, endingTimestamp=str(T0 + 6500)) == [(0, 0), (0, 1), (0, 2)]
    # per partition; 8.001 s is after every record of partition 1: it starts at its end
    assert read(spark, log.url, topic, startingOffsetsByTimestamp=by(2500, 8001)) == expected(
        {0: T0 + 2500, 1: T0 + 8001}
    )
    assert read(
        spark, log.url, topic, endingOffsetsByTimestamp=by(9000, 8500), endingOffsets="latest"
    ) == expected({}, {0: T0 + 9000, 1: T0 + 8500})
    # the single time wins over the per-partition ones, and those over the offsets
    both = {
        "startingTimestamp": str(T0 + 6500),
        "startingOffsetsByTimestamp": by(0, 0),
        "startingOffsets": "latest",
    }
    assert read(spark, log.url, topic, **both) == six_and_a_half
    span = read(spark, log.url, topic, startingTimestamp=str(T0 + 2500), endingTimestamp=str(T0 + 9000))
    assert span == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


def test_a_partition_left_out_of_the_times_or_one_no_record_reaches_is_an_error(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = TestLog("embedded", str(tmp_path), tmp_path)
    (tmp_path / "topics").mkdir()
    topic = log.create_topic(2)
    with pytest.raises(PySparkException, match=rf"startingOffsetsByTimestamp: no time for {topic}-1"):
        read(spark, log.url, topic, startingOffsetsByTimestamp={topic: {"0": T0}})
    with pytest.raises(PySparkException, match=rf"endingOffsetsByTimestamp: {topic}-7 is not a partition"):
        read(spark, log.url, topic, endingOffsetsByTimestamp={topic: {"0": T0, "1": T0, "7": T0}})
    # no record at or after the time: the end (Spark's strategy latest), or an error with error
    assert read(spark, log.url, topic, startingTimestamp=str(T0)) == []
    with pytest.raises(PySparkException, match=rf"startingTimestamp: {topic}-0, {topic}-1 has no record at"):
        read(spark, log.url, topic, startingTimestamp=str(T0), startingOffsetsByTimestampStrategy="error")


def test_a_stream_starts_at_each_partitions_time(spark: SparkSession, log: TestLog, tmp_path: Path) -> None:
    topic = written(log)
    starts = {topic: {"0": T0 + 2500, "1": T0 + 8001}}  # partition 1: no record yet, so at its end
    frame = (
        spark.readStream.format("brokergate")
        .option("log", log.url)
        .option("topic", topic)
        .option("startingOffsetsByTimestamp", json.dumps(starts))
        .load()
    )
    checkpoint = tmp_path / "checkpoint"
    assert run_available_now(frame, checkpoint) == [(0, offset) for offset in range(7)]
    log.produce(topic, 1, [NewRecord(None, b"later", (), T0)])  # an old time: it is read all the same
    assert run_available_now(frame, checkpoint) == [(1, 3)]


def run_available_now(frame: DataFrame, checkpoint: Path) -> list[tuple[int, int]]:
    """(partition, offset) of every record ``trigger(availableNow=True)`` reads."""
    seen: list[tuple[int, int]] = []

    def keep(df: DataFrame, batch_id: int) -> None:
        seen.extend((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())

    query = frame.writeStream.foreachBatch(keep).option("checkpointLocation", str(checkpoint))
    started = query.trigger(availableNow=True).start()
    finished = started.awaitTermination(DEADLINE_S)
    if not finished:
        started.stop()
    assert finished, "the query did not finish"
    return sorted(seen)
