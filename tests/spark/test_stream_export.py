"""``python -m spark_jobs stream-export`` on a real local Spark, over the embedded log.

Runs with ``--available-now`` happen in the suite's session (a JVM per run would cost seconds
each); the continuous run of the page's ``Continuous export`` block is a process of its own,
which the test feeds new records, then stops with SIGTERM as the page says, and whose output
the block's ``--available-now`` run then carries on.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from spark_jobs import stream_export
from spark_jobs.__main__ import main, parser
from spark_jobs.lock import EXIT_BUSY, exclusive
from tests.e2e.docs_blocks import claim, shell_env

from .helpers import TestLog, records, run_job
from .test_docs_commands import commands

DEADLINE_S = 120.0  # how long a condition may take before the test gives up: never reached when all is well
# The suite's own JVM settings for the job's process: a faster start, one core, no UI.
QUIET_SPARK = [
    "--master",
    "local[1]",
    "--conf",
    "spark.ui.enabled=false",
    "--conf",
    "spark.sql.shuffle.partitions=1",
    "--conf",
    "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
]


def embedded(tmp_path: Path) -> TestLog:
    data = tmp_path / "data"
    (data / "topics").mkdir(parents=True)
    return TestLog("embedded", str(data), tmp_path)


def exported(spark: SparkSession, output: Path) -> list[tuple[str, int, int, bytes]]:
    """What a Spark reader sees in the output: (topic, partition, offset, value), sorted."""
    try:
        rows = spark.read.parquet(str(output)).select("topic", "partition", "offset", "value").collect()
    except AnalysisException:  # no micro-batch committed yet
        return []
    return sorted((r["topic"], r["partition"], r["offset"], bytes(r["value"])) for r in rows)


def expected(topic: str, per_partition: dict[int, int]) -> list[tuple[str, int, int, bytes]]:
    """Every record ``records()`` wrote: ``n`` of them in each partition, from offset 0."""
    return sorted((topic, p, i, f"v{i}".encode()) for p, n in per_partition.items() for i in range(n))


def wait_until(condition: Callable[[], bool], what: Callable[[], str]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what()}"
        time.sleep(0.5)


def test_available_now_runs_export_each_record_once_with_the_exports_columns(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = embedded(tmp_path)
    topic = log.create_topic(2)
    log.produce(topic, 0, records(5))
    log.produce(topic, 1, records(3))
    out = tmp_path / "out"
    job = ["stream-export", "--log", log.url, "--topic", topic, "--output", str(out), "--available-now"]
    first = run_job(spark, [*job, "--max-offsets-per-trigger", "5"])
    assert first.startswith("stream-export: 8 records, 48 bytes") and "batches=2" in first, first
    assert exported(spark, out) == expected(topic, {0: 5, 1: 3})

    log.produce(topic, 0, records(2, start=5))
    log.produce(topic, 1, records(1, start=3))
    again = run_job(spark, [*job, "--starting-offsets", "latest"])  # the checkpoint says where to go on
    assert again.startswith("stream-export: 3 records") and "batches=1" in again, again
    assert exported(spark, out) == expected(topic, {0: 7, 1: 4})
    assert run_job(spark, job).startswith("stream-export: 0 records")  # nothing new: nothing written

    # the export's columns, in the export's date directories (records() stamps 2023-11-14 UTC)
    frame = spark.read.parquet(str(out))
    assert set(frame.columns) >= {
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "timestamp",
        "headers",
        "date",
    }
    assert [d.name for d in out.glob("date=*")] == ["date=2023-11-14"]
    assert (out / "_brokergate" / "checkpoint").is_dir()


def test_the_page_runs_a_stream_that_sees_new_records_and_stops_on_sigterm(
    spark: SparkSession, tmp_path: Path
) -> None:
    log = embedded(tmp_path)
    asyncio.run(log._create("orders", 2))
    log.produce("orders", 0, records(3))
    log.produce("orders", 1, records(2))
    with claim("docs/spark.md", "Continuous export") as section:
        continuous, available_now = commands(section.block(0), tmp_path)
    assert continuous[:3] == ["python", "-m", "spark_jobs"] and "--trigger" in continuous
    out = tmp_path / "stream" / "orders"
    stderr = tmp_path / "job.err"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(
            [*continuous, *QUIET_SPARK],
            stdout=subprocess.PIPE,
            stderr=err,
            env=shell_env(),
            cwd=tmp_path,
            text=True,
        )
    try:

        def running(condition: Callable[[], bool]) -> Callable[[], bool]:
            return lambda: proc.poll() is None and condition()

        wait_until(running(lambda: len(exported(spark, out)) == 5), stderr.read_text)
        # records written after the job started reach the output, at a later micro-batch
        log.produce("orders", 0, records(2, start=3))
        log.produce("orders", 1, records(2, start=2))
        wait_until(
            running(lambda: exported(spark, out) == expected("orders", {0: 5, 1: 4})), stderr.read_text
        )
        proc.send_signal(signal.SIGTERM)
        summary, _ = proc.communicate(timeout=DEADLINE_S)
        assert proc.returncode == 0, stderr.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert summary.startswith("stream-export: 9 records"), summary
    assert "micro-batch 0: 5 records written" in stderr.read_text()

    # stopped and run again: it goes on where it stopped, and each record is in the output once
    log.produce("orders", 1, records(1, start=4))
    assert available_now[3:] == [*continuous[3:-2], "--available-now"]
    assert run_job(spark, available_now[3:]).startswith("stream-export: 1 records")
    assert exported(spark, out) == expected("orders", {0: 5, 1: 5})


def test_bad_flags_and_a_second_run_fail_in_one_line_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["stream-export", "--log", str(tmp_path), "--topic", "t", "--output", str(tmp_path / "o")]
    for flags, says in [
        (["--trigger", "5", "--available-now"], "--trigger and --available-now: give one or the other"),
        (["--trigger", "soon"], "--trigger: 'soon' is not a number of seconds"),
        (["--max-offsets-per-trigger", "0"], "--max-offsets-per-trigger: '0' is not a positive whole number"),
        (["--starting-offsets", "tomorrow"], "--starting-offsets: 'tomorrow' is not earliest"),
    ]:
        assert main([*base, *flags]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"spark_jobs: error: {says}") and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()
    log = embedded(tmp_path)
    base[2] = log.url
    assert main(base) == 1
    assert capsys.readouterr().err == "spark_jobs: error: topic: no such topic: t\n"
    assert not (tmp_path / "o").exists()
    base[4] = log.create_topic(1)
    with exclusive(tmp_path / "o" / "_brokergate" / "stream-export.lock", "a run"):
        assert main(base) == EXIT_BUSY
    assert "a stream-export into" in capsys.readouterr().err


def test_a_log_that_is_not_there_fails_in_one_line_before_spark_starts_writing_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o"
    words = ["--log", str(tmp_path / "nowhere"), "--topic", "t"]
    assert main(["stream-export", *words, "--output", str(out)]) == 1
    said = f"spark_jobs: error: {tmp_path / 'nowhere'} is not a brokergate data dir (it has no topics/)\n"
    assert capsys.readouterr().err == said
    copy = ["stream-copy", *words, "--to", "u", "--checkpoint", str(out), "--gateway", "http://127.0.0.1:9"]
    assert main(copy) == 1
    assert capsys.readouterr().err == said
    assert not out.exists()

    def no_spark() -> SparkSession:
        raise AssertionError("Spark was started")

    options = stream_export.options_from(parser().parse_args(["stream-export", *words, "--output", str(out)]))
    with pytest.raises(FileNotFoundError, match="is not a brokergate data dir"):
        stream_export.run_stream_export(no_spark, options)


def test_a_batch_exports_output_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    log = embedded(tmp_path)
    topic = log.create_topic(1)
    log.produce(topic, 0, records(1))
    out = tmp_path / "out"
    run_job(spark, ["export", "--log", log.url, "--topic", topic, "--output", str(out)])
    with pytest.raises(ValueError, match="is the output of a batch export"):
        run_job(spark, ["stream-export", "--log", log.url, "--topic", topic, "--output", str(out)])
