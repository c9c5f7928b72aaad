"""The lag job: per group and partition, the committed offset against the log end.

    python -m spark_jobs lag --log ./data --output ./lag --format csv

Committed offsets come from where the gateway keeps them (its data dir or
ZooKeeper), end offsets from the log, each read once. The rows cover every
partition of every topic the group has committed on (a partition it never
committed shows no committed offset and all its records as lag), counted as
the gateway's ``/v3/clusters/{cluster}/consumer-groups/{group}/lags`` counts
them, so both report the same numbers. The table is printed; with
``--output`` the rows are appended, with the time they were measured, as
Parquet or CSV: run it on a schedule and the output is a lag history.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from service.core.models import TopicPartition
from service.tables import format_table

from .offsets import LagRow, lag_rows
from .output import OutputFormat, add_output_arguments, append_table
from .plan import Planner
from .progress import Progress, Summary
from .session import SessionSource, session_of

SCHEMA: Final = (
    "measured_at timestamp, group string, topic string, partition int, "
    "committed_offset long, log_end_offset long, lag long"
)
HEADER: Final = ("GROUP", "TOPIC", "PARTITION", "COMMITTED", "END", "LAG")


@dataclass(frozen=True, slots=True)
class LagOptions:
    log: str
    coordinator: str | None = None
    groups: tuple[str, ...] = field(default_factory=tuple)  # empty: every group with commits
    output: str | None = None  # any path Spark writes to: a directory, hdfs://…, s3a://…
    format: OutputFormat = "parquet"


def measure(options: LagOptions, progress: Progress) -> list[LagRow]:
    """The lag rows, read from the coordinator and the log."""
    with Planner(options.log, options.coordinator) as planner:
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
    shown = [
        (r.group, r.topic, r.partition, "-" if r.committed is None else r.committed, r.end_offset, r.lag)
        for r in rows
    ]
    sys.stdout.write(format_table(shown, HEADER))
    if options.output is not None:
        now = datetime.now(UTC)
        session = session_of(spark)  # only writing the rows needs Spark
        frame = session.createDataFrame(
            [(now, r.group, r.topic, r.partition, r.committed, r.end_offset, r.lag) for r in rows],
            SCHEMA,
        )
        with progress.tracking(session, f"appending {len(rows)} rows to {options.output}"):
            append_table(frame, options.output, options.format)
    groups = {r.group for r in rows}
    progress.finish(
        Summary(
            "lag",
            records=sum(r.lag for r in rows),
            bytes=None,
            noun="records behind",
            details={"groups": len(groups), "partitions": len(rows), "output": options.output or "-"},
        )
    )
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--group", action="append", default=[], help="a group to report (repeatable; default: all)"
    )
    add_output_arguments(parser, "the rows")


def options_from(args: argparse.Namespace) -> LagOptions:
    return LagOptions(
        log=args.log,
        coordinator=args.coordinator,
        groups=tuple(args.group),
        output=args.output,
        format=args.format,
    )
