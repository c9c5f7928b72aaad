"""The export job: a topic, incrementally and exactly once, into Parquet partitioned by date.

    python -m spark_jobs export --log ./data --topic orders --output ./exports/orders
    python -m spark_jobs export --log ./data --topic orders --output ./exports/orders --value-format avro

Each run appends the records written since the previous run as Parquet files
under ``date=YYYY-MM-DD/`` (the UTC day of the record's timestamp), with the
data source's columns. With ``--value-format`` / ``--key-format`` the data
source decodes those columns with the schema registry (``decode_options``), so
the files hold real nested columns, typed by each run's reader schema (the
latest version of ``<topic>-value`` unless pinned: read the files of runs made
across schema versions with ``mergeSchema``); the run's summary then counts
records only, as decoded columns have no stored size. The commit protocol,
which makes a run killed at any point harmless, is described in
``export_state``; this module does its I/O.
One run at a time per output directory (a lock in ``_brokergate/``).
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from service.adapters.embedded.fileio import atomic_write, fsync_dir

from . import credentials
from .credentials import BackendCredentials
from .datasource import NAME, SCHEMA, record_bytes
from .decode_options import BINARY, FORMATS, ON_DECODE_ERROR, DecodeOptions, Side
from .export_state import (
    LOCK_FILE,
    META_DIR,
    STAGING_DIR,
    STATE_FILE,
    ExportPlan,
    ExportState,
    Move,
    committed_state,
    final_name,
    plan_export,
    published_state,
    staging_name,
)
from .lock import exclusive
from .offsets import (
    EARLIEST,
    LATEST,
    LATEST_CODE,
    OffsetRange,
    OffsetSpec,
    committed_groups,
    offsets_json,
    parse_offset_spec,
)
from .plan import DEFAULT_MAX_RECORDS_PER_PARTITION, Planner
from .progress import Progress, Summary
from .session import SessionSource, session_of

DATE_COLUMN: Final = "date"
PASSWORD_ENV: Final = "BROKERGATE_SCHEMA_REGISTRY_PASSWORD"
DEFAULT_MAX_RECORDS_PER_FILE: Final = 1_000_000
_MICROS_PER_DAY: Final = 86_400 * 1_000_000


@dataclass(frozen=True, slots=True)
class ExportOptions:
    log: str
    topic: str
    output: Path
    coordinator: str | None = None
    starting: OffsetSpec = EARLIEST
    ending: OffsetSpec = LATEST
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    max_records_per_file: int = DEFAULT_MAX_RECORDS_PER_FILE
    decode: DecodeOptions = field(default_factory=DecodeOptions)  # binary key and value: nothing decoded
    credentials: BackendCredentials = field(default_factory=BackendCredentials)


class ExportOutput:
    """The files of one output directory: progress record, staging area, published files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.meta = root / META_DIR
        self.state_path = self.meta / STATE_FILE
        self.lock_path = self.meta / LOCK_FILE
        self.staging = self.meta / STAGING_DIR

    def load(self) -> ExportState:
        try:
            return ExportState.from_json(self.state_path.read_bytes())
        except FileNotFoundError:
            return ExportState()

    def save(self, state: ExportState) -> None:
        atomic_write(self.state_path, state.to_json())

    def staged_runs(self) -> list[Path]:
        return sorted(p for p in self.staging.iterdir() if p.is_dir()) if self.staging.is_dir() else []

    def staged_files(self, run_dir: Path) -> list[str]:
        """The data files Spark committed in ``run_dir`` (relative), made durable."""
        files = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*.parquet") if p.is_file())
        for rel in files:
            fd = os.open(run_dir / rel, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        for directory in {(run_dir / rel).parent for rel in files}:
            fsync_dir(directory)
        return files

    def publish(self, run_dir: Path, moves: tuple[Move, ...]) -> None:
        """Rename each staged file into place; files already moved by an earlier attempt are skipped."""
        touched = set()
        for m in moves:
            src, dst = run_dir / m.staged, self.root / m.final
            if src.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)
                touched.add(dst.parent)
            elif not dst.exists():
                raise FileNotFoundError(
                    f"{src} was committed for publishing but is gone, and {dst} does not exist; "
                    "the output was changed by something else"
                )
        for directory in touched:
            fsync_dir(directory)
        if touched:
            fsync_dir(self.root)

    def discard(self, run_dir: Path) -> None:
        shutil.rmtree(run_dir, ignore_errors=True)


def recover(out: ExportOutput, state: ExportState, progress: Progress) -> ExportState:
    """Finish what a killed run committed; throw away what it had not."""
    if state.publishing:
        out.publish(out.staging / staging_name(state.run), state.publishing)
        state = published_state(state)
        out.save(state)
        progress.say(f"finished publishing run {state.run} (committed before it was interrupted)")
    for leftover in out.staged_runs():
        if leftover.name != staging_name(state.run):
            progress.say(f"discarding {leftover.name}: interrupted before its commit point, never visible")
        out.discard(leftover)
    return state


def run_export(spark: SessionSource, options: ExportOptions, progress: Progress | None = None) -> Summary:
    """One incremental run; returns its summary (0 records when there was nothing new, and no Spark)."""
    progress = progress or Progress("export")
    out = ExportOutput(options.output)
    out.meta.mkdir(parents=True, exist_ok=True)
    with exclusive(out.lock_path, f"an export into {options.output}"):
        state = recover(out, out.load(), progress)
        with Planner(options.log, options.coordinator, options.credentials) as planner:
            tps = planner.partitions(options.topic)
            bounds = planner.bounds(tps)
            committed = {g: planner.committed(g) for g in committed_groups(options.starting, options.ending)}
        plan = plan_export(state, tps, bounds, options.starting, options.ending, committed=committed)
        for warning in plan.warnings:
            progress.say(f"warning: {warning}")
        summary = Summary("export", details={"run": state.run, "files": 0, "output": str(options.output)})
        if plan.records == 0:
            since = f"since run {state.run}" if state.run else "yet"
            progress.say(f"nothing new to export {since}; nothing written")
            return progress.finish(summary)
        run = state.run + 1
        busy = [r for r in plan.ranges if r.size]
        progress.say(f"run {run}: {plan.records} offsets in {len(busy)} of {len(plan.ranges)} partitions")
        run_dir = out.staging / staging_name(run)
        session = session_of(spark)
        observation = Observation(f"export-run-{run}")
        decoding = options.decode.decoding
        size = F.lit(0) if decoding else F.coalesce(F.sum(record_bytes()), F.lit(0))
        frame = dated(_read(session, options, plan)).observe(
            observation, F.count(F.lit(1)).alias("records"), size.alias("bytes")
        )
        with progress.tracking(session, f"writing run {run}"):
            # Each task writes what it reads (no shuffle): a run adds a file per task and day.
            (
                frame.write.partitionBy(DATE_COLUMN)
                .option("maxRecordsPerFile", str(options.max_records_per_file))
                .mode("errorifexists")
                .parquet(str(run_dir))
            )
        metrics = observation.get
        moves = tuple(Move(rel, final_name(run, rel)) for rel in out.staged_files(run_dir))
        state = replace(committed_state(state, run, plan, moves), topic=options.topic)
        out.save(state)  # the commit point
        out.publish(run_dir, moves)
        out.save(published_state(state))
        out.discard(run_dir)
        summary.records = int(metrics["records"])
        summary.bytes = None if decoding else int(metrics["bytes"])
        summary.details.update(run=run, files=len(moves))
        return progress.finish(summary)


def _bound(r: OffsetRange, offset: int) -> int:
    """``offset`` as the read names it: a range with nothing to read reads from the latest offset
    to the latest, since its offset may be past the log end (a topic made again), which the
    data source refuses."""
    return offset if r.size else LATEST_CODE


def _read(spark: SparkSession, options: ExportOptions, plan: ExportPlan) -> DataFrame:
    """Exactly the planned ranges: every partition of the topics, each with its start and end."""
    reader = spark.read.format(NAME)
    if not options.decode.decoding:
        reader = reader.schema(SCHEMA)  # known: saves Spark asking the data source for it
    frame = (
        reader.options(**options.decode.as_options(), **options.credentials.as_options())
        .option("log", options.log)
        .option("topic", ",".join(sorted({r.topic for r in plan.ranges})))
        .option("startingOffsets", offsets_json({r.tp: _bound(r, r.start) for r in plan.ranges}))
        .option("endingOffsets", offsets_json({r.tp: _bound(r, r.end) for r in plan.ranges}))
        .option("maxRecordsPerPartition", str(options.max_records_per_partition))
        .load()
    )
    # A partition added since planning would be read to its end but is not in the plan's progress:
    # it waits for the next run.
    planned = [f"{r.topic}/{r.partition}" for r in plan.ranges]
    return frame.where(F.concat_ws("/", F.col("topic"), F.col("partition").cast("string")).isin(planned))


def dated(frame: DataFrame) -> DataFrame:
    """Add the UTC day of each record, whatever the session's time zone."""
    days = F.floor(F.unix_micros(F.col("timestamp")) / _MICROS_PER_DAY).cast("int")
    return frame.withColumn(DATE_COLUMN, F.date_add(F.lit("1970-01-01").cast("date"), days))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="a topic, a comma-separated list, or a pattern")
    parser.add_argument("--output", required=True, type=Path, help="the export's directory (created)")
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where partitions never exported before start: earliest (default) | latest | "
        "committed:<group> | JSON",
    )
    parser.add_argument(
        "--ending-offsets",
        default="latest",
        help="where this run stops: latest (default) | committed:<group> | JSON",
    )
    parser.add_argument(
        "--max-records-per-partition",
        type=int,
        default=DEFAULT_MAX_RECORDS_PER_PARTITION,
        help=f"split larger ranges into several Spark tasks (default {DEFAULT_MAX_RECORDS_PER_PARTITION})",
    )
    parser.add_argument(
        "--max-records-per-file",
        type=int,
        default=DEFAULT_MAX_RECORDS_PER_FILE,
        help=f"start a new Parquet file past this many records (default {DEFAULT_MAX_RECORDS_PER_FILE})",
    )
    add_decode_arguments(parser)


def options_from(args: argparse.Namespace) -> ExportOptions:
    return ExportOptions(
        log=args.log,
        topic=args.topic,
        output=args.output,
        coordinator=args.coordinator,
        starting=parse_offset_spec(args.starting_offsets, option="--starting-offsets"),
        ending=parse_offset_spec(args.ending_offsets, option="--ending-offsets"),
        max_records_per_partition=args.max_records_per_partition,
        max_records_per_file=args.max_records_per_file,
        decode=decode_options_from(args),
        credentials=credentials.from_arguments(args),
    )


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    """The data source's decoding options as flags (``decode_options`` says what they mean)."""
    group = parser.add_argument_group("decoded columns (the schema registry's formats)")
    formats = (BINARY, *FORMATS)
    for side in ("value", "key"):
        group.add_argument(
            f"--{side}-format",
            choices=formats,
            default=BINARY,
            help=f"decode the {side} into a nested column (default {BINARY}: the stored bytes)",
        )
        group.add_argument(f"--{side}-schema-id", type=int, help=f"the {side}'s reader schema, by id")
        group.add_argument(
            f"--{side}-subject", help=f"the {side}'s reader schema's subject (default <topic>-{side})"
        )
        group.add_argument(
            f"--{side}-schema-version", default="latest", help="of that subject (default latest)"
        )
    group.add_argument(
        "--schema-registry-url",
        help="ask this registry (e.g. http://gateway:8082/schema-registry) instead of reading the "
        "registry's topic in the log",
    )
    group.add_argument("--schema-registry-topic", help="the registry's topic in the log (default _schemas)")
    group.add_argument("--schema-registry-user", help="HTTP Basic user of --schema-registry-url")
    group.add_argument(
        "--schema-registry-password",
        help=f"its password (default: ${PASSWORD_ENV}, which keeps it off the command line)",
    )
    group.add_argument("--schema-registry-ca-file", help="CA bundle to verify an https registry with")
    group.add_argument(
        "--on-decode-error",
        choices=ON_DECODE_ERROR,
        default="fail",
        help="fail (default): the run fails, naming the record; null: the column is null, "
        "<column>_error says why",
    )


def decode_options_from(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> DecodeOptions:
    """The decoding flags as the data source's options, checked (``OptionError``)."""
    env = os.environ if env is None else env
    options: dict[str, str] = {}
    sides: tuple[Side, ...] = ("key", "value")
    for side in sides:
        options[f"{side}format"] = getattr(args, f"{side}_format")
        for flag, option in (("schema_id", "schemaid"), ("subject", "subject")):
            given = getattr(args, f"{side}_{flag}")
            if given is not None:
                options[f"{side}{option}"] = str(given)
        if getattr(args, f"{side}_schema_version") != "latest":
            options[f"{side}schemaversion"] = getattr(args, f"{side}_schema_version")
    password = args.schema_registry_password or env.get(PASSWORD_ENV)
    for option, given in (
        ("schemaregistryurl", args.schema_registry_url),
        ("schemaregistrytopic", args.schema_registry_topic),
        ("schemaregistryuser", args.schema_registry_user),
        ("schemaregistrypassword", password if args.schema_registry_url else None),
        ("schemaregistrycafile", args.schema_registry_ca_file),
        ("ondecodeerror", args.on_decode_error),
    ):
        if given is not None:
            options[option] = given
    return DecodeOptions.parse(options)
