"""The commands of docs/spark.md run as written, on a data dir a gateway wrote.

A gateway stores Avro orders (registering ``orders-value``) and a ``billing`` group's commit in
``./data``; then each ``python -m spark_jobs …`` line of the jobs' block is parsed by the jobs'
own parser and run in the suite's Spark session (a JVM per line would cost seconds each; its
relative paths are made absolute, as the session's Python workers do not share the test's
working directory), and
the scheduling block's ``brokergate worker spark`` runs as a process until its first run is
done, then is stopped with SIGTERM as the page says.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from pyspark.sql import SparkSession

from spark_jobs.__main__ import JOBS, parser
from spark_jobs.progress import Progress
from tests.e2e.docs_blocks import claim, shell_env
from tests.e2e.gateway_process import GatewayProcess

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "customer", "type": "string"}, {"name": "qty", "type": "int"}],
}


def write_orders(data: Path) -> None:
    """Three Avro orders in ``orders`` and the ``billing`` group's commit after the first two."""
    gw = GatewayProcess(data).start()
    try:
        avro = {"Content-Type": "application/vnd.kafka.avro.v2+json"}
        v2 = {"Content-Type": "application/vnd.kafka.v2+json"}
        values = [{"customer": c, "qty": q} for c, q in (("ada", 1), ("bob", 2), ("cy", 3))]
        body = {"value_schema": json.dumps(ORDER), "records": [{"key": None, "value": v} for v in values]}
        assert httpx.post(f"{gw.url}/topics/orders", headers=avro, json=body).status_code == 200
        commit = {"offsets": [{"topic": "orders", "partition": 0, "offset": 1}]}
        base = f"{gw.url}/consumers/billing/instances/b1"
        assert httpx.post(f"{gw.url}/consumers/billing", headers=v2, json={"name": "b1"}).status_code == 200
        assigned = {"partitions": [{"topic": "orders", "partition": 0}]}
        assert httpx.post(f"{base}/assignments", headers=v2, json=assigned).is_success
        assert httpx.post(f"{base}/offsets", headers=v2, json=commit).status_code == 200
    finally:
        gw.stop()


def commands(block: str, cwd: Path) -> list[list[str]]:
    """The block's commands as words, ``./`` paths made paths under ``cwd``."""
    joined = block.replace("\\\n", " ")
    lines = [shlex.split(line, comments=True) for line in joined.splitlines()]
    return [
        [word.replace("./", f"{cwd}/", 1) if word.startswith("./") else word for word in line]
        for line in lines
        if line
    ]


def test_the_jobs_and_the_worker_as_the_page_runs_them(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_orders(tmp_path / "data")
    with claim("docs/spark.md", "The jobs") as section:
        lines = commands(section.block(0), tmp_path)
    for words in lines:
        assert words[:3] == ["python", "-m", "spark_jobs"], words
        args = parser().parse_args(words[3:])
        job = JOBS[args.job]
        job.run(spark, job.options_from(args), Progress(args.job))
    out = capsys.readouterr().out
    assert "export: 3 records" in out
    assert "billing" in out and "orders" in out  # the lag table
    exported = spark.read.parquet(str(tmp_path / "exports/orders-avro")).select("value.customer").collect()
    assert sorted(row["customer"] for row in exported) == ["ada", "bob", "cy"]
    assert list((tmp_path / "lag-history").rglob("*.csv"))

    with claim("docs/spark.md", "Scheduling") as section:
        (worker,) = commands(section.block(0), tmp_path)
    log = tmp_path / "worker.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen(worker, stdout=sink, stderr=subprocess.STDOUT, env=shell_env(), cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        # everything is exported already: run 1 finds nothing new and does not start Spark
        while "export run 1 succeeded" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert "stopped after 1 run(s)" in log.read_text()
