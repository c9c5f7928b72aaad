"""Where the gateway runs and keeps its data: the address it listens on, the data directory, the
backend of each port (embedded, or the URL of a Kafka, ZooKeeper or Redis), the names it gives
itself to clients; and the embedded log's files (flushing, segments, retention) and the defaults
of the topics a log creates.

``service.server.backends`` reads ``log``, ``coordinator`` and ``sessions`` to pick the adapters
(these validators check only the scheme; the adapters check the rest); the embedded log keeps to
the Log port's ``FlushPolicy``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pydantic import Field, field_validator

from ..core.ports import FlushPolicy
from .group import SettingsGroup

LOOPBACK: Final = "127.0.0.1"
EVERY_INTERFACE: Final = "0.0.0.0"


class DeploymentSettings(SettingsGroup):
    """The listening address, the data directory, the three backends and this replica's names."""

    host: str | None = Field(
        None,
        description="Bind address; default: every interface (0.0.0.0) with authentication on, "
        "loopback only (127.0.0.1) with it off (see Settings.bind_host).",
    )
    port: int = Field(8082, ge=1, le=65535)
    data_dir: Path = Path("./data")
    log: str = "embedded"
    coordinator: str = "embedded"
    sessions: str = "embedded"
    advertised_url: str | None = Field(
        None, description="Base URL put in consumer base_uri; default: see allowed_hosts."
    )
    allowed_hosts: str = Field(
        "localhost,127.0.0.1,::1",
        description="Without advertised_url: Host header names (comma-separated; '*' for any) that "
        "base_uri may be built from; any other Host gets the address the connection reached.",
    )
    node_id: str | None = Field(None, description="This replica's id; default: hostname-pid.")

    @field_validator("log")
    @classmethod
    def _log_scheme(cls, v: str) -> str:
        if v != "embedded" and not v.startswith("kafka://"):
            raise ValueError("log must be 'embedded' or 'kafka://host:port[,host:port...]'")
        return v

    @field_validator("coordinator")
    @classmethod
    def _coordinator_scheme(cls, v: str) -> str:
        if v != "embedded" and not v.startswith("zookeeper://"):
            raise ValueError("coordinator must be 'embedded' or 'zookeeper://host:port[,...][/chroot]'")
        return v

    @field_validator("sessions")
    @classmethod
    def _sessions_scheme(cls, v: str) -> str:
        if v != "embedded" and not v.startswith(("redis://", "rediss://")):
            raise ValueError("sessions must be 'embedded' or 'redis://host:port/db' (rediss:// for TLS)")
        return v

    @property
    def allowed_host_names(self) -> frozenset[str]:
        return frozenset(name.lower() for name in self.split(self.allowed_hosts))


class StorageSettings(SettingsGroup):
    """Flushing, segments and retention of the embedded log; topics created on first use."""

    # embedded log
    flush: FlushPolicy = "always"
    flush_interval_ms: int = Field(1000, ge=1)
    segment_bytes: int = Field(
        64 * 1024 * 1024, ge=1024 * 1024, description="Default segment size; at least 1 MiB, as in Kafka."
    )
    sealed_fds: int = Field(
        128,
        ge=0,
        description="Most sealed segments' log files kept open for reads, all partitions together "
        "(the least recently used is closed first; each partition's active segment keeps its own).",
    )
    segment_ms: int = Field(7 * 24 * 3600 * 1000, ge=1000)
    retention_ms: int = Field(7 * 24 * 3600 * 1000, ge=-1)
    retention_bytes: int = Field(-1, ge=-1)
    retention_check_ms: int = Field(60_000, ge=100)

    # topics
    auto_create_topics_enable: bool = True
    default_partitions: int = Field(1, ge=1)
