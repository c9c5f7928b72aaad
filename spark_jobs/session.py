"""The SparkSession every job runs in, and the command-line options the jobs share.

Under ``spark-submit`` the master and the rest of the configuration come from
spark-submit (it starts the Python driver with ``PYSPARK_GATEWAY_PORT`` set);
run directly (``python -m spark_jobs``) a job defaults to ``local[*]``. A local
master binds to 127.0.0.1 and runs its Python workers with this interpreter,
so the package and its dependencies are importable in every task.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from pyspark.sql import SparkSession

from . import credentials
from .datasource import BrokergateDataSource

DEFAULT_MASTER: Final = "local[*]"
LOOPBACK: Final = "127.0.0.1"


def launched_by_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    app_name: str, master: str | None = None, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A session with the ``brokergate`` data source registered."""
    settings = dict(conf or {})
    builder = SparkSession.builder.appName(app_name)
    if master is None and not launched_by_spark_submit():
        master = DEFAULT_MASTER
    if master is not None:
        builder = builder.master(master)
    if master is not None and master.startswith("local"):
        # Read by the JVM and the Python workers it starts, so they must be set before either starts.
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings.setdefault("spark.driver.host", LOOPBACK)
        settings.setdefault("spark.driver.bindAddress", LOOPBACK)
    settings.setdefault("spark.ui.showConsoleProgress", "false")  # the jobs print their own progress
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


# What a job is given: a session, or something that makes one when first needed (so that a run with
# nothing to do never starts a JVM).
SessionSource = SparkSession | Callable[[], SparkSession]


def session_of(source: SessionSource) -> SparkSession:
    return source if isinstance(source, SparkSession) else source()


class LazySession:
    """Builds the session on the first call, once; ``stop()`` stops it if it was built."""

    def __init__(self, app_name: str, master: str | None, conf: Mapping[str, str]) -> None:
        self._args = (app_name, master, dict(conf))
        self._session: SparkSession | None = None

    def __call__(self) -> SparkSession:
        if self._session is None:
            self._session = build_session(*self._args)
            self._session.sparkContext.setLogLevel("WARN")
        return self._session

    def stop(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.stop()


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("brokergate")`` available in ``spark``."""
    spark.dataSource.register(BrokergateDataSource)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every job takes: where the log is, how to sign in to it, and how Spark runs."""
    parser.add_argument(
        "--log",
        default="./data",
        help="the gateway's embedded data dir, or kafka://host:port[,host:port...] (default ./data)",
    )
    parser.add_argument(
        "--coordinator",
        help="the gateway's coordinator: its data dir (the default with an embedded log) or "
        "zookeeper://host:port[,...][/chroot]; where committed offsets are, and with a Kafka log "
        "(whose offsets are Kafka's) where those committed before they moved to Kafka are",
    )
    parser.add_argument(
        "--master",
        help=f"Spark master URL (default {DEFAULT_MASTER}; under spark-submit, spark-submit's)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark configuration setting (repeatable), e.g. spark.executor.memory=2g",
    )
    credentials.add_arguments(parser)


def parse_conf(pairs: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}``; raises ``ValueError`` naming a malformed pair."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {pair!r} is not KEY=VALUE")
        out[key.strip()] = value
    return out
