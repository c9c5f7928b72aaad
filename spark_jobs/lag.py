"""The lag job: per group and partition, the committed offset against the log end.

    python -m spark_jobs lag --log ./data --output ./lag --format csv

Committed offsets come from where the gateway keeps them (Kafka's group
coordinator with a Kafka log, else its data dir or ZooKeeper; see
``committed``), end offsets from the log, each read once. The rows cover every
partition of every topic the group has committed on (a partition it never
committed shows no committed offset and all its records as lag), counted as
the gateway's ``/v3/clusters/{cluster}/consumer-groups/{group}/lags`` counts
them, so both report the same numbers. The table is printed; with
``--output`` the rows are appended, with the time they were measured, as
Parquet or CSV: run it on a schedule and the output is a lag history.

With ``--value-format`` / ``--key-format`` (the export's decoding flags) it
also decodes the records each group has yet to process, as the export would
decode them, through Spark: by default (``--on-decode-error fail``) a record
behind any group that cannot be decoded fails the run, naming it; with
``--on-decode-error null`` each row gets ``undecodable``, how many of the
records behind the group cannot be, the ones its consumers will choke on.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import reduce
from operator import or_
from typing import Final

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from service.core.models import TopicPartition
from service.tables import format_table

from . import credentials
from .credentials import BackendCredentials
from .datasource import NAME
from .decode_options import DecodeOptions
from .export import add_decode_arguments, decode_options_from
from .offsets import LagRow, lag_rows, offsets_json
from .output import OutputFormat, add_output_arguments, append_table
from .plan import Planner
from .progress import Progress, Summary
from .session import SessionSource, session_of

SCHEMA: Final = (
    "measured_at timestamp, group string, topic string, partition int, "
    "committed_offset long, log_end_offset long, lag long"
)
HEADER: Final = ("GROUP", "TOPIC", "PARTITION", "COMMITTED", "END", "LAG")
UNDECODABLE: Final = "undecodable"

# Offsets of the records behind some group that cannot be decoded, by partition.
BadOffsets = dict[TopicPartition, list[int]]


@dataclass(frozen=True, slots=True)
class LagOptions:
    log: str
    coordinator: str | None = None
    groups: tuple[str, ...] = field(default_factory=tuple)  # empty: every group with commits
    output: str | None = None  # any path Spark writes to: a directory, hdfs://…, s3a://…
    format: OutputFormat = "parquet"
    credentials: BackendCredentials = field(default_factory=BackendCredentials)
    decode: DecodeOptions = field(default_factory=DecodeOptions)  # binary: the records are not read

    @property
    def counts_undecodable(self) -> bool:
        return self.decode.decoding and self.decode.on_error == "null"


def measure(options: LagOptions, progress: Progress) -> list[LagRow]:
    """The lag rows, read from the coordinator and the log."""
    with Planner(options.log, options.coordinator, options.credentials) as planner:
        groups = list(options.groups) or planner.groups()
        committed = {g: planner.committed(g) for g in groups}
        progress.say(
            f"{len(groups)} group(s), {sum(len(c) for c in committed.values())} committed partitions"
        )
        existing = set(planner.log.topics())
        topics = sorted({tp.topic for offsets in committed.values() for tp in offsets} & existing)
        counts = {t: planner.log.partition_count(t) for t in topics}
        tps = [TopicPartition(t, p) for t in topics for p in range(counts[t])]
        ends = {tp: end for tp, (_, end) in planner.bounds(tps).items()}
    return lag_rows(committed, counts, ends)


def run_lag(spark: SessionSource, options: LagOptions, progress: Progress | None = None) -> list[LagRow]:
    """Measure, print the table, append the rows to ``options.output``; returns the rows."""
    progress = progress or Progress("lag")
    rows = measure(options, progress)
    extra: list[list[int]] = [[] for _ in rows]  # the undecodable column, when counted
    if options.decode.decoding:
        session = session_of(spark)  # decoding the records behind needs Spark
        with progress.tracking(session, "decoding the records behind"):
            bad = undecodable_offsets(session, options, rows)
        if options.counts_undecodable:
            extra = [[_count_behind(r, bad)] for r in rows]
    shown = [
        (r.group, r.topic, r.partition, "-" if r.committed is None else r.committed, r.end_offset, r.lag, *x)
        for r, x in zip(rows, extra, strict=True)
    ]
    header = (*HEADER, UNDECODABLE.upper()) if options.counts_undecodable else HEADER
    sys.stdout.write(format_table(shown, header))
    if options.output is not None:
        now = datetime.now(UTC)
        session = session_of(spark)
        frame = session.createDataFrame(
            [
                (now, r.group, r.topic, r.partition, r.committed, r.end_offset, r.lag, *x)
                for r, x in zip(rows, extra, strict=True)
            ],
            f"{SCHEMA}, {UNDECODABLE} long" if options.counts_undecodable else SCHEMA,
        )
        with progress.tracking(session, f"appending {len(rows)} rows to {options.output}"):
            append_table(frame, options.output, options.format)
    groups = {r.group for r in rows}
    progress.finish(
        Summary(
            "lag",
            records=sum(max(r.lag, 0) for r in rows),  # a commit past the end is behind on nothing
            bytes=None,
            noun="records behind",
            details={"groups": len(groups), "partitions": len(rows), "output": options.output or "-"},
        )
    )
    return rows


def undecodable_offsets(spark: SparkSession, options: LagOptions, rows: list[LagRow]) -> BadOffsets:
    """Decode the records behind every group (from the least committed offset of a partition to the
    end measured) through the data source; the offsets that cannot be decoded, with
    ``onDecodeError=null`` (with ``fail`` the first one fails the read, naming it)."""
    starts: dict[TopicPartition, int] = {}
    ends: dict[TopicPartition, int] = {}
    for r in rows:
        tp = TopicPartition(r.topic, r.partition)
        starts[tp] = min(starts.get(tp, r.end_offset), r.committed or 0)
        ends[tp] = r.end_offset
    bad: BadOffsets = {}
    # One read per topic: each topic's reader schema is its own (<topic>-value by default), and every
    # partition is named, so a partition with nothing behind reads nothing.
    for topic in sorted({tp.topic for tp in starts}):
        tps = [tp for tp in starts if tp.topic == topic]
        frame = (
            spark.read.format(NAME)
            .options(**options.decode.as_options(), **options.credentials.as_options())
            .option("log", options.log)
            .option("topic", topic)
            .option("startingOffsets", offsets_json({tp: starts[tp] for tp in tps}))
            .option("endingOffsets", offsets_json({tp: ends[tp] for tp in tps}))
            .load()
        )
        failed: list[Column] = [
            F.col(c).isNotNull() for c in ("key_error", "value_error") if c in frame.columns
        ]
        # With onDecodeError=fail there is no error column: no row is kept, yet every record is read
        # (a condition Spark cannot fold away), so a bad one fails the read.
        condition = reduce(or_, failed) if failed else F.col("offset") < 0
        for row in frame.where(condition).select("partition", "offset").collect():
            bad.setdefault(TopicPartition(topic, row["partition"]), []).append(row["offset"])
    return bad


def _count_behind(row: LagRow, bad: BadOffsets) -> int:
    start = row.committed or 0
    return sum(
        1 for o in bad.get(TopicPartition(row.topic, row.partition), []) if start <= o < row.end_offset
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--group", action="append", default=[], help="a group to report (repeatable; default: all)"
    )
    add_output_arguments(parser, "the rows")
    add_decode_arguments(parser)


def options_from(args: argparse.Namespace) -> LagOptions:
    return LagOptions(
        log=args.log,
        coordinator=args.coordinator,
        groups=tuple(args.group),
        output=args.output,
        format=args.format,
        credentials=credentials.from_arguments(args),
        decode=decode_options_from(args),
    )
