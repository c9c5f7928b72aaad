"""A real standalone ZooKeeper server for tests and demos, run from Debian's ``zookeeper`` package.

``ZooKeeperServer`` writes a ``zoo.cfg`` (data dir, a free loopback port, a
short ``tickTime`` so that tests can use short session timeouts), starts
``QuorumPeerMain`` under the JVM with the jars of ``/usr/share/java``, and
waits for real readiness: a kazoo session that connects. A server that does
not come up raises with the tail of its log. ``restart()`` keeps the data dir
(and the port), so what was stored survives; ``pause()``/``resume()`` freeze
the process with SIGSTOP/SIGCONT to simulate a server that hangs rather than
dies.

From a pytest fixture::

    @pytest.fixture(scope="session")
    def zookeeper(tmp_path_factory):
        with ZooKeeperServer(tmp_path_factory.mktemp("zk")) as server:
            yield server  # server.url == "zookeeper://127.0.0.1:<port>"
"""

from __future__ import annotations

import os
from pathlib import Path

from kazoo.client import KazooClient

from .process import ServerProcess, free_port

__all__ = ["ZooKeeperServer", "class_path", "free_port"]

JAVA_DIR = Path("/usr/share/java")
# What QuorumPeerMain needs on the class path (Debian's unversioned symlinks).
REQUIRED_JARS = (
    "zookeeper",
    "zookeeper-jute",
    "slf4j-api",
    "netty-handler",
    "netty-common",
    "netty-buffer",
    "netty-transport",
    "netty-codec",
    "netty-resolver",
    "netty-transport-native-epoll",
    "netty-transport-native-unix-common",
    "commons-cli",
    "metrics-core",
    "snappy-java",
)
# Without an slf4j binding the server logs nothing; with it, a failed start can be explained.
OPTIONAL_JARS = ("slf4j-simple",)
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def _find_jar(name: str) -> Path | None:
    plain = JAVA_DIR / f"{name}.jar"
    if plain.exists():
        return plain
    # Some releases ship only versioned names (name-1.2.3.jar).
    versioned = sorted(JAVA_DIR.glob(f"{name}-[0-9]*.jar"))
    return versioned[-1] if versioned else None


def class_path() -> str:
    """The JVM class path, or a RuntimeError naming what is missing and how to get it."""
    jars: list[Path] = []
    missing: list[str] = []
    for name in REQUIRED_JARS:
        jar = _find_jar(name)
        if jar is None:
            missing.append(name)
        else:
            jars.append(jar)
    if missing:
        raise RuntimeError(
            f"ZooKeeper jars missing from {JAVA_DIR}: {', '.join(missing)}; "
            "install them with `apt-get install -y zookeeper`"
        )
    jars.extend(jar for name in OPTIONAL_JARS if (jar := _find_jar(name)) is not None)
    return os.pathsep.join(str(j) for j in jars)


class ZooKeeperServer(ServerProcess):
    """One standalone ZooKeeper server process on a free loopback port."""

    name = "ZooKeeper"
    start_timeout = 60.0  # a JVM, on a busy machine
    probe_interval = 0.1

    def __init__(self, base_dir: Path, *, port: int | None = None, tick_time_ms: int = 100) -> None:
        super().__init__(port)
        self.base_dir = self.cwd = Path(base_dir)
        self.data_dir = self.base_dir / "data"
        self.config = self.base_dir / "zoo.cfg"
        self.log_path = self.base_dir / "zookeeper.log"
        # Sessions may be as short as 2 ticks and as long as 20.
        self.tick_time_ms = tick_time_ms

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The ``--coordinator`` value for this server (append ``/chroot`` to isolate a test)."""
        return f"zookeeper://{self.hosts}"

    def _prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            "\n".join(
                [
                    f"dataDir={self.data_dir}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "admin.enableServer=false",
                    f"tickTime={self.tick_time_ms}",
                    "maxClientCnxns=0",
                    # Tests start servers often; the default preallocation of 64 MiB per log is waste.
                    "preAllocSize=1024",
                    "snapCount=100000",
                    "",
                ]
            )
        )

    def command(self) -> list[str]:
        return [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # starts faster; a test server needs no peak throughput
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            class_path(),
            MAIN_CLASS,
            str(self.config),
        ]

    def _probe(self, timeout: float) -> None:
        """A client session connects and lists the root."""
        client = KazooClient(hosts=self.hosts, timeout=2.0)
        try:
            client.start(timeout=timeout)
            client.get_children("/")  # a real round trip, not just a TCP accept
        finally:
            client.stop()
            client.close()
