"""``python -m spark_jobs stream-copy`` on a real local Spark, through a running gateway.

The gateway runs in the test's event loop over an embedded data dir; the page's command runs in
the suite's Spark session, in a worker thread beside it (a JVM per run would cost seconds each),
its gateway URL the test's. What it copied is read back through a consumer of the gateway.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_jobs.__main__ import main
from spark_jobs.lock import EXIT_BUSY, exclusive
from tests.conftest import RunningGateway, start_gateway
from tests.e2e.docs_blocks import claim
from tests.helpers import STRING, consumer, create_topic, poll, poll_until, produce, subscribe

from .helpers import run_job
from .test_docs_commands import commands

DOCS_URL = "http://127.0.0.1:8082"


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path / "data")
    try:
        yield gw
    finally:
        await gw.client.aclose()
        await gw.stop()


async def everything(gw: RunningGateway, topic: str, count: int) -> list[tuple[str | None, str]]:
    """(key, value) of every record of ``topic``, once ``count`` arrived and nothing more came."""
    base = await consumer(gw.client, f"read-{uuid.uuid4().hex[:8]}")
    await subscribe(gw.client, base, topic)
    got = await poll_until(gw.client, base, count, fmt=STRING, deadline_s=30)
    got += await poll(gw.client, base, fmt=STRING, timeout=500)
    return [(r["key"], r["value"]) for r in sorted(got, key=lambda r: (r["partition"], r["offset"]))]


def order(customer: str, qty: int) -> dict[str, object]:
    return {"key": customer, "value": f'{{"customer": "{customer}", "qty": {qty}}}'}


async def test_the_pages_copy_runs_and_a_second_run_copies_only_what_came_since(
    spark: SparkSession, gateway: RunningGateway, tmp_path: Path
) -> None:
    await create_topic(gateway.client, "orders", 2)
    await produce(gateway.client, "orders", [order("ada", 1), order("bob", 2), order("ada", 3)])
    with claim("docs/spark.md", "Copying between topics") as section:
        (words,) = commands(section.block(0), tmp_path)
    assert words[:3] == ["python", "-m", "spark_jobs"] and DOCS_URL in words
    words = [gateway.url if w == DOCS_URL else w for w in words]
    words[words.index("--log") + 1] = str(tmp_path / "data")

    summary = await asyncio.to_thread(run_job, spark, words[3:])
    assert summary.startswith("stream-copy: 2 records, 64 bytes (64 B)"), summary
    assert summary.rstrip().endswith("batches=1, to=ada-orders"), summary
    copied = [order("ada", 1), order("ada", 3)]
    assert sorted(await everything(gateway, "ada-orders", 2)) == sorted(
        (o["key"], o["value"]) for o in copied
    )

    await produce(gateway.client, "orders", [order("bob", 4), order("ada", 5)])
    summary = await asyncio.to_thread(run_job, spark, words[3:])
    assert summary.startswith("stream-copy: 1 records"), summary
    copied.append(order("ada", 5))
    got = await everything(gateway, "ada-orders", 3)
    assert sorted(got) == sorted((o["key"], o["value"]) for o in copied)  # each once


def test_bad_flags_and_a_second_run_fail_in_one_line_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BROKERGATE_URL", raising=False)
    base = [
        "stream-copy",
        "--log",
        str(tmp_path),
        "--topic",
        "t",
        "--to",
        "u",
        "--checkpoint",
        str(tmp_path / "c"),
    ]
    gw = ["--gateway", "http://127.0.0.1:9"]
    for flags, says in [
        ([], "--gateway: name the gateway to write through"),
        ([*gw, "--gateway-user", "a"], "--gateway-user needs --gateway-password-file"),
        (
            [*gw, "--gateway-user", "a", "--gateway-password-file", str(tmp_path / "none")],
            "--gateway-password-file: cannot read",
        ),
        ([*gw, "--gateway-password-file", str(tmp_path)], "--gateway-password-file: cannot read"),
        ([*gw, "--trigger", "5", "--available-now"], "--trigger and --available-now: give one or the other"),
        (["--gateway", "ftp://x"], "--gateway: 'ftp://x' is not an http:// or https:// URL"),
    ]:
        if "--gateway-user" in flags:
            monkeypatch.delenv("BROKERGATE_PASSWORD", raising=False)
        assert main([*base, *flags]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"spark_jobs: error: {says}") and err.count("\n") == 1, err
    bad_to = [*base[:5], "--to", "../x", *base[7:], *gw]
    assert main(bad_to) == 2
    assert "--to: '../x' is not a topic name" in capsys.readouterr().err
    (tmp_path / "topics").mkdir()
    assert main([*base, *gw]) == 1
    assert capsys.readouterr().err == "spark_jobs: error: topic: no such topic: t\n"
    assert not (tmp_path / "c").exists()
    base[4] = "t.*"  # a pattern: it matches no topic yet
    with exclusive(tmp_path / "c" / "brokergate-stream-copy.lock", "a run"):
        assert main([*base, *gw]) == EXIT_BUSY
    assert "a stream-copy with the checkpoint" in capsys.readouterr().err
