"""The stats job: per-key record counts and bytes over a time window; an example aggregate to copy.

    python -m spark_jobs stats --log ./data --topic orders --since 24h --top 10

It reads the topic through the ``brokergate`` data source, keeps the records
whose timestamp falls in ``[since, until)``, and groups them by key: records,
bytes (key, value and headers), first and last timestamp. The busiest keys are
printed; with ``--output`` every key's row is appended, with the window, as
Parquet or CSV. To write your own job, start from ``run_stats``: the
DataFrame it aggregates has the data source's columns.

With ``--key-format`` / ``--value-format`` (the export's decoding flags) the
records are decoded as the export decodes them: keys are grouped by their
decoded value (one row for a key written under several schema versions), shown
and written as text (JSON for a record, array or map); ``bytes`` is null, as
decoded columns have no stored size; a record that cannot be decoded fails the
run, naming it, or with ``--on-decode-error null`` is counted in the
``undecodable`` column of its key's row (a key that cannot be decoded: the
null key's).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, DataType, MapType, StringType, StructType

from service.tables import format_table

from . import credentials
from .credentials import BackendCredentials
from .datasource import NAME, SCHEMA, record_bytes
from .decode_options import DecodeOptions
from .export import add_decode_arguments, decode_options_from
from .output import OutputFormat, add_output_arguments, append_table
from .plan import DEFAULT_MAX_RECORDS_PER_PARTITION, check_topics
from .progress import Progress, Summary
from .session import SessionSource, session_of
from .timespec import parse_instant

DEFAULT_TOP: Final = 20
HEADER: Final = ("KEY", "RECORDS", "BYTES", "FIRST", "LAST")
UNDECODABLE: Final = "undecodable"
_ERRORS: Final = ("key_error", "value_error")


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
    credentials: BackendCredentials = field(default_factory=BackendCredentials)
    decode: DecodeOptions = field(default_factory=DecodeOptions)  # binary key and value: nothing decoded


def per_key(records: DataFrame, since: datetime, until: datetime) -> DataFrame:
    """The aggregate itself: one row per key of the records timestamped in ``[since, until)``.

    Over a decoded read (``records`` has ``key_schema_id`` or ``value_schema_id``) the key is the
    decoded key as text and ``bytes`` null; with its error columns, ``undecodable`` counts the
    records whose key or value could not be decoded.
    """
    decoded = any(f"{side}_schema_id" in records.columns for side in ("key", "value"))
    errors = [F.col(c).isNotNull() for c in _ERRORS if c in records.columns]
    in_window = records.where((F.col("timestamp") >= F.lit(since)) & (F.col("timestamp") < F.lit(until)))
    keyed = in_window.withColumn("key", _key_text(records.schema["key"].dataType))
    size = F.lit(None).cast("long") if decoded else F.sum(record_bytes())
    counted = [F.count(F.lit(1)).alias("records"), size.alias("bytes")]
    if errors:
        failed = errors[0] if len(errors) == 1 else errors[0] | errors[1]
        counted.append(F.count(F.when(failed, 1)).alias(UNDECODABLE))
    return keyed.groupBy("key").agg(
        *counted,
        F.min("timestamp").alias("first_timestamp"),
        F.max("timestamp").alias("last_timestamp"),
    )


def _key_text(key_type: DataType) -> Column:
    """The key to group by: the stored bytes, or a decoded key as text that CSV can hold too."""
    key = F.col("key")
    if isinstance(key_type, BinaryType | StringType):
        return key
    if isinstance(key_type, StructType | ArrayType | MapType):
        return F.to_json(key)
    return key.cast("string")


def run_stats(spark: SessionSource, options: StatsOptions, progress: Progress | None = None) -> list[Row]:
    """Aggregate, print the top keys, append every key's row to ``options.output``; returns all rows."""
    progress = progress or Progress("stats")
    check_topics(options.log, options.topic, credentials=options.credentials)
    session = session_of(spark)
    reader = session.read.format(NAME)
    if not options.decode.decoding:
        reader = reader.schema(SCHEMA)  # known: saves Spark asking the data source for it
    records = (
        reader.options(**options.decode.as_options(), **options.credentials.as_options())
        .option("log", options.log)
        .option("topic", options.topic)
        .option("maxRecordsPerPartition", str(options.max_records_per_partition))
        .load()
    )
    progress.say(f"window {options.since.isoformat()} .. {options.until.isoformat()}")
    with progress.tracking(session, "aggregating"):
        aggregate = per_key(records, options.since, options.until)
        rows = aggregate.orderBy(F.desc("records"), "key").collect()
    counts_undecodable = UNDECODABLE in aggregate.columns
    top_keys = [
        (_show_key(r["key"]), r["records"], "-" if r["bytes"] is None else r["bytes"])
        + (r["first_timestamp"], r["last_timestamp"])
        + ((r[UNDECODABLE],) if counts_undecodable else ())
        for r in rows[: options.top]
    ]
    header = (*HEADER, UNDECODABLE.upper()) if counts_undecodable else HEADER
    sys.stdout.write(format_table(top_keys, header))
    if options.output is not None and rows:
        # the aggregate's schema: a column of nulls (a decoded read's bytes) has no type to infer
        frame = session.createDataFrame(rows, aggregate.schema).select(
            F.lit(options.since).alias("window_start"), F.lit(options.until).alias("window_end"), "*"
        )
        with progress.tracking(session, f"appending {len(rows)} rows to {options.output}"):
            append_table(frame, options.output, options.format)
    details: dict[str, object] = {"keys": len(rows)}
    if counts_undecodable:
        details[UNDECODABLE] = sum(r[UNDECODABLE] for r in rows)
    progress.finish(
        Summary(
            "stats",
            records=sum(r["records"] for r in rows),
            bytes=None if options.decode.decoding else sum(r["bytes"] or 0 for r in rows),
            details=details,
        )
    )
    return rows


def _show_key(key: bytes | str | None) -> str:
    if key is None:
        return "(null)"
    return key if isinstance(key, str) else bytes(key).decode("utf-8", "replace")


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
    add_decode_arguments(parser)


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
        credentials=credentials.from_arguments(args),
        decode=decode_options_from(args),
    )
