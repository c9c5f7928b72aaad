"""``brokergate worker spark``: a real worker process runs the export on an interval and stops on SIGTERM."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from pyspark.sql import SparkSession

from spark_jobs.export import ExportOptions, run_export
from spark_jobs.lock import EXIT_BUSY
from spark_jobs.progress import Progress
from workers.spark import RunOutcome, SparkJobScheduler, lock_path_for, option_value

from .conftest import FAST_START_JVM
from .helpers import TestLog, records


def wait_for(path: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text(errors="replace")
        if found := re.search(pattern, text):
            return found
        assert proc.poll() is None, f"the worker exited with {proc.returncode}:\n{text}"
        assert time.monotonic() < deadline, f"no {pattern!r} in time:\n{text}"
        time.sleep(0.1)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_runs_on_an_interval_never_twice_at_once_and_stops_on_sigterm(
    spark: SparkSession, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    (data / "topics").mkdir(parents=True)
    log = TestLog("embedded", str(data), tmp_path)
    topic = log.create_topic(2)
    log.produce(topic, 0, records(30))
    log.produce(topic, 1, records(20))
    out = tmp_path / "export"
    worker = [sys.executable, "-m", "service", "worker", "spark", "--job", "export", "--every", "2s"]
    job = [
        *("--log", str(data), "--topic", topic, "--output", str(out), "--master", "local[1]"),
        *("--conf", "spark.ui.enabled=false", "--conf", f"spark.driver.extraJavaOptions={FAST_START_JVM}"),
    ]
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as sink:
        proc = subprocess.Popen([*worker, *job], stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_for(log_path, r"export run 1 started", proc)
        # A second worker for the same job and output refuses to start while the first one lives.
        second = subprocess.run([*worker, *job], capture_output=True, text=True, timeout=60)
        assert second.returncode == EXIT_BUSY
        assert "a worker for the export job is already running" in second.stderr

        wait_for(log_path, r"\[export\] run 1: 50 offsets", proc)
        log.produce(topic, 1, records(5, start=20))  # after run 1 planned: work for run 2
        wait_for(log_path, r"export run 1 succeeded in [\d.]+s", proc)
        assert "export: 50 records" in log_path.read_text()  # the job's own summary
        pid = int(wait_for(log_path, r"export run 2 started \(pid (\d+)\)", proc).group(1))
        wait_for(log_path, r"\[export\] writing run 2", proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    text = log_path.read_text()
    # Run 2 was writing when SIGTERM came; should it have just finished, it counts as done.
    assert re.search(r"export run 2 (ended by the worker's stop after|succeeded in) [\d.]+s", text), text
    assert "stopped after 2 run(s)" in text
    assert not group_alive(pid)  # the run's JVM and Python workers went with it

    # Nothing was exported twice, and the next run completes what the stopped one left.
    run_export(
        spark,
        ExportOptions(log=str(data), topic=topic, output=out),
        Progress("export", out=io.StringIO(), summary_out=io.StringIO()),
    )
    rows = spark.read.parquet(str(out)).select("partition", "offset").collect()
    counts = Counter((r["partition"], r["offset"]) for r in rows)
    assert set(counts) == {(0, o) for o in range(30)} | {(1, o) for o in range(25)}
    assert set(counts.values()) == {1}


def test_the_worker_lock_lives_with_the_output() -> None:
    assert lock_path_for("export", ["--output", "/x/out"]) == Path("/x/out/_brokergate/worker-export.lock")
    assert lock_path_for("lag", ["--output=/x/lag"]) == Path("/x/lag/_brokergate/worker-lag.lock")
    elsewhere = lock_path_for("lag", ["--log", "/x/data"])
    assert elsewhere.name.startswith("brokergate-worker-lag-")
    assert elsewhere != lock_path_for("lag", ["--log", "/y/data"])
    assert option_value(["--output", "a", "--output=b"], "--output") == "b"


def test_run_outcomes_are_told_apart(tmp_path: Path) -> None:
    scheduler = SparkJobScheduler(
        "lag", [], 60, lock_path=tmp_path / "w.lock", python=str(tmp_path / "no-such-python")
    )
    outcome = scheduler.run_once()
    assert outcome.returncode == 127 and "lag run 1 failed with exit status 127" in outcome.describe("lag")
    assert "skipped" in RunOutcome(2, EXIT_BUSY, 1.0, False).describe("lag")
    assert "succeeded in 1.0s" in RunOutcome(3, 0, 1.0, True).describe("lag")
    assert "ended by the worker's stop" in RunOutcome(4, -15, 1.0, True).describe("lag")
