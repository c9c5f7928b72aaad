"""The stats job, and the jobs' command line (help, bad options, errors in one line)."""

from __future__ import annotations

import io
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from service.core.models import NewRecord
from spark_jobs.__main__ import spark_error_message
from spark_jobs.offsets import OptionError
from spark_jobs.progress import Progress
from spark_jobs.stats import StatsOptions, run_stats

from .helpers import TestLog

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp((T0 + seconds * 1000) / 1000, UTC)


def test_per_key_counts_and_bytes_over_a_window(spark: SparkSession, log: TestLog, tmp_path: Path) -> None:
    topic = log.create_topic(2)
    log.produce(topic, 0, [NewRecord(b"alice", b"x" * 10, (), T0 + i * 1000) for i in range(4)])
    log.produce(topic, 1, [NewRecord(b"bob", b"yy", (("h", b"12"),), T0 + i * 1000) for i in range(6)])
    log.produce(topic, 1, [NewRecord(None, b"z", (), T0 + 1000)])
    out = tmp_path / "stats"
    summary_out = io.StringIO()
    rows = run_stats(
        spark,
        StatsOptions(log=log.url, topic=topic, since=at(1), until=at(5), output=str(out)),
        Progress("stats", out=io.StringIO(), summary_out=summary_out),
    )
    got = {(bytes(r["key"]) if r["key"] is not None else None): (r["records"], r["bytes"]) for r in rows}
    # seconds 1..4: alice's 1..3 (5 + 10 bytes each), bob's 1..4 (3 + 2 + 1 + 2 bytes each), the keyless one
    assert got == {b"alice": (3, 45), b"bob": (4, 32), None: (1, 1)}
    assert [r["key"] for r in rows][:1] == [b"bob"]  # busiest first
    assert "stats: 8 records, 78 bytes" in summary_out.getvalue()
    written = spark.read.parquet(str(out)).collect()
    assert len(written) == 3 and {r["window_start"].year for r in written} == {2023}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_jobs", *args], capture_output=True, text=True, timeout=120
    )


def test_every_job_has_help_and_bad_options_fail_in_one_line() -> None:
    top = run_cli("--help")
    assert top.returncode == 0 and all(job in top.stdout for job in ("export", "lag", "stats"))
    export = run_cli("export", "--help")
    assert export.returncode == 0
    assert (
        "--starting-offsets" in export.stdout
        and "--master" in export.stdout
        and "exactly once" in export.stdout
    )
    bad = run_cli("export", "--topic", "t", "--output", "o", "--ending-offsets", "tomorrow")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "spark_jobs: error: --ending-offsets: 'tomorrow' is not earliest, latest, committed:<group> or "
        'per-partition JSON (e.g. {"orders": {"0": 42}})'
    ]


def test_spark_errors_are_cut_down_to_their_cause() -> None:
    raw = Exception(
        "[PYTHON_DATA_SOURCE_ERROR] Failed to plan Python data source read: "
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "spark_jobs.offsets.OptionError: topic: no such topic: nope\n"
        " SQLSTATE: 38000"
    )
    assert spark_error_message(raw) == "spark_jobs.offsets.OptionError: topic: no such topic: nope"


def test_a_log_or_topic_that_is_not_there_fails_before_spark_starts(tmp_path: Path) -> None:
    def no_spark() -> SparkSession:
        raise AssertionError("Spark was started")

    window = {"since": at(0), "until": at(1)}
    with pytest.raises(FileNotFoundError, match="is not a brokergate data dir"):
        run_stats(no_spark, StatsOptions(log=str(tmp_path), topic="t", **window))
    (tmp_path / "topics").mkdir()
    with pytest.raises(OptionError, match="topic: no such topic: t"):
        run_stats(no_spark, StatsOptions(log=str(tmp_path), topic="t", **window))
