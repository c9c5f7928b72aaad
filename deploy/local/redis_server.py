"""A real Redis server for tests and demos, run from Debian's ``redis-server`` package.

``RedisServer`` starts ``redis-server --port PORT --bind 127.0.0.1`` on a free
loopback port, with its working directory and log under ``base_dir``, and waits
for real readiness: a PING that answers PONG (Redis accepts connections before
it has loaded its data). A server that does not come up raises with the tail of
its log. Persistence is off (``--save '' --appendonly no``) unless
``appendonly=True``, which keeps an append-only file in ``base_dir`` (fsync once
a second; a clean stop writes everything). ``restart()`` reuses the port, so
clients configured with the old URL reconnect to the new process; without
persistence it comes back empty, as a Redis that lost its data would, and with
it the data comes back. ``pause()``/``resume()`` freeze the process with
SIGSTOP/SIGCONT to simulate a server that hangs rather than dies.

From a pytest fixture::

    @pytest.fixture(scope="session")
    def redis_server(tmp_path_factory):
        with RedisServer(tmp_path_factory.mktemp("redis")) as server:
            yield server  # server.url == "redis://127.0.0.1:<port>/0"
"""

from __future__ import annotations

import shutil
from pathlib import Path

import redis

from .process import ServerProcess, free_port

__all__ = ["BINARY", "RedisServer", "available", "free_port"]

BINARY = "redis-server"


def available() -> bool:
    """Whether a Redis server can be started on this machine."""
    return shutil.which(BINARY) is not None


class RedisServer(ServerProcess):
    """One ``redis-server`` process on a loopback port, with or without an append-only file."""

    name = "redis-server"
    start_timeout = 20.0
    probe_interval = 0.02

    def __init__(self, base_dir: Path, *, port: int | None = None, appendonly: bool = False) -> None:
        super().__init__(port)
        self.base_dir = self.cwd = Path(base_dir)
        self.log_path = self.base_dir / "redis.log"
        self.appendonly = appendonly

    def url_for(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    @property
    def url(self) -> str:
        """The ``--sessions`` value for this server (database 0)."""
        return self.url_for(0)

    def client(self, db: int = 0) -> redis.Redis:
        """A synchronous client to inspect the server directly (bypassing the adapter)."""
        return redis.Redis(
            host="127.0.0.1", port=self.port, db=db, socket_timeout=5, socket_connect_timeout=5
        )

    def command(self) -> list[str]:
        binary = shutil.which(BINARY)
        if binary is None:
            raise RuntimeError(f"{BINARY} not found; install it with `apt-get install -y redis-server`")
        return [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            # Redis's own recommendation: at most a second of writes lost on a crash.
            "--appendfsync",
            "everysec",
            "--dir",
            str(self.base_dir),
            "--daemonize",
            "no",
            # Expire keys promptly: TTL tests wait for Redis's own active expiry.
            "--hz",
            "50",
        ]

    def _probe(self, timeout: float) -> None:
        """A PING is answered (only once the server is ready for commands)."""
        client = redis.Redis(
            host="127.0.0.1", port=self.port, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        try:
            if not client.ping():
                raise RuntimeError("PING was not answered")
        finally:
            client.close()
