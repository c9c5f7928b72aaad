"""``GatewayReplica``: one ``brokergate serve`` process, run as a user runs it, on a loopback port.

The port is chosen once and kept: a replica restarted after a crash comes back at the
same address, so a load balancer (or a test) that knew it finds it again. ``start()``
returns only once ``GET /readyz`` answers 200, which means every backend answered;
a replica that exits or never gets ready raises with the tail of its log. With ``tls`` it
serves HTTPS with that certificate, and its readiness is asked over HTTPS trusting that CA
(``/readyz`` answers without credentials, whatever ``--auth`` says). It listens on 127.0.0.1 unless
``host`` names another address (None: no ``--host``, the gateway's own default).
"""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from .process import ServerProcess
from .security import TlsFiles

__all__ = ["GatewayReplica"]


class GatewayReplica(ServerProcess):
    """A ``brokergate serve`` subprocess with its own data dir; its output goes to ``log_path``.

    ``spawn()`` and ``wait_ready()`` are ``start()`` in two halves, so several replicas start
    side by side; ``kill()`` is the crash of a replica, ``terminate()`` lets several drain at once.
    """

    name = "gateway"
    stop_timeout = 15.0  # uvicorn drains in-flight requests, then the backends are closed

    def __init__(
        self,
        data_dir: Path,
        *,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        log_path: Path | None = None,
        new_session: bool = True,
        tls: TlsFiles | None = None,
        host: str | None = "127.0.0.1",
    ) -> None:
        super().__init__(port)
        self.data_dir = Path(data_dir)
        self.tls = tls
        self.host = host
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.extra = tuple(args)
        self.env = {**os.environ, **(env or {})}
        self.log_path = log_path or self.data_dir.parent / f"gateway-{self.port}.log"
        self.new_session = new_session

    def _prepare(self) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "service",
            "serve",
            *(() if self.host is None else ("--host", self.host)),
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            *(() if self.tls is None else ("--tls-cert", str(self.tls.cert), "--tls-key", str(self.tls.key))),
            *self.extra,
        ]

    def _probe(self, timeout: float) -> None:
        """``/readyz`` answers 200: every backend answers this replica."""
        verify = ssl.create_default_context(cafile=self.tls.ca) if self.tls else True
        status = httpx.get(f"{self.url}/readyz", timeout=timeout, verify=verify).status_code
        if status != 200:
            raise RuntimeError(f"/readyz answered {status}")
