"""``KafkaBroker``: Apache Kafka itself (KRaft) on loopback, for tests, benchmarks and demos.

The jars come from Maven Central once (``deploy.jars``); each node is one JVM, run as
Kafka's ``bin/kafka-server-start.sh`` runs it: ``kafka.tools.StorageTool format`` on first
start (SCRAM users are made there), then ``kafka.Kafka server.properties``. A ``KafkaBroker``
is a broker and its own controller (combined mode), listening on free loopback ports:

- ``PLAINTEXT`` (``bootstrap``, ``url``): no sign-in;
- ``SASL_PLAINTEXT`` (``sasl_bootstrap``): PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, for every
  user of ``users`` (name → password);
- ``SSL`` (``ssl_bootstrap``): TLS with the broker's certificate from a test CA (``tls.ca``);
- ``MTLS`` (``mtls_bootstrap``): TLS that also wants a client certificate of that CA
  (``client_certificate()`` issues one); the principal is the certificate's subject.

``start()`` returns once a Metadata request on the PLAINTEXT listener is answered by this
cluster with this node among its brokers (real readiness, not an open port); a node that does
not come up raises with its log. ``restart()`` keeps the data, ``pause()``/``resume()`` freeze
the JVM (SIGSTOP/SIGCONT), ``kill()`` is kill -9. ``KafkaCluster`` (``deploy.local.kafka_cluster``)
builds several brokers over one controller quorum from the same parts.

    with KafkaBroker(tmp_path) as broker:
        ... KafkaLog(broker.url) ...
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from deploy.jars import class_path

from .process import ServerProcess, free_port

__all__ = ["KafkaBroker", "KafkaNode", "KafkaTls", "free_port", "java", "new_cluster_id"]

DEFAULT_USERS: Mapping[str, str] = {"brokergate": "brokergate-secret"}
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# What bin/kafka-run-class.sh passes (KAFKA_JVM_PERFORMANCE_OPTS), less its GC log.
JVM_OPTIONS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console>
  </Appenders>
  <Loggers>
    <Logger name="kafka.server.KafkaRaftServer" level="info"/>
    <Logger name="kafka.server.BrokerServer" level="info"/>
    <Logger name="kafka.server.ControllerServer" level="info"/>
    <Logger name="org.apache.kafka.common.network.Selector" level="info"/>
    <Root level="warn"><AppenderRef ref="out"/></Root>
  </Loggers>
</Configuration>
"""


def java() -> str:
    """The ``java`` that runs Kafka: ``$JAVA_HOME/bin/java``, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        raise RuntimeError("Apache Kafka needs Java 17 or newer: no java on the PATH or in $JAVA_HOME")
    return found


def new_cluster_id() -> str:
    """A Kafka cluster id: a random UUID in URL-safe base64, as ``kafka-storage random-uuid``."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class KafkaTls:
    """The broker's TLS files: ``keystore`` (its PKCS#8 key and certificate chain, PEM) and the
    CA (``ca``) that signed it and every client certificate the broker accepts."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.directory / "broker.pem"

    @property
    def _ca_state(self) -> Path:
        return self.directory / "ca.key"

    def create(self) -> KafkaTls:
        """Issue the CA and the broker's certificate (for 127.0.0.1 and localhost), unless made."""
        if self.ca.exists() and self.keystore.exists():
            return self
        trustme = _trustme()
        ca = trustme.CA()
        self.directory.mkdir(parents=True, exist_ok=True)
        server = ca.issue_cert("127.0.0.1", "localhost")
        self.keystore.write_bytes(_pkcs8(server.private_key_pem.bytes()) + _chain(server))
        self.ca.write_bytes(ca.cert_pem.bytes())
        self._ca_state.write_bytes(ca.private_key_pem.bytes())
        os.chmod(self._ca_state, 0o600)
        return self

    def client_certificate(self, name: str) -> tuple[Path, Path]:
        """A client certificate for ``CN=name`` signed by the CA, and its key: ``(cert, key)`` PEM."""
        ca = _trustme().CA.from_pem(self.ca.read_bytes(), self._ca_state.read_bytes())
        issued = ca.issue_cert(f"{name}@brokergate.test", common_name=name)  # Java wants a SAN
        cert, key = self.directory / f"client-{name}.pem", self.directory / f"client-{name}.key"
        cert.write_bytes(_chain(issued))
        key.write_bytes(issued.private_key_pem.bytes())
        os.chmod(key, 0o600)
        return cert, key


def _trustme() -> ModuleType:
    try:
        import trustme
    except ImportError:
        raise RuntimeError("the test broker's TLS listeners need trustme: pip install -e '.[test]'") from None
    return trustme


def _chain(issued: Any) -> bytes:
    return b"".join(pem.bytes() for pem in issued.cert_chain_pems)


def _pkcs8(pem: bytes) -> bytes:
    """The key as PKCS#8 PEM, the one form Kafka's PEM key store reads."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(pem, password=None)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _formatted_cluster(data_dir: Path) -> str | None:
    """The cluster id a formatted log directory belongs to (its ``meta.properties``), or None."""
    try:
        lines = (data_dir / "meta.properties").read_text().splitlines()
    except FileNotFoundError:
        return None
    found = [line.split("=", 1)[1].strip() for line in lines if line.startswith("cluster.id=")]
    return found[0] if found else None


async def _broker_answers(bootstrap: str, timeout: float, cluster_id: str, node_id: int) -> None:
    """One Metadata request through aiokafka's client; raises unless cluster ``cluster_id``
    answers it with ``node_id`` among its brokers (a broker of another run that won a race
    for the port must not pass for this one)."""
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
            answered = getattr(response, "cluster_id", None)
            if answered != cluster_id:
                raise RuntimeError(f"another cluster ({answered}) answers on {bootstrap}")
            if node_id not in {broker[0] for broker in response.brokers}:
                raise RuntimeError(f"broker {node_id} has not registered yet")
    finally:
        await client.close()


class KafkaNode(ServerProcess):
    """One Kafka KRaft process: a broker, a controller, or both (``roles``), of cluster
    ``cluster_id`` whose controllers are ``voters`` (node id → controller port).

    Brokers listen on PLAINTEXT (``port``), SASL_PLAINTEXT, SSL and MTLS; controllers on
    ``controller_port``. ``properties`` overrides or adds broker settings; ``jvm_options`` are
    added to the JVM's (of the server and of its storage format).
    """

    name = "kafka"
    start_timeout = 90.0  # a JVM's start on a busy 2-core machine
    stop_timeout = 30.0  # a controlled shutdown moves leadership away first
    probe_timeout = 3.0
    probe_interval = 0.2

    def __init__(
        self,
        workdir: Path,
        *,
        node_id: int = 1,
        roles: Sequence[str] = ("broker", "controller"),
        cluster_id: str | None = None,
        voters: Mapping[int, int] | None = None,
        controller_port: int | None = None,
        users: Mapping[str, str] = DEFAULT_USERS,
        tls: KafkaTls | None = None,
        heap: str = "1g",
        properties: Mapping[str, object] | None = None,
        jvm_options: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.workdir = self.cwd = Path(workdir)
        self.node_id = node_id
        self.roles = tuple(roles)
        self.data_dir = self.workdir / "data"
        # a node formatted by an earlier run keeps its cluster
        self.cluster_id = cluster_id or _formatted_cluster(self.data_dir) or new_cluster_id()
        self.controller_port = controller_port or (free_port() if self.is_controller else None)
        self.voters = dict(voters) if voters is not None else {node_id: self.controller_port}
        self.users = dict(users)
        self.tls = tls or KafkaTls(self.workdir / "tls")
        self.heap = heap
        self.properties = dict(properties or {})
        self.jvm_options = tuple(jvm_options)
        self.sasl_port, self.ssl_port, self.mtls_port = free_port(), free_port(), free_port()
        self.config_path = self.workdir / "server.properties"
        self.log_path = self.workdir / "kafka.log"

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """What ``--log`` takes."""
        return f"kafka://{self.bootstrap}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def mtls_bootstrap(self) -> str:
        return f"127.0.0.1:{self.mtls_port}"

    def server_properties(self) -> dict[str, object]:
        """The node's settings: Kafka's defaults, less what a 2-core test machine cannot spare."""
        voters = ",".join(f"{node}@127.0.0.1:{port}" for node, port in sorted(self.voters.items()))
        props: dict[str, object] = {
            "process.roles": ",".join(self.roles),
            "node.id": self.node_id,
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "log.dirs": self.data_dir,
            "num.network.threads": 2,
            "num.io.threads": 4,
            "background.threads": 4,
            "num.recovery.threads.per.data.dir": 1,
            "log.cleaner.threads": 1,
            "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
            # Records are kept until a topic says otherwise: tests write records stamped years
            # ago, which Kafka's default of 7 days would delete at the next check.
            "log.retention.ms": -1,
            "log.retention.check.interval.ms": 1000,
            "log.segment.delete.delay.ms": 1000,
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 8,
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.num.partitions": 4,
            "auto.create.topics.enable": "false",
        }
        listeners = []
        protocols = ["CONTROLLER:PLAINTEXT"]
        if self.is_controller:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_port}")
        if self.is_broker:
            replicas = min(3, len(self.voters) if self.is_controller else 3)
            listeners += [
                f"PLAINTEXT://127.0.0.1:{self.port}",
                f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
                f"SSL://127.0.0.1:{self.ssl_port}",
                f"MTLS://127.0.0.1:{self.mtls_port}",
            ]
            protocols += ["PLAINTEXT:PLAINTEXT", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SSL:SSL", "MTLS:SSL"]
            plain_users = " ".join(f'user_{name}="{password}"' for name, password in self.users.items())
            props |= {
                "advertised.listeners": ",".join(x for x in listeners if not x.startswith("CONTROLLER")),
                "inter.broker.listener.name": "PLAINTEXT",
                "sasl.enabled.mechanisms": ",".join(("PLAIN", *SCRAM_MECHANISMS)),
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
                ),
                **{
                    f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config": (
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                    )
                    for mechanism in SCRAM_MECHANISMS
                },
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": self.tls.keystore,
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": self.tls.ca,
                "listener.name.mtls.ssl.client.auth": "required",
                "offsets.topic.replication.factor": replicas,
                "transaction.state.log.replication.factor": replicas,
                "transaction.state.log.min.isr": min(2, replicas),
                "share.coordinator.state.topic.replication.factor": replicas,
                "share.coordinator.state.topic.min.isr": min(2, replicas),
                "default.replication.factor": 1,
            }
        props["listeners"] = ",".join(listeners)
        props["listener.security.protocol.map"] = ",".join(protocols)
        return props | self.properties

    def _prepare(self) -> None:
        """The config and log4j2 files, the TLS files, and the storage formatted on first start."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.is_broker:
            self.tls.create()
        lines = [f"{key}={value}" for key, value in self.server_properties().items()]
        self.config_path.write_text("\n".join(lines) + "\n")
        (self.workdir / "log4j2.xml").write_text(LOG4J2)
        if not (self.data_dir / "meta.properties").exists():
            self._format()

    def _format(self) -> None:
        scram = [
            f"{mechanism}=[name={name},password={password}]"
            for name, password in self.users.items()
            for mechanism in SCRAM_MECHANISMS
        ]
        # one argument, "=" and all: a cluster id may begin with "-" (URL-safe base64)
        command = [*self._java(), "kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}"]
        command += ["-c", str(self.config_path)]
        for credential in scram if self.is_controller else []:
            command += ["--add-scram", credential]
        done = subprocess.run(command, cwd=self.workdir, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{done.stdout}{done.stderr}")

    def _java(self, heap: str = "256m") -> list[str]:
        log4j = f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.xml'}"
        return [java(), f"-Xmx{heap}", *JVM_OPTIONS, *self.jvm_options, log4j, "-cp", class_path("kafka")]

    def command(self) -> list[str]:
        return [*self._java(self.heap), f"-Xms{self.heap}", "kafka.Kafka", str(self.config_path)]

    def _probe(self, timeout: float) -> None:
        if not self.is_broker:  # a controller alone: its listener takes connections
            assert self.controller_port is not None
            socket.create_connection(("127.0.0.1", self.controller_port), timeout=timeout).close()
            return
        # a plain connect first: aiokafka logs every refused bootstrap as an error
        socket.create_connection(("127.0.0.1", self.port), timeout=timeout).close()
        # A private loop in a worker thread: works whether or not the caller runs an event loop.
        answers = _broker_answers(self.bootstrap, timeout, self.cluster_id, self.node_id)
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, answers).result()

    def client_certificate(self, name: str) -> tuple[Path, Path]:
        """A client certificate (and key) the MTLS listener accepts, for principal ``CN=name``."""
        self.tls.create()
        return self.tls.client_certificate(name)


class KafkaBroker(KafkaNode):
    """A one-node cluster: a broker that is its own controller (Kafka's combined mode)."""
