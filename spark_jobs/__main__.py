"""``python -m spark_jobs <export|lag|stats|stream-export> [options]``: run one job on Spark.

Also the script spark-submit runs (``spark-submit … spark_jobs/__main__.py export …``),
hence absolute imports. Exit status: 0 done, 1 the job failed, 2 bad options,
75 another run of the job holds its lock (try again later).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.errors import PySparkException

from service.errors import GatewayError
from spark_jobs import export, lag, stats, stream_copy, stream_export
from spark_jobs.export_state import CorruptState
from spark_jobs.lock import EXIT_BUSY, Busy
from spark_jobs.progress import Progress
from spark_jobs.session import LazySession, add_common_arguments, parse_conf


@dataclass(frozen=True, slots=True)
class Job:
    help: str
    doc: str | None
    add_arguments: Callable[[argparse.ArgumentParser], None]
    options_from: Callable[[argparse.Namespace], Any]
    run: Callable[..., Any]


JOBS: dict[str, Job] = {
    "export": Job(
        "incremental, exactly-once export of topics to Parquet partitioned by date",
        export.__doc__,
        export.add_arguments,
        export.options_from,
        export.run_export,
    ),
    "lag": Job(
        "committed offset vs log end per group and partition",
        lag.__doc__,
        lag.add_arguments,
        lag.options_from,
        lag.run_lag,
    ),
    "stats": Job(
        "per-key record counts and bytes over a time window",
        stats.__doc__,
        stats.add_arguments,
        stats.options_from,
        stats.run_stats,
    ),
    "stream-export": Job(
        "continuous, exactly-once export of topics to Parquet partitioned by date (Structured Streaming)",
        stream_export.__doc__,
        stream_export.add_arguments,
        stream_export.options_from,
        stream_export.run_stream_export,
    ),
    "stream-copy": Job(
        "continuous, exactly-once copy of topics' records (those --where selects) into a topic, "
        "through a gateway (Structured Streaming)",
        stream_copy.__doc__,
        stream_copy.add_arguments,
        stream_copy.options_from,
        stream_copy.run_stream_copy,
    ),
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m spark_jobs", description="brokergate batch jobs on Spark.")
    sub = p.add_subparsers(dest="job", required=True, metavar="{" + ",".join(JOBS) + "}")
    for name, job in JOBS.items():
        jp = sub.add_parser(
            name, help=job.help, description=job.doc, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        add_common_arguments(jp)
        job.add_arguments(jp)
    return p


def spark_error_message(exc: Exception) -> str:
    """The line that says what went wrong in a Spark error (often a Python traceback from a task)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    causes = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    return causes[-1] if causes else (lines[0] if lines else type(exc).__name__)


def _fail(message: str, status: int) -> int:
    print(f"spark_jobs: error: {message}", file=sys.stderr)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    job = JOBS[args.job]
    try:
        conf = parse_conf(args.conf)
        options = job.options_from(args)
    except ValueError as exc:  # OptionError included
        return _fail(str(exc), 2)
    progress = Progress(args.job)
    spark = LazySession(f"brokergate-{args.job}", args.master, conf)
    try:
        job.run(spark, options, progress)
    except Busy as exc:
        return _fail(str(exc), EXIT_BUSY)
    except (ValueError, OSError, GatewayError, CorruptState) as exc:
        return _fail(str(exc), 1)
    except PySparkException as exc:
        return _fail(spark_error_message(exc), 1)
    except KeyboardInterrupt:
        return 130
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
