"""``SparkStandalone``: a Spark standalone cluster on loopback, a master and its workers, from pyspark.

pyspark's wheel ships Spark's jars and ``bin/spark-class``, the launcher every daemon of Spark is
started through, though not ``sbin/start-master.sh`` and ``start-worker.sh``, which only wrap it
in a daemon script. Each daemon here is what those scripts run: ``spark-class
org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P --webui-port W`` and
``spark-class org.apache.spark.deploy.worker.Worker … spark://127.0.0.1:P``, in the foreground,
as a child whose output is its log. Everything binds to 127.0.0.1 (``SPARK_LOCAL_IP``), on free
ports, and the daemons' heaps are small (``SPARK_DAEMON_MEMORY``): the executors a worker starts
for an application are sized by the worker's ``--memory`` and ``--cores``.

The master is ready when its web UI's ``/json/`` says ``ALIVE``; a worker, when the master lists
it as ``ALIVE`` there, so an application submitted after ``start()`` finds every worker.

    with SparkStandalone(tmp_path, workers=2) as cluster:
        spark-submit --master {cluster.url} …

Collaborators: ``process.ServerProcess`` (start, readiness, stop), pyspark's ``bin/spark-class``.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from .process import ServerProcess, free_port

__all__ = ["SparkMaster", "SparkStandalone", "SparkWorker", "spark_home"]

LOOPBACK = "127.0.0.1"
DAEMON_MEMORY = "256m"  # the master's and each worker's own heap: they only schedule


def spark_home() -> Path:
    """The Spark that pyspark is: its package directory holds ``bin/``, ``jars/`` and ``conf``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def daemon_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a daemon: this Spark, bound to loopback, executors' Python this one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.pop("PYTHONPATH", None)  # an executor imports what the application ships (--py-files)
    return {
        **env,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
        "PYSPARK_PYTHON": sys.executable,
        **(extra or {}),
    }


def _status(webui_port: int, timeout: float) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{LOOPBACK}:{webui_port}/json/", timeout=timeout) as answer:
        found: dict[str, Any] = json.load(answer)
    return found


class SparkMaster(ServerProcess):
    """Spark's standalone master on ``port`` (``spark://127.0.0.1:port``), web UI on ``webui_port``."""

    name = "spark-master"
    start_timeout = 90.0  # a JVM start on a busy 2-core machine
    probe_timeout = 3.0
    probe_interval = 0.3

    def __init__(self, workdir: Path, *, env: dict[str, str] | None = None) -> None:
        super().__init__()
        self.workdir = self.cwd = Path(workdir)
        self.webui_port = free_port()
        self.log_path = self.workdir / "master.log"
        self.env = daemon_env(env)

    @property
    def url(self) -> str:
        """What ``--master`` takes."""
        return f"spark://{LOOPBACK}:{self.port}"

    def command(self) -> list[str]:
        return [
            str(spark_home() / "bin" / "spark-class"),
            "org.apache.spark.deploy.master.Master",
            *("--host", LOOPBACK, "--port", str(self.port), "--webui-port", str(self.webui_port)),
        ]

    def _prepare(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)

    def _probe(self, timeout: float) -> None:
        if self.status(timeout).get("status") != "ALIVE":
            raise RuntimeError("the master is not ALIVE yet")

    def status(self, timeout: float = 5.0) -> dict[str, Any]:
        """The master's view (its web UI's ``/json/``): workers, running and completed applications."""
        return _status(self.webui_port, timeout)


class SparkWorker(ServerProcess):
    """A standalone worker of ``master`` offering ``cores`` and ``memory`` to executors; executors'
    files (their stdout and stderr included) go under ``work_dir``, one directory per application."""

    name = "spark-worker"
    start_timeout = 90.0
    probe_timeout = 3.0
    probe_interval = 0.3

    def __init__(
        self,
        workdir: Path,
        master: SparkMaster,
        *,
        cores: int = 1,
        memory: str = "1g",
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.workdir = self.cwd = Path(workdir)
        self.master = master
        self.cores = cores
        self.memory = memory
        self.webui_port = free_port()
        self.work_dir = self.workdir / "work"
        self.log_path = self.workdir / "worker.log"
        self.env = daemon_env(env)  # the executors it starts inherit it

    def command(self) -> list[str]:
        return [
            str(spark_home() / "bin" / "spark-class"),
            "org.apache.spark.deploy.worker.Worker",
            *("--host", LOOPBACK, "--port", str(self.port), "--webui-port", str(self.webui_port)),
            *("--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(self.work_dir)),
            self.master.url,
        ]

    def _prepare(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)

    def _probe(self, timeout: float) -> None:
        workers = self.master.status(timeout).get("workers", [])
        if not any(w.get("port") == self.port and w.get("state") == "ALIVE" for w in workers):
            raise RuntimeError("the master does not list this worker as ALIVE yet")

    def executor_logs(self) -> list[Path]:
        """The ``stderr`` of every executor this worker ran (``work/app-…/<executor>/stderr``)."""
        return sorted(self.work_dir.glob("app-*/*/stderr"))


class SparkStandalone:
    """A master and ``workers`` workers, started together and stopped in reverse (workers first);
    ``env`` is added to every daemon's environment (and so to their executors')."""

    def __init__(
        self,
        workdir: Path,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        env: dict[str, str] | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.master = SparkMaster(self.workdir / "master", env=env)
        self.workers = [
            SparkWorker(self.workdir / f"worker-{i}", self.master, cores=cores, memory=memory, env=env)
            for i in range(1, workers + 1)
        ]

    @property
    def url(self) -> str:
        return self.master.url

    def start(self) -> Self:
        try:
            self.master.start()
            for worker in self.workers:  # side by side: each JVM start takes seconds
                worker.spawn()
            for worker in self.workers:
                worker.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            worker.stop()
        self.master.stop()

    def output(self, lines: int = 60) -> str:
        """The tail of every daemon's log, for a failing test's report."""
        parts = [self.master, *self.workers]
        return "\n".join(f"--- {p.log_path.parent.name}\n{p.output(lines)}" for p in parts)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
