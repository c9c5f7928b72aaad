"""``KafkaCluster``: several Apache Kafka brokers over one KRaft controller, for failure tests.

One dedicated controller node and ``brokers`` broker nodes (three by default), each a JVM of
its own (``KafkaNode``), on free loopback ports, sharing one cluster id and one test CA.
The controller is a node of its own so that the tests can kill, freeze and restart brokers,
even all of them at once, without touching the metadata quorum: with combined nodes, two
brokers gone would also be two of three voters gone, and the cluster would stop electing
leaders for reasons a real deployment (whose controllers are separate, or more) does not have.
A single controller is no quorum a production cluster would run, but nothing here fails it.

Topics are replicated as users are told a production cluster replicates them:
``default.replication.factor`` 3 (capped at the number of brokers; set on the controller, which
applies it, as Kafka 5.0 will require), ``min.insync.replicas`` 2, and Kafka's internal topics
(group offsets, transactions, share-group state) at the same factor. Failure detection is tuned
for tests (see ``FAST_FAILURE_DETECTION``): a broker that dies or freezes is fenced, and its
leaderships move, within seconds rather than Kafka's defaults of about ten (session) and thirty
(ISR lag) seconds.

    with KafkaCluster(tmp_path) as cluster:
        ... start_gateway(..., log=cluster.url) ...
        leader = await cluster.leader_of(topic, 0)
        cluster.broker(leader).kill()

``start()`` starts the four JVMs side by side (``spawn()`` each, then ``wait_ready()`` each);
``stop_all()``/``start_all()`` take the whole cluster down and up again on the same ports and data.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from .kafka_broker import DEFAULT_USERS, KafkaNode, KafkaTls, free_port, new_cluster_id

__all__ = ["FAST_FAILURE_DETECTION", "KafkaCluster", "PartitionState"]

CONTROLLER_ID: Final = 0  # the brokers are 1…n

# Kafka's defaults suit a data centre, where a GC pause must not move leaders about; a test
# wants a dead or frozen broker noticed quickly, on a machine busy enough that "quickly" must
# still leave room for a slow heartbeat.
FAST_FAILURE_DETECTION: Final[Mapping[str, object]] = {
    # A broker heartbeats the controller every 0.5 s (default 2 s) ...
    "broker.heartbeat.interval.ms": 500,
    # ... and is fenced after 4 s without one (default 9 s): its leaderships move to in-sync
    # followers and it leaves every ISR. This is what a kill -9 or a SIGSTOP waits for.
    "broker.session.timeout.ms": 4000,
    # A follower that has not caught up for 6 s leaves the ISR (default 30 s); a follower that
    # is merely slow on a busy machine stays in it.
    "replica.lag.time.max.ms": 6000,
    # A broker that comes back moves its preferred leaderships home after 10 s rather than
    # 5 minutes, so a rolling restart does not leave all leaders on the last broker standing.
    "leader.imbalance.check.interval.seconds": 10,
}


# The client compiler only: a node then starts on about half the CPU time (the server compiler's
# work at start is most of it), which on a 2-core machine starting four JVMs at once is most of
# the wait; what a test sends through the cluster does not need the faster code it would make.
QUICK_START: Final = ("-XX:TieredStopAtLevel=1",)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition as the cluster's metadata says: its leader (-1: none), replicas and ISR."""

    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class KafkaCluster:
    """A KRaft cluster of one controller node and ``brokers`` broker nodes, on loopback.

    ``properties`` are added to (or override) every node's settings; ``heap`` is each
    broker's JVM heap, ``controller_heap`` the controller's; ``jvm_options`` are added to every
    node's (by default ``QUICK_START``: the JIT's first tier only, for tests; a benchmark passes
    none, to measure the brokers Kafka users run).
    """

    def __init__(
        self,
        workdir: Path,
        brokers: int = 3,
        *,
        heap: str = "512m",
        controller_heap: str = "384m",
        properties: Mapping[str, object] | None = None,
        users: Mapping[str, str] = DEFAULT_USERS,
        jvm_options: Sequence[str] = QUICK_START,
    ) -> None:
        if brokers < 1:
            raise ValueError("a Kafka cluster needs at least one broker")
        self.workdir = Path(workdir)
        self.cluster_id = new_cluster_id()
        replicas = min(3, brokers)
        settings: dict[str, object] = {
            "min.insync.replicas": min(2, replicas),
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min(2, replicas),
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": min(2, replicas),
            **FAST_FAILURE_DETECTION,
            **(properties or {}),
        }
        controller_port = free_port()
        voters = {CONTROLLER_ID: controller_port}
        self.controller = KafkaNode(
            self.workdir / "controller",
            node_id=CONTROLLER_ID,
            roles=("controller",),
            cluster_id=self.cluster_id,
            voters=voters,
            controller_port=controller_port,
            users=users,
            heap=controller_heap,
            # the controller applies the topic defaults at creation; the replication factor is
            # its alone (a broker's is for topics it auto-creates, and Kafka 5.0 ignores it)
            properties={"default.replication.factor": replicas, **settings},
            jvm_options=jvm_options,
        )
        self.tls = KafkaTls(self.workdir / "tls")  # one CA: a client trusts every broker alike
        self.brokers: dict[int, KafkaNode] = {
            node_id: KafkaNode(
                self.workdir / f"broker-{node_id}",
                node_id=node_id,
                roles=("broker",),
                cluster_id=self.cluster_id,
                voters=voters,
                users=users,
                tls=self.tls,
                heap=heap,
                properties=settings,
                jvm_options=jvm_options,
            )
            for node_id in range(1, brokers + 1)
        }

    @property
    def nodes(self) -> list[KafkaNode]:
        return [self.controller, *self.brokers.values()]

    @property
    def bootstrap(self) -> str:
        """Every broker's PLAINTEXT address, comma-separated."""
        return ",".join(node.bootstrap for node in self.brokers.values())

    @property
    def url(self) -> str:
        """What ``--log`` takes."""
        return f"kafka://{self.bootstrap}"

    def broker(self, node_id: int) -> KafkaNode:
        return self.brokers[node_id]

    # --- lifecycle ----------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> Self:
        """Start every node side by side; return once each is ready (brokers registered)."""
        try:
            self._up(self.nodes, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def start_all(self, timeout: float | None = None) -> None:
        """Start every node that is not running (a stopped or killed one), side by side, and
        return once all are ready; a frozen one is thawed."""
        for node in self.nodes:
            node.resume()
        self._up([node for node in self.nodes if not node.running], timeout)

    def stop_all(self) -> None:
        """Stop the whole cluster: every broker (SIGTERM to all at once, then wait for each), then
        the controller, which a broker's controlled shutdown asks to move its leaderships; the
        data stays for ``start_all()``."""
        self._down(list(self.brokers.values()))
        self.controller.stop()

    def stop(self) -> None:
        """``stop_all()``: what leaving a ``with`` block does."""
        self.stop_all()

    @staticmethod
    def _up(nodes: list[KafkaNode], timeout: float | None) -> None:
        # spawn() formats a new node's storage first, a JVM of its own: side by side too
        with ThreadPoolExecutor(max(len(nodes), 1)) as pool:
            for spawned in [pool.submit(node.spawn) for node in nodes]:
                spawned.result()
            for ready in [pool.submit(node.wait_ready, timeout) for node in nodes]:
                ready.result()

    @staticmethod
    def _down(nodes: list[KafkaNode]) -> None:
        for node in nodes:
            node.terminate()
        for node in nodes:
            node.stop()

    def output(self, lines: int | None = 60) -> str:
        """The last ``lines`` lines of every node's log, each under its name."""
        return "\n".join(
            f"--- node {node.node_id} ({','.join(node.roles)})\n{node.output(lines)}" for node in self.nodes
        )

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- what the cluster says ----------------------------------------------------------

    async def partition(self, topic: str, partition: int, *, timeout: float = 2.0) -> PartitionState:
        """``topic``'s ``partition`` as the first running broker to answer a Metadata request
        within ``timeout`` s tells it (a frozen one is skipped after that)."""
        from aiokafka.client import AIOKafkaClient
        from aiokafka.protocol.metadata import MetadataRequest

        last: Exception | None = None
        for node in self.brokers.values():
            if not node.running:
                continue
            client = AIOKafkaClient(bootstrap_servers=node.bootstrap, request_timeout_ms=int(timeout * 1000))
            try:
                async with asyncio.timeout(timeout):
                    await client.bootstrap()
                    response = await client.send(node.node_id, MetadataRequest([topic]))
            except Exception as exc:  # down or frozen: ask the next one
                last = exc
                continue
            finally:
                await client.close()
            for entry in response.topics:
                if entry[1] != topic:
                    continue
                for p in entry[-1]:
                    if p[1] == partition:
                        return PartitionState(p[2], tuple(p[3]), tuple(p[4]))
            raise LookupError(f"no partition {partition} of {topic!r} in the cluster's metadata")
        raise RuntimeError(f"no broker answered a Metadata request ({last!r})")

    async def leader_of(self, topic: str, partition: int) -> int:
        """The node id of the partition's leader (-1 while it has none)."""
        return (await self.partition(topic, partition)).leader
