"""The stream-copy job: records of topics copied into another topic as they arrive, each once.

    python -m spark_jobs stream-copy --log ./data --topic orders --to big-orders \\
        --where "length(value) > 100" --gateway http://127.0.0.1:8082 --checkpoint ./big-orders-copy

Reads the topics with ``spark.readStream.format("brokergate")`` (``stream_source``), keeps the
records ``--where`` selects (a Spark SQL condition over the source's columns: ``topic``,
``partition``, ``offset``, ``timestamp``, ``key``, ``value``, ``headers``), and writes them with
the sink (``sink``) through the gateway ``--gateway`` names into ``--to``: key, value, headers
and timestamp as they were, the partition the gateway picks by key (``--keep-partitions``: the
same partition). The stream's offsets live in ``--checkpoint`` and every request the sink sends
is idempotent, so a run stopped or killed at any point and started again goes on where it stopped
and the target holds each selected record once.

It runs a micro-batch every ``--trigger`` seconds until SIGTERM or SIGINT (status 0), or, with
``--available-now``, copies what the topics hold when it starts and stops; a line per micro-batch
on stderr, a summary at the end. One run at a time per checkpoint. The gateway is reached as the
command-line tools reach it: ``--gateway`` or ``$BROKERGATE_URL``, and the credentials of
``--gateway-user`` / ``$BROKERGATE_USER`` with ``--gateway-password-file`` /
``$BROKERGATE_PASSWORD``, or of ``--gateway-token-file`` / ``$BROKERGATE_TOKEN``.
"""

from __future__ import annotations

import argparse
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import credentials
from .credentials import BackendCredentials
from .datasource import NAME, record_bytes
from .lock import exclusive
from .offsets import OptionError
from .plan import check_topics
from .progress import Progress, Summary
from .session import SessionSource, session_of
from .sink_options import SinkOptions
from .stream_export import (
    Tally,
    add_stream_arguments,
    read_stream,
    start_query,
    stopped_by_signals,
    stream_flags_from,
    watch,
)

METRICS: Final = "stream-copy"
LOCK_FILE: Final = "brokergate-stream-copy.lock"
# flag -> the sink's option it gives
_ACCESS_FLAGS: Final = {
    "gateway": "gateway",
    "gateway_user": "gatewayUsername",
    "gateway_password_file": "gatewayPasswordFile",
    "gateway_token_file": "gatewayTokenFile",
    "gateway_cacert": "gatewayCaFile",
    "gateway_cert": "gatewayCertFile",
    "gateway_key": "gatewayKeyFile",
}


@dataclass(frozen=True, slots=True)
class StreamCopyOptions:
    """What one run copies, where to, and how often: the job's flags, checked."""

    log: str
    topic: str
    to: str
    checkpoint: Path
    sink: dict[str, str]  # the sink's options: the target, the gateway and how to sign in to it
    where: str | None = None
    keep_partitions: bool = False
    coordinator: str | None = None
    starting_offsets: str = "earliest"
    trigger_s: float | None = None  # None: --available-now
    max_offsets_per_trigger: int | None = None
    credentials: BackendCredentials = field(default_factory=BackendCredentials)


def run_stream_copy(
    spark: SessionSource,
    options: StreamCopyOptions,
    progress: Progress | None = None,
    *,
    stop: threading.Event | None = None,
) -> Summary:
    """Run the copy until it has copied what there is (``--available-now``), or until ``stop`` is
    set or a stop signal arrives; returns what this run wrote."""
    progress = progress or Progress("stream-copy")
    stop = stop or threading.Event()
    check_topics(options.log, options.topic, options.coordinator, options.credentials)
    options.checkpoint.mkdir(parents=True, exist_ok=True)
    lock = options.checkpoint / LOCK_FILE
    with exclusive(lock, f"a stream-copy with the checkpoint {options.checkpoint}"), stopped_by_signals(stop):
        tally = Tally(METRICS)
        every = options.trigger_s
        how = "what there is now" if every is None else f"a micro-batch every {every:g}s"
        progress.say(f"copying {options.topic} to {options.to}: {how}")
        writer = (
            _frame(session_of(spark), options)
            .writeStream.format(NAME)
            .options(**options.sink)
            .option("checkpointLocation", str(options.checkpoint))
        )
        watch(start_query(writer, options.trigger_s), tally, progress, stop)
    summary = Summary(
        "stream-copy",
        records=tally.records,
        bytes=tally.bytes,
        details={"batches": tally.batches, "to": options.to},
    )
    return progress.finish(summary)


def _frame(spark: SparkSession, options: StreamCopyOptions) -> DataFrame:
    """The records to copy, in the sink's columns, each micro-batch's size observed."""
    frame = read_stream(spark, options)
    if options.where:
        frame = frame.where(options.where)
    columns = ["key", "value", "headers", "timestamp"] + (["partition"] if options.keep_partitions else [])
    size = F.coalesce(F.sum(record_bytes()), F.lit(0))
    return frame.select(*columns).observe(METRICS, F.count(F.lit(1)).alias("records"), size.alias("bytes"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--topic", required=True, help="what to copy: a topic, a comma-separated list, or a pattern"
    )
    parser.add_argument("--to", required=True, help="the topic to copy into")
    parser.add_argument("--checkpoint", required=True, type=Path, help="the query's checkpoint directory")
    parser.add_argument(
        "--where", help="copy only the records this Spark SQL condition selects, e.g. \"key = 'eu'\""
    )
    parser.add_argument(
        "--keep-partitions",
        action="store_true",
        help="write each record to the partition it came from (default: the gateway's pick by key)",
    )
    add_stream_arguments(parser, "copy")
    access = parser.add_argument_group("the gateway the copy writes through")
    access.add_argument("--gateway", metavar="URL", help="its URL (default $BROKERGATE_URL)")
    access.add_argument("--gateway-user", metavar="NAME", help="HTTP Basic user (default $BROKERGATE_USER)")
    access.add_argument(
        "--gateway-password-file", metavar="FILE", help="a file holding the password ($BROKERGATE_PASSWORD)"
    )
    access.add_argument(
        "--gateway-token-file", metavar="FILE", help="a file holding a Bearer token (or $BROKERGATE_TOKEN)"
    )
    access.add_argument("--gateway-cacert", metavar="FILE", help="CA certificates to trust it with")
    access.add_argument("--gateway-cert", metavar="FILE", help="a client certificate (mutual TLS)")
    access.add_argument("--gateway-key", metavar="FILE", help="the client certificate's key, if apart")


def options_from(args: argparse.Namespace) -> StreamCopyOptions:
    """The flags, checked (the gateway's access as the sink will check it); ``OptionError``
    names a bad one."""
    trigger, limit = stream_flags_from(args)
    sink = {"topic": args.to}
    for flag, option in _ACCESS_FLAGS.items():
        given = getattr(args, flag)
        if given:  # a file as an absolute path: Spark's Python workers may run elsewhere
            sink[option] = given if flag == "gateway" else str(Path(given).resolve())
    try:
        SinkOptions.parse(sink)
    except OptionError as exc:
        raise OptionError(_as_flags(str(exc))) from None
    return StreamCopyOptions(
        log=args.log,
        topic=args.topic,
        to=args.to,
        checkpoint=args.checkpoint.resolve(),
        sink=sink,
        where=args.where,
        keep_partitions=args.keep_partitions,
        coordinator=args.coordinator,
        starting_offsets=args.starting_offsets,
        trigger_s=trigger,
        max_offsets_per_trigger=limit,
        credentials=credentials.from_arguments(args),
    )


def _as_flags(message: str) -> str:
    """A sink option's message in the words of this job's flags."""
    flags = {option: "--" + flag.replace("_", "-") for flag, option in _ACCESS_FLAGS.items()}
    flags["topic"] = "--to"
    flags["gatewayPassword"], flags["gatewayToken"] = "--gateway-password-file", "--gateway-token-file"
    message = re.sub(r"^(\w+):", lambda m: flags.get(m.group(1), m.group(1)) + ":", message)
    return re.sub(r"\bgateway[A-Z]\w*", lambda m: flags.get(m.group(0), m.group(0)), message)
