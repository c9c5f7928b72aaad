"""The Python blocks of docs/spark.md run as written, one after the other, in the suite's session.

The page's blocks are one program a reader types into ``pyspark`` in order: the first builds the
session (``build_session`` hands back the one already running), the others use ``spark`` and
what the blocks before them made. They run on the data dir ``write_orders`` fills (three Avro
orders, the ``billing`` group's commit after the first two), their ``./`` paths made paths under
the test's directory (the session's Python workers do not share its working directory), and the
sink's ``http://127.0.0.1:8082`` the gateway's address. The credentials block names a Kafka
and a ZooKeeper this machine does not have: it runs to ``load()``, which checks its options and
reads its password and CA files (the test's, at the page's paths under its directory) and
connects to nothing, so it shows that the page names options the source takes, with values it
accepts. After each block the test looks at what it made.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.e2e.docs_blocks import Section, claim
from tests.e2e.gateway_process import GatewayProcess
from tests.spark.test_docs_commands import write_orders

PAGE = "docs/spark.md"
GATEWAY = "http://127.0.0.1:8082"
SECRETS = ("/run/secrets/kafka-password", "/etc/brokergate/kafka-ca.pem", "/run/secrets/zookeeper-password")


def block(part: AbstractContextManager[Section], tmp: Path) -> str:
    """The one Python block of the section ``part`` claims, its ``./`` paths under ``tmp``."""
    with part as section:
        (text,) = section.texts()
    return text.replace('"./', f'"{tmp}/')


def run(text: str, scope: dict[str, Any], name: str) -> None:
    exec(compile(text, f"{PAGE} ({name})", "exec"), scope)


def read_all(query: StreamingQuery, count: int) -> None:
    """Wait until ``query``'s micro-batches read ``count`` records."""
    deadline = time.monotonic() + 120
    while sum(p["numInputRows"] for p in query.recentProgress) < count:
        assert query.exception() is None and query.isActive, query.exception()
        assert time.monotonic() < deadline, query.recentProgress
        time.sleep(0.2)


def records(url: str, topic: str) -> list[Any]:
    answer = httpx.get(
        f"{url}/topics/{topic}/partitions/0/records",
        params={"offset": 0, "timeout": 1000},
        headers={"Accept": "application/vnd.kafka.binary.v2+json"},
    )
    assert answer.status_code == 200, answer.text
    return list(answer.json())


def test_the_pages_python_runs_in_order(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_orders(tmp_path / "data")
    scope: dict[str, Any] = {}

    run(block(claim("docs/spark.md", "The data source", "python"), tmp_path), scope, "The data source")
    assert scope["spark"] is spark  # the session running, with the source registered
    left: DataFrame = scope["orders"]
    assert [r["offset"] for r in left.select("offset").collect()] == [2]  # billing committed two

    run(block(claim("docs/spark.md", "Schemas", "python"), tmp_path), scope, "Schemas")
    shown = capsys.readouterr().out
    assert all(customer in shown for customer in ("ada", "bob", "cy")), shown

    for path in SECRETS:
        secret = tmp_path / path.lstrip("/")
        secret.parent.mkdir(parents=True, exist_ok=True)
        secret.write_bytes(trustme.CA().cert_pem.bytes() if path.endswith(".pem") else b"secret\n")
    credentials = block(claim("docs/spark.md", "Backend credentials", "python"), tmp_path)
    for path in SECRETS:
        credentials = credentials.replace(f'"{path}"', f'"{tmp_path}{path}"')
    run(credentials, scope, "Backend credentials")
    assert "value" in scope["orders"].columns  # planned; no task ran, so nothing connected

    run(block(claim("docs/spark.md", "Streaming", "python"), tmp_path), scope, "Streaming")
    query = scope["query"]
    try:
        read_all(query, 3)  # the first micro-batch, at once; the next would be 10 s later
    finally:
        query.stop()
    assert spark.read.parquet(str(tmp_path / "orders-parquet")).count() == 3

    gw = GatewayProcess(tmp_path / "data").start()
    try:
        run(
            block(claim("docs/spark.md", "Writing to topics", "python"), tmp_path).replace(GATEWAY, gw.url),
            scope,
            "Writing to topics",
        )
        query = scope["query"]
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        assert len(records(gw.url, "orders-upper")) == 3
        assert len(records(gw.url, "orders-replayed")) == 3
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()
