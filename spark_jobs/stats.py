"""The stats job: per-key record counts and bytes over a time window; an example aggregate to copy.

    python -m spark_jobs stats --log ./data --topic orders --since 24h --top 10

It reads the topic through the ``brokergate`` data source, keeps the records
whose timestamp falls in ``[since, until)``, and groups them by key: records,
bytes (key, value and headers), first and last timestamp. The busiest keys are
printed; with ``--output`` every key's row is appended, with the window, as
Parquet or CSV. To write your own job, start from ``run_stats``: the
DataFrame it aggregates has the data source's columns.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from service.tables import format_table

from .datasource import NAME, SCHEMA, record_bytes
from .output import OutputFormat, add_output_arguments, append_table
from .plan import DEFAULT_MAX_RECORDS_PER_PARTITION
from .progress import Progress, Summary
from .session import SessionSource, session_of
from .timespec import parse_instant

DEFAULT_TOP: Final = 20
HEADER: Final = ("KEY", "RECORDS", "BYTES", "FIRST", "LAST")


@dataclass(frozen=True, slots=True)
class StatsOptions:
    log: str
    topic: str
    since: datetime
    until: datetime
    top: int = DEFAULT_TOP
    output: str | None = None  # any path Spark writes to: a directory, hdfs://…, s3a://…
    format: OutputFormat = "parquet"
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION


def per_key(records: DataFrame, since: datetime, until: datetime) -> DataFrame:
    """The aggregate itself: one row per key of the records timestamped in ``[since, until)``."""
    in_window = records.where((F.col("timestamp") >= F.lit(since)) & (F.col("timestamp") < F.lit(until)))
    return in_window.groupBy("key").agg(
        F.count(F.lit(1)).alias("records"),
        F.sum(record_bytes()).alias("bytes"),
        F.min("timestamp").alias("first_timestamp"),
        F.max("timestamp").alias("last_timestamp"),
    )


def run_stats(spark: SessionSource, options: StatsOptions, progress: Progress | None = None) -> list[Row]:
    """Aggregate, print the top keys, append every key's row to ``options.output``; returns all rows."""
    progress = progress or Progress("stats")
    session = session_of(spark)
    records = (
        session.read.format(NAME)
        .schema(SCHEMA)  # known: saves Spark asking the data source for it
        .option("log", options.log)
        .option("topic", options.topic)
        .option("maxRecordsPerPartition", str(options.max_records_per_partition))
        .load()
    )
    progress.say(f"window {options.since.isoformat()} .. {options.until.isoformat()}")
    with progress.tracking(session, "aggregating"):
        rows = per_key(records, options.since, options.until).orderBy(F.desc("records"), "key").collect()
    top_keys = [
        (_show_key(r["key"]), r["records"], r["bytes"], r["first_timestamp"], r["last_timestamp"])
        for r in rows[: options.top]
    ]
    sys.stdout.write(format_table(top_keys, HEADER))
    if options.output is not None and rows:
        frame = session.createDataFrame(rows).select(
            F.lit(options.since).alias("window_start"), F.lit(options.until).alias("window_end"), "*"
        )
        with progress.tracking(session, f"appending {len(rows)} rows to {options.output}"):
            append_table(frame, options.output, options.format)
    progress.finish(
        Summary(
            "stats",
            records=sum(r["records"] for r in rows),
            bytes=sum(r["bytes"] or 0 for r in rows),
            details={"keys": len(rows)},
        )
    )
    return rows


def _show_key(key: bytes | None) -> str:
    return "(null)" if key is None else bytes(key).decode("utf-8", "replace")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="a topic, a comma-separated list, or a pattern")
    parser.add_argument(
        "--since", default="24h", help="window start: ISO 8601 or a duration ago (default 24h)"
    )
    parser.add_argument(
        "--until", default="now", help="window end: now (default), ISO 8601 or a duration ago"
    )
    parser.add_argument("--top", type=int, default=DEFAULT_TOP, help=f"keys to print (default {DEFAULT_TOP})")
    add_output_arguments(parser, "every key's row")
    parser.add_argument(
        "--max-records-per-partition", type=int, default=DEFAULT_MAX_RECORDS_PER_PARTITION, help="task size"
    )


def options_from(args: argparse.Namespace) -> StatsOptions:
    now = datetime.now(UTC)
    return StatsOptions(
        log=args.log,
        topic=args.topic,
        since=parse_instant(args.since, now=now),
        until=parse_instant(args.until, now=now),
        top=args.top,
        output=args.output,
        format=args.format,
        max_records_per_partition=args.max_records_per_partition,
    )
