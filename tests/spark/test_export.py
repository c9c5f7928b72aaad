"""The export job: every record exactly once across incremental runs, and across a run killed midway."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from service.core.models import NewRecord
from spark_jobs.export import ExportOptions, run_export
from spark_jobs.export_state import META_DIR, STATE_FILE
from spark_jobs.lock import Busy, exclusive
from spark_jobs.progress import Progress

from .helpers import TestLog, records

DAY_MS = 86_400_000


def quiet(job: str = "export") -> Progress:
    return Progress(job, out=io.StringIO(), summary_out=io.StringIO())


def visible_files(out: Path) -> list[Path]:
    """What a reader of the output sees: every file outside the hidden ``_brokergate`` directory."""
    return sorted(p for p in out.rglob("*") if p.is_file() and META_DIR not in p.relative_to(out).parts)


def exported(spark: SparkSession, out: Path) -> Counter[tuple[str, int, int]]:
    """How many times each record (topic, partition, offset) is in the published output."""
    rows = spark.read.parquet(str(out)).select("topic", "partition", "offset").collect()
    return Counter((r["topic"], r["partition"], r["offset"]) for r in rows)


def size(r: NewRecord) -> int:
    return len(r.key or b"") + len(r.value or b"") + sum(len(k) + len(v or b"") for k, v in r.headers)


def snapshot(out: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory with its size and mtime, but the lock (which names its last holder)."""
    return {
        str(p.relative_to(out)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in out.rglob("*")
        if p.suffix != ".lock"
    }


def test_incremental_runs_export_every_record_once(spark: SparkSession, log: TestLog, tmp_path: Path) -> None:
    topic = log.create_topic(2)
    # Two days of records on partition 0, so the output has two date directories.
    log.produce(topic, 0, records(6, step_ms=DAY_MS // 4))
    log.produce(topic, 1, records(3))
    out = tmp_path / "export"
    options = ExportOptions(log=log.url, topic=topic, output=out, max_records_per_partition=2)

    first = run_export(spark, options, quiet())
    assert (first.records, first.details["run"]) == (9, 1)
    assert first.bytes == sum(size(r) for r in [*records(6), *records(3)])
    log.produce(topic, 0, records(4, start=6, step_ms=DAY_MS // 4))
    second = run_export(spark, options, quiet())
    assert (second.records, second.details["run"]) == (4, 2)

    counts = exported(spark, out)
    expected = {(topic, 0, o) for o in range(10)} | {(topic, 1, o) for o in range(3)}
    assert set(counts) == expected and set(counts.values()) == {1}
    days = {datetime.fromtimestamp(r.timestamp / 1000, UTC).date() for r in records(10, step_ms=DAY_MS // 4)}
    assert {p.parent.name for p in visible_files(out)} == {f"date={d}" for d in days}
    filed = spark.read.parquet(str(out)).select("date", F.unix_millis("timestamp").alias("ms")).collect()
    # every record is filed under the UTC day of its timestamp
    assert all(r["date"] == datetime.fromtimestamp(r["ms"] / 1000, UTC).date() for r in filed)

    before = snapshot(out)
    again = run_export(spark, options, quiet())
    assert again.records == 0 and again.details["files"] == 0
    assert snapshot(out) == before  # a run with nothing new writes nothing, not even its progress


def test_a_second_export_into_the_same_output_is_refused_while_one_runs(
    spark: SparkSession, tmp_path: Path
) -> None:
    out = tmp_path / "export"
    with exclusive(out / META_DIR / "export.lock", "test"):
        with pytest.raises(Busy, match="already running"):
            run_export(spark, ExportOptions(log=str(tmp_path), topic="t", output=out), quiet())


def test_a_run_killed_midway_leaves_nothing_visible_and_the_next_run_completes_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    (data / "topics").mkdir(parents=True)
    log = TestLog("embedded", str(data), tmp_path)
    topic = log.create_topic(4)
    for p in range(4):
        log.produce(topic, p, records(500))
    out = tmp_path / "export"
    stderr_path = tmp_path / "killed-run.log"
    cmd = [
        sys.executable,
        "-m",
        "spark_jobs",
        "export",
        "--master",
        "local[1]",
        "--log",
        str(data),
        "--topic",
        topic,
        "--output",
        str(out),
        "--max-records-per-partition",
        "20",  # 100 tasks on one core: the run is still writing when it is killed
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    ]
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        # Until a progress line says some of the writing tasks are done.
        while not re.search(r"stage \d+: [1-9]\d*/\d+ tasks", stderr_path.read_text(errors="replace")):
            assert proc.poll() is None, stderr_path.read_text(errors="replace")
            assert time.monotonic() < deadline, stderr_path.read_text(errors="replace")
            time.sleep(0.1)
        assert proc.poll() is None
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert list((out / META_DIR / "staging").iterdir())  # it had started writing
    assert visible_files(out) == []
    assert not (out / META_DIR / STATE_FILE).exists()

    said = io.StringIO()
    progress = Progress("export", out=said, summary_out=io.StringIO())
    summary = run_export(spark, ExportOptions(log=str(data), topic=topic, output=out), progress)
    assert summary.records == 2000 and summary.details["run"] == 1
    assert "discarding run-00000001" in said.getvalue()
    counts = exported(spark, out)
    assert len(counts) == 2000 and set(counts.values()) == {1}
    assert list((out / META_DIR / "staging").iterdir()) == []
