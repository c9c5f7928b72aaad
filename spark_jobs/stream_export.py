"""The stream-export job: the export's streaming twin, writing records to Parquet as they arrive.

    python -m spark_jobs stream-export --log ./data --topic orders --output ./stream/orders
    python -m spark_jobs stream-export --log ./data --topic orders --output ./stream/orders --available-now

Reads the topics with ``spark.readStream.format("brokergate")``
(``stream_source``) and writes each micro-batch into ``--output`` with
Spark's Parquet file sink: the export's columns (the data source's, decoded
with ``--value-format`` / ``--key-format``), partitioned by ``date=YYYY-MM-DD``
(the UTC day of the record's timestamp). The stream's offsets live in the
checkpoint (``_brokergate/checkpoint/`` by default) and the sink lists the
files of every committed micro-batch in ``_spark_metadata/``, so a job stopped
or killed at any point and started again goes on where it stopped, and a Spark
reader of the output sees every record exactly once.

It runs a micro-batch every ``--trigger`` seconds until SIGTERM or SIGINT,
which stop the query (``query.stop()``) and end the job with status 0; with
``--available-now`` it exports what the topics hold when it starts and stops.
Progress is a line per micro-batch on stderr; the summary, at the end, counts
what this run wrote. One run at a time per output directory (a lock in
``_brokergate/``), and never into a batch export's output: the sink's
metadata would hide that export's files from readers.
"""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery
from pyspark.sql.streaming.listener import StreamingQueryProgress

from . import credentials
from .credentials import BackendCredentials
from .datasource import NAME, record_bytes
from .decode_options import DecodeOptions
from .export import (
    DATE_COLUMN,
    DEFAULT_MAX_RECORDS_PER_FILE,
    add_decode_arguments,
    dated,
    decode_options_from,
)
from .export_state import META_DIR, STATE_FILE
from .lock import exclusive
from .offsets import OptionError, parse_offset_spec
from .plan import check_topics
from .progress import Progress, Summary
from .session import SessionSource, session_of

DEFAULT_TRIGGER_S: Final = 10.0
CHECKPOINT_DIR: Final = "checkpoint"
LOCK_FILE: Final = "stream-export.lock"
METRICS: Final = "stream-export"  # the name of the observed metrics of each micro-batch
POLL_S: Final = 1  # how often the driver looks at the query's progress and at a stop request
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True, slots=True)
class StreamExportOptions:
    """What one run exports, where, and how often: the job's flags, checked."""

    log: str
    topic: str
    output: Path
    checkpoint: Path | None = None  # default: _brokergate/checkpoint in the output
    coordinator: str | None = None
    starting_offsets: str = "earliest"  # the data source's startingOffsets, checked
    trigger_s: float | None = DEFAULT_TRIGGER_S  # None: --available-now
    max_offsets_per_trigger: int | None = None
    max_records_per_file: int = DEFAULT_MAX_RECORDS_PER_FILE
    decode: DecodeOptions = field(default_factory=DecodeOptions)
    credentials: BackendCredentials = field(default_factory=BackendCredentials)

    @property
    def checkpoint_dir(self) -> Path:
        return self.checkpoint or self.output / META_DIR / CHECKPOINT_DIR


def run_stream_export(
    spark: SessionSource,
    options: StreamExportOptions,
    progress: Progress | None = None,
    *,
    stop: threading.Event | None = None,
) -> Summary:
    """Run the query until it has exported what there is (``--available-now``), or until ``stop``
    is set or a stop signal arrives; returns what this run wrote."""
    progress = progress or Progress("stream-export")
    stop = stop or threading.Event()
    check_topics(options.log, options.topic, options.coordinator, options.credentials)
    meta = options.output / META_DIR
    if (meta / STATE_FILE).exists():
        raise ValueError(
            f"{options.output} is the output of a batch export; stream-export into a directory of its own"
        )
    with exclusive(meta / LOCK_FILE, f"a stream-export into {options.output}"), stopped_by_signals(stop):
        session = session_of(spark)
        tally = Tally()
        how = (
            "what there is now"
            if options.trigger_s is None
            else f"a micro-batch every {options.trigger_s:g}s"
        )
        progress.say(f"exporting {options.topic} to {options.output}: {how}")
        watch(_start(_frame(session, options), options), tally, progress, stop)
    summary = Summary(
        "stream-export",
        records=tally.records,
        bytes=None if options.decode.decoding else tally.bytes,
        details={"batches": tally.batches, "output": str(options.output)},
    )
    return progress.finish(summary)


def watch(query: StreamingQuery, tally: Tally, progress: Progress, stop: threading.Event) -> None:
    """Report ``query``'s micro-batches until it ends or ``stop`` is set, then stop it; raises
    what made it fail."""
    try:
        while not query.awaitTermination(POLL_S):
            tally.report(query, progress)
            if stop.is_set():
                progress.say("stopping the query (a micro-batch under way is written again by the next run)")
                break
    finally:
        query.stop()
    tally.report(query, progress)
    error = query.exception()
    if error is not None:
        raise error


class StreamedTopics(Protocol):
    """What a streaming job reads: its options' fields ``read_stream`` takes."""

    @property
    def log(self) -> str: ...
    @property
    def topic(self) -> str: ...
    @property
    def starting_offsets(self) -> str: ...
    @property
    def coordinator(self) -> str | None: ...
    @property
    def max_offsets_per_trigger(self) -> int | None: ...
    @property
    def credentials(self) -> BackendCredentials: ...


def read_stream(
    spark: SparkSession,
    options: StreamedTopics,
    more: Mapping[str, str] | None = None,
) -> DataFrame:
    """A streaming job's topics as a stream: its log, coordinator, start, rate and credentials,
    and the data source's options ``more`` gives."""
    reader = (
        spark.readStream.format(NAME)
        .options(**(more or {}), **options.credentials.as_options())
        .option("log", options.log)
        .option("topic", options.topic)
        .option("startingOffsets", options.starting_offsets)
    )
    if options.coordinator:
        reader = reader.option("coordinator", options.coordinator)
    if options.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(options.max_offsets_per_trigger))
    return reader.load()


def _frame(spark: SparkSession, options: StreamExportOptions) -> DataFrame:
    """The topics as a stream with the export's columns, each micro-batch's size observed."""
    size = F.lit(0) if options.decode.decoding else F.coalesce(F.sum(record_bytes()), F.lit(0))
    frame = dated(read_stream(spark, options, options.decode.as_options()))
    return frame.observe(METRICS, F.count(F.lit(1)).alias("records"), size.alias("bytes"))


def _start(frame: DataFrame, options: StreamExportOptions) -> StreamingQuery:
    writer = (
        frame.writeStream.format("parquet")
        .partitionBy(DATE_COLUMN)
        .option("path", str(options.output))
        .option("checkpointLocation", str(options.checkpoint_dir))
        .option("maxRecordsPerFile", str(options.max_records_per_file))
    )
    return start_query(writer, options.trigger_s)


class Tally:
    """What the query's progress reports say this run wrote, each micro-batch counted once, by
    the metrics the query observes under ``metrics``."""

    def __init__(self, metrics: str = METRICS) -> None:
        self.metrics = metrics
        self.seen: set[tuple[int, str]] = set()
        self.records = 0
        self.bytes = 0
        self.batches = 0

    def report(self, query: StreamingQuery, progress: Progress) -> None:
        updates = query.recentProgress  # the last 100 (spark.sql.streaming.numRecentProgressUpdates)
        # Only what Spark still holds is remembered: bounded, however long the query runs.
        seen, self.seen = self.seen, {(u.batchId, u.timestamp) for u in updates}
        for update in updates:
            if (update.batchId, update.timestamp) in seen:
                continue
            records, size = _written(update, self.metrics)
            if records == 0:  # an idle trigger, or a micro-batch that found nothing new
                continue
            self.records += records
            self.bytes += size
            self.batches += 1
            progress.say(
                f"micro-batch {update.batchId}: {records} records written ({progress.elapsed():.0f}s)"
            )


def _written(update: StreamingQueryProgress, name: str) -> tuple[int, int]:
    metrics: Any = update.observedMetrics.get(name)
    if metrics is None:
        return update.numInputRows, 0
    return int(metrics["records"] or 0), int(metrics["bytes"] or 0)


@contextmanager
def stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` for the block (a second one interrupts at once); only the
    main thread can take signals, so elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="a topic, a comma-separated list, or a pattern")
    parser.add_argument("--output", required=True, type=Path, help="the export's directory (created)")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        help=f"the query's checkpoint (default <output>/{META_DIR}/{CHECKPOINT_DIR})",
    )
    add_stream_arguments(parser, "export")
    parser.add_argument(
        "--max-records-per-file",
        metavar="N",
        default=str(DEFAULT_MAX_RECORDS_PER_FILE),
        help=f"start a new Parquet file past this many records (default {DEFAULT_MAX_RECORDS_PER_FILE})",
    )
    add_decode_arguments(parser)


def add_stream_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    """The flags of every streaming job: where it starts, and how often a micro-batch runs."""
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help="where the first run starts: earliest (default) | latest | committed:<group> | JSON; "
        "later runs go on from the checkpoint",
    )
    parser.add_argument(
        "--trigger",
        metavar="SECONDS",
        help=f"start a micro-batch every SECONDS (default {DEFAULT_TRIGGER_S:g}; 0: one after another)",
    )
    parser.add_argument(
        "--available-now", action="store_true", help=f"{verb} what the topics hold now, then stop"
    )
    parser.add_argument("--max-offsets-per-trigger", metavar="N", help="at most N records a micro-batch")


def stream_flags_from(args: argparse.Namespace) -> tuple[float | None, int | None]:
    """``add_stream_arguments``' flags, checked: the trigger's seconds (None: available now) and
    the most records a micro-batch reads (None: no bound)."""
    parse_offset_spec(args.starting_offsets, option="--starting-offsets")
    if args.available_now and args.trigger is not None:
        raise OptionError("--trigger and --available-now: give one or the other")
    trigger = None if args.available_now else seconds_flag(args.trigger)
    limit = (
        None
        if args.max_offsets_per_trigger is None
        else count_flag(args.max_offsets_per_trigger, "--max-offsets-per-trigger")
    )
    return trigger, limit


def start_query(writer: DataStreamWriter, trigger_s: float | None) -> StreamingQuery:
    """``writer`` started with the job's trigger: every ``trigger_s`` seconds, or available now."""
    if trigger_s is None:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=f"{int(trigger_s * 1000)} milliseconds").start()


def options_from(args: argparse.Namespace) -> StreamExportOptions:
    """The flags, checked; ``OptionError`` names a bad one."""
    trigger, limit = stream_flags_from(args)
    return StreamExportOptions(
        log=args.log,
        topic=args.topic,
        output=args.output,
        checkpoint=args.checkpoint,
        coordinator=args.coordinator,
        starting_offsets=args.starting_offsets,
        trigger_s=trigger,
        max_offsets_per_trigger=limit,
        max_records_per_file=count_flag(args.max_records_per_file, "--max-records-per-file"),
        decode=decode_options_from(args),
        credentials=credentials.from_arguments(args),
    )


def seconds_flag(raw: str | None) -> float:
    if raw is None:
        return DEFAULT_TRIGGER_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise OptionError(f"--trigger: {raw!r} is not a number of seconds")
    return seconds


def count_flag(raw: str, flag: str) -> int:
    if not raw.strip().isdigit() or int(raw) < 1:
        raise OptionError(f"{flag}: {raw!r} is not a positive whole number")
    return int(raw)
