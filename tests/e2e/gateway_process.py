"""Run ``brokergate serve`` as a user does: a separate process on a free port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from deploy.local.gateway import GatewayReplica
from deploy.local.kafka_broker import KafkaBroker
from deploy.local.redis_server import RedisServer
from deploy.local.zookeeper_server import ZooKeeperServer


def user_env() -> dict[str, str]:
    """This environment as a user's shell has it: without the make variables the suite inherits
    under ``make test`` (MAKELEVEL, MAKEFLAGS), which would make a ``make`` it runs a sub-make."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}


def _as_in_a_terminal() -> None:
    """Ctrl-C's signal as a terminal's foreground job has it: a suite started in the background by a
    shell without job control inherits SIGINT ignored, and so would ``make`` (which then outlives a
    Ctrl-C that the gateway answers)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def make_run(
    root: Path, port: int, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """``make run`` as a user starts it from a terminal: its own process group, a user's environment
    (``user_env``), the install step counted as done (``-o``: this suite runs in the venv it
    installed). Yielded once it serves on ``port``, its output piped; what is still running
    afterwards is killed."""
    serve = subprocess.Popen(
        ["make", "-s", "-o", ".venv/.installed", "run", f"PORT={port}"],
        cwd=root,
        env={**user_env(), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_as_in_a_terminal,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
                break
            except httpx.TransportError:
                assert serve.poll() is None and time.monotonic() < deadline, "make run did not serve"
                time.sleep(0.2)
        yield serve
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.communicate(timeout=10)


class GatewayProcess(GatewayReplica):
    """A ``brokergate serve`` subprocess; its output goes to a log file that failures print."""

    def __init__(
        self, data_dir: Path, *extra: str, env: dict[str, str] | None = None, host: str | None = "127.0.0.1"
    ) -> None:
        # In the test run's process group: a Ctrl-C stops it with pytest.
        super().__init__(data_dir, args=extra, env=env, new_session=False, host=host)


def authorizing_gateway(data_dir: Path, users: Mapping[str, str], super_user: str) -> GatewayProcess:
    """A started gateway with HTTP Basic over ``users`` (name: password, added with ``brokergate
    users add`` as an operator would) and ACLs on, ``super_user`` allowed everything."""
    for user, password in users.items():
        added = subprocess.run(
            [
                sys.executable,
                "-m",
                "service",
                "users",
                "add",
                user,
                "--data-dir",
                str(data_dir),
                "--password-stdin",
            ],
            input=password + "\n",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert added.returncode == 0, added.stderr
    env = {"BROKERGATE_AUTHORIZE": "true", "BROKERGATE_SUPER_USERS": f"User:{super_user}"}
    return GatewayProcess(data_dir, "--auth", "basic", env=env).start()


@dataclass(frozen=True)
class Replicas:
    """Two started gateway processes sharing one Kafka log, one ZooKeeper (in ``chroot``) and one Redis."""

    first: GatewayProcess
    second: GatewayProcess
    zookeeper: ZooKeeperServer
    chroot: str


@contextmanager
def two_replicas(
    tmp_path: Path, broker: KafkaBroker, env: Mapping[str, str] | None = None
) -> Iterator[Replicas]:
    """``Replicas`` (gw-a and gw-b) on ``broker`` (the session's: name topics and groups for the
    test) with ``env`` added to their settings; stopped at the end."""
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    with (
        ZooKeeperServer(tmp_path / "zookeeper") as zookeeper,
        RedisServer(tmp_path / "redis") as redis,
    ):
        shared = {
            "BROKERGATE_LOG": broker.url,
            "BROKERGATE_COORDINATOR": zookeeper.url + chroot,
            "BROKERGATE_SESSIONS": redis.url,
            "BROKERGATE_SCHEMA_REGISTRY_TOPIC": f"_schemas-{uuid.uuid4().hex[:12]}",
            "BROKERGATE_ZOOKEEPER_SESSION_TIMEOUT_MS": "1500",
            "BROKERGATE_REAPER_INTERVAL_MS": "200",
            **(env or {}),
        }
        first = GatewayProcess(tmp_path / "a", env={**shared, "BROKERGATE_NODE_ID": "gw-a"}).start()
        second = GatewayProcess(tmp_path / "b", env={**shared, "BROKERGATE_NODE_ID": "gw-b"}).start()
        try:
            yield Replicas(first, second, zookeeper, chroot)
        finally:
            first.stop()
            second.stop()
