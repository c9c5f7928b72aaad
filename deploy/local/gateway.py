"""``GatewayReplica``: one ``brokergate serve`` process, run as a user runs it, on a loopback port.

The port is chosen once and kept: a replica restarted after a crash comes back at the
same address, so a load balancer (or a test) that knew it finds it again. ``start()``
returns only once ``GET /readyz`` answers 200, which means every backend answered;
a replica that exits or never gets ready raises with the tail of its log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

import httpx

from .process import free_port, stop_process, tail

__all__ = ["GatewayReplica"]


class GatewayReplica:
    """A ``brokergate serve`` subprocess with its own data dir; its output goes to ``log_path``."""

    def __init__(
        self,
        data_dir: Path,
        *,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        log_path: Path | None = None,
        new_session: bool = True,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra = tuple(args)
        self.env = {**os.environ, **(env or {})}
        self.log_path = log_path or self.data_dir.parent / f"gateway-{self.port}.log"
        self.new_session = new_session
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "service",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            *self.extra,
        ]

    def start(self, timeout: float = 30) -> Self:
        """Spawn the process and return once ``/readyz`` answers 200; raise with its log if not."""
        self.spawn()
        return self.wait_ready(timeout)

    def spawn(self) -> None:
        """Start the process without waiting (several replicas then start side by side)."""
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=self.new_session,
            )

    def wait_ready(self, timeout: float = 30) -> Self:
        """Return once ``/readyz`` answers 200; kill the process and raise with its log if it does not."""
        assert self.proc is not None, "spawn() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}:\n{self.output(100)}")
            if self.ready():
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"gateway did not become ready in {timeout}s:\n{self.output(100)}")

    def ready(self) -> bool:
        """Whether ``/readyz`` answers 200 now (every backend answers this replica)."""
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    def output(self, lines: int | None = None) -> str:
        """The replica's log: all of it, or its last ``lines`` lines."""
        if lines is not None:
            return tail(self.log_path, lines)
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """kill -9: no drain, no goodbye to ZooKeeper or Redis, as a crash or an OOM kill."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self) -> None:
        """SIGTERM without waiting: several replicas then drain side by side before ``stop()``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM (uvicorn drains in-flight requests, the backends are closed), then SIGKILL."""
        if self.proc is not None:
            stop_process(self.proc, timeout=timeout)

    def restart(self, timeout: float = 30) -> Self:
        """Stop if running, then start again on the same port and data dir."""
        self.stop()
        return self.start(timeout)
