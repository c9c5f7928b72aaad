"""``LocalCluster``: a whole stateless deployment of brokergate on this machine's loopback.

An Apache Kafka broker (``KafkaBroker``, or an existing one), ZooKeeper, Redis, N
``brokergate serve`` replicas on ``kafka://`` + ``zookeeper://`` + ``redis://``, and
nginx balancing round-robin over them. ``deploy/cluster.py`` runs it from a terminal;
the end-to-end tests and ``bench/replicas.py`` drive it from Python.

Everything lives under one directory: each server's data and log, the generated
nginx.conf, and ``cluster.json``, the machine-readable state (URLs, ports, pids with
their start times) that ``deploy/cluster.py down`` uses to clean up after a cluster
whose owner was killed.

Redis runs with an append-only file by default: consumer instances are state held
in Redis, and "a replica may die without losing a consumer" would be hollow if a
Redis restart lost every one of them.

With ``secure=True`` the cluster runs as a deployment shared by many teams should: HTTPS from
the client to the balancer and from the balancer to each replica, HTTP Basic authentication
against one credentials file, ACLs enforced with ``admin`` the super user, an audit trail per
replica, and the replicas signed in to ZooKeeper with a digest identity
(``deploy.local.security``). ``security.admin`` and ``security.tls.ca`` are what a client
signs in with and trusts.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from .balancer import NginxBalancer
from .gateway import GatewayReplica
from .kafka_broker import KafkaBroker
from .process import free_port, start_ticks
from .redis_server import RedisServer
from .security import ClusterSecurity
from .zookeeper_server import ZooKeeperServer

__all__ = ["STATE_FILE", "ClusterSpec", "LocalCluster", "StartCancelled"]

STATE_FILE = "cluster.json"
CHROOT = "/brokergate"


class StartCancelled(Exception):
    """A stop was asked for while the cluster was starting; what had started is stopped again."""


@dataclass
class ClusterSpec:
    """What to run. ``kafka``/``zookeeper``/``redis`` name existing servers; None starts one here."""

    workdir: Path
    replicas: int = 3
    port: int | None = None  # the balancer's; None picks a free one
    kafka: str | None = None  # bootstrap host:port[,host:port...]
    zookeeper: str | None = None  # host:port[,...][/chroot]
    redis: str | None = None  # redis://host:port/db
    env: Mapping[str, str] = field(default_factory=dict)  # BROKERGATE_* for every replica
    redis_appendonly: bool = True
    # Sessions may last 2 to 20 ticks: 1 to 10 s, which covers the gateway's default (10 s)
    # as well as the short timeouts tests use.
    zookeeper_tick_ms: int = 500
    nginx_workers: int = 1
    log_level: str = "info"
    secure: bool = False  # HTTPS, authentication, ACLs and an audit trail (see the module doc)


class LocalCluster:
    """Starts, supervises and stops the processes of a ``ClusterSpec``; stop() is safe at any point."""

    def __init__(self, spec: ClusterSpec) -> None:
        if spec.replicas < 1:
            raise ValueError("a cluster needs at least one replica")
        self.spec = spec
        self.workdir = Path(spec.workdir).resolve()
        self.broker: KafkaBroker | None = None
        self.zookeeper: ZooKeeperServer | None = None
        self.redis: RedisServer | None = None
        self.replicas: list[GatewayReplica] = []
        self.balancer: NginxBalancer | None = None
        self.security = ClusterSecurity(self.workdir / "security") if spec.secure else None
        self._reported: set[str] = set()

    # --- addresses -----------------------------------------------------------------

    @property
    def kafka_url(self) -> str:
        return self.broker.url if self.broker else f"kafka://{self.spec.kafka}"

    @property
    def zookeeper_url(self) -> str:
        if self.zookeeper:
            return self.zookeeper.url + CHROOT
        return f"zookeeper://{self.spec.zookeeper}"

    @property
    def redis_url(self) -> str:
        return self.redis.url if self.redis else str(self.spec.redis)

    @property
    def url(self) -> str:
        """The balancer: the one address clients use."""
        assert self.balancer is not None, "start() first"
        return self.balancer.url

    @property
    def state_path(self) -> Path:
        return self.workdir / STATE_FILE

    def replica_env(self, number: int) -> dict[str, str]:
        env = {
            "BROKERGATE_LOG": self.kafka_url,
            "BROKERGATE_COORDINATOR": self.zookeeper_url,
            "BROKERGATE_SESSIONS": self.redis_url,
        }
        if self.security is not None:
            env.update(self.security.replica_env(self.audit_log(number)))
        env.update(self.spec.env)
        env["BROKERGATE_NODE_ID"] = f"gw-{number}"
        return env

    def audit_log(self, number: int) -> Path:
        """Where replica ``number`` (1-based) of a secure cluster appends its audit trail."""
        return self.workdir / f"replica-{number}" / "audit.log"

    # --- lifecycle -----------------------------------------------------------------

    def start(self, cancelled: Callable[[], bool] = lambda: False) -> Self:
        """Start every part in dependency order; ``cancelled`` is asked between steps.

        On any failure (or cancellation) what was started is stopped before the error propagates.
        """
        if not self.workdir.exists():
            self.workdir.mkdir(parents=True)
            # Logs, data and state of a run: never something to commit, wherever the directory is.
            (self.workdir / ".gitignore").write_text("*\n")
        try:
            for step in self._steps():
                if cancelled():
                    raise StartCancelled()
                step()
                self.write_state()
        except BaseException:
            self.stop()
            raise
        return self

    def _steps(self) -> Iterator[Callable[[], None]]:
        if self.security is not None:
            yield self._create_security
        if self.spec.kafka is None:
            yield self._start_broker
        if self.spec.zookeeper is None:
            yield self._start_zookeeper
        if self.spec.redis is None:
            yield self._start_redis
        yield self._start_replicas
        yield self._start_balancer

    def _create_security(self) -> None:
        assert self.security is not None
        self.security.create()

    def _start_broker(self) -> None:
        self.broker = KafkaBroker(self.workdir / "kafka")
        shutil.rmtree(self.broker.data_dir, ignore_errors=True)
        self.broker.start()

    # A new cluster starts empty: groups, offsets and instances of an earlier run in the same
    # directory would point at topics the new broker (its data removed above) does not have.
    def _start_zookeeper(self) -> None:
        self.zookeeper = ZooKeeperServer(self.workdir / "zookeeper", tick_time_ms=self.spec.zookeeper_tick_ms)
        shutil.rmtree(self.zookeeper.data_dir, ignore_errors=True)
        self.zookeeper.start()

    def _start_redis(self) -> None:
        self.redis = RedisServer(self.workdir / "redis", appendonly=self.spec.redis_appendonly)
        shutil.rmtree(self.redis.base_dir / "appendonlydir", ignore_errors=True)
        self.redis.start()

    def _start_replicas(self) -> None:
        for number in range(1, self.spec.replicas + 1):
            home = self.workdir / f"replica-{number}"
            self.replicas.append(
                GatewayReplica(
                    home / "data",
                    args=("--log-level", self.spec.log_level),
                    env=self.replica_env(number),
                    port=free_port(),
                    log_path=home / "gateway.log",
                    tls=self.security.tls if self.security else None,
                )
            )
        # Side by side: each spends most of its start importing and connecting.
        for replica in self.replicas:
            replica.spawn()
        for replica in self.replicas:
            replica.wait_ready(60)

    def _start_balancer(self) -> None:
        self.balancer = NginxBalancer(
            self.workdir / "nginx",
            [f"127.0.0.1:{r.port}" for r in self.replicas],
            port=self.spec.port or free_port(),
            workers=self.spec.nginx_workers,
            tls=self.security.tls if self.security else None,
        )
        self.balancer.start()

    def stop(self) -> list[str]:
        """Stop everything this cluster started, in reverse order, whatever state each part is in.

        Idempotent; a part that fails to stop does not keep the others running. Returns
        what went wrong, if anything.
        """
        problems: list[str] = []

        def attempt(what: str, action: Callable[[], object]) -> None:
            try:
                action()
            except Exception as exc:
                problems.append(f"{what}: {exc!r}")

        if self.balancer is not None:
            attempt("balancer", self.balancer.stop)
        # All replicas drain at once: SIGTERM to every one first, then wait for each.
        for replica in self.replicas:
            attempt(f"replica {replica.url}", replica.terminate)
        for replica in self.replicas:
            attempt(f"replica {replica.url}", replica.stop)
        for name, server in (("redis", self.redis), ("zookeeper", self.zookeeper), ("kafka", self.broker)):
            if server is not None:
                attempt(name, server.stop)
        if self.state_path.exists():
            attempt("state file", self.state_path.unlink)
        return problems

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- replicas ------------------------------------------------------------------

    def kill_replica(self, number: int) -> None:
        """kill -9 replica ``number`` (1-based)."""
        self.replicas[number - 1].kill()
        self.write_state()

    def restart_replica(self, number: int, timeout: float = 60) -> GatewayReplica:
        """Start replica ``number`` again on its port (after a kill, or to roll it)."""
        replica = self.replicas[number - 1].restart(timeout)
        self._reported.discard(f"replica {number}")
        self.write_state()
        return replica

    def supervise(self, restart_replicas: bool) -> list[str]:
        """Look at every process once: report each that died (once), and restart dead replicas."""
        events: list[str] = []
        servers = {
            "kafka": self.broker,
            "zookeeper": self.zookeeper,
            "redis": self.redis,
            "balancer": self.balancer,
        }
        for name, server in servers.items():
            if server is not None and not server.running and name not in self._reported:
                self._reported.add(name)
                events.append(f"{name} (pid {server.pid}) is not running; the cluster is degraded")
        for number, replica in enumerate(self.replicas, 1):
            if replica.running:
                continue
            key = f"replica {number}"
            code = replica.proc.returncode if replica.proc is not None else None
            if restart_replicas:
                try:
                    self.restart_replica(number)
                    events.append(f"{key} exited ({code}); restarted as pid {replica.pid}")
                except RuntimeError as exc:
                    events.append(f"{key} exited ({code}) and did not restart: {exc}")
            elif key not in self._reported:
                self._reported.add(key)
                events.append(f"{key} (pid {replica.pid}) exited ({code})")
        return events

    # --- state file ----------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Where everything is: what ``cluster.json`` holds."""

        def proc(pid: int | None) -> dict[str, Any]:
            return {"pid": pid, "start_ticks": start_ticks(pid) if pid else None}

        return {
            "dir": str(self.workdir),
            "owner": proc(os.getpid()),
            "url": self.balancer.url if self.balancer else None,
            "balancer": None
            if self.balancer is None
            else {
                "url": self.balancer.url,
                "port": self.balancer.port,
                "config": str(self.balancer.config),
                "log": str(self.balancer.error_log),
                **proc(self.balancer.pid),
            },
            "replicas": [
                {
                    "node_id": f"gw-{n}",
                    "url": r.url,
                    "port": r.port,
                    "log": str(r.log_path),
                    "audit_log": str(self.audit_log(n)) if self.security else None,
                    **proc(r.pid if r.running else None),
                }
                for n, r in enumerate(self.replicas, 1)
            ],
            "kafka": {
                "url": self.kafka_url,
                "bootstrap": self.kafka_url.removeprefix("kafka://"),
                "managed": self.broker is not None,
                **proc(self.broker.pid if self.broker else None),
            },
            "zookeeper": {
                "url": self.zookeeper_url,
                "managed": self.zookeeper is not None,
                **proc(self.zookeeper.pid if self.zookeeper else None),
            },
            "redis": {
                "url": self.redis_url,
                "managed": self.redis is not None,
                "appendonly": self.redis.appendonly if self.redis else None,
                **proc(self.redis.pid if self.redis else None),
            },
            "security": self.security.state() if self.security else None,
        }

    def write_state(self) -> None:
        """Write ``cluster.json`` atomically: a reader never sees half a file."""
        partial = self.state_path.with_suffix(".json.tmp")
        partial.write_text(json.dumps(self.state(), indent=2) + "\n")
        partial.replace(self.state_path)
