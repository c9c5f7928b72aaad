"""What the Kafka log is configured with: the bootstrap servers and the client options.

Pure values, no I/O. ``parse_bootstrap`` reads ``kafka://host:port[,host:port...]``;
``KafkaOptions`` holds the ``kafka_*`` settings (see ``service.settings``) and checks
them once, so a bad value fails at construction with a one-line message rather
than deep inside aiokafka; the credentials among them are a ``KafkaSecurity``
(``security``). The composition root (``service.server.backends.kafka_options``) builds it
from the settings, reading the password file a setting may name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from .security import KafkaSecurity

MiB: Final = 1024 * 1024
SCHEME: Final = "kafka://"

Compression = Literal["none", "gzip", "snappy", "lz4", "zstd"]
COMPRESSIONS: Final[tuple[Compression, ...]] = ("none", "gzip", "snappy", "lz4", "zstd")


def parse_bootstrap(url: str) -> list[str]:
    """``kafka://h1:9092,h2:9092`` (or the same without the scheme) -> ``["h1:9092", "h2:9092"]``.

    Raises ``ValueError`` with a message naming the bad part. IPv6 hosts are
    written in brackets, as Kafka's own clients expect: ``[::1]:9092``.
    """
    rest = url[len(SCHEME) :] if url.startswith(SCHEME) else url
    rest = rest.rstrip("/")
    if not rest:
        raise ValueError(f"log {url!r} names no Kafka server; use kafka://host:port[,host:port...]")
    servers = []
    for part in rest.split(","):
        server = part.strip()
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"log {url!r}: {server!r} is not host:port (port 1-65535)")
        if "/" in host or "@" in host:
            raise ValueError(
                f"log {url!r}: {server!r} is not host:port; paths and credentials are not supported"
            )
        servers.append(f"{host}:{int(port)}")
    return servers


def codec_available(compression: str) -> bool:
    """Whether aiokafka can use ``compression`` here (gzip is in the standard library; the
    others need an extra package)."""
    if compression in ("none", "gzip"):
        return True
    from aiokafka import codec

    checks = {"snappy": codec.has_snappy, "lz4": codec.has_lz4, "zstd": codec.has_zstd}
    check = checks.get(compression)
    return bool(check and check())


@dataclass(frozen=True, slots=True)
class KafkaOptions:
    """The knobs of ``KafkaLog``; defaults match ``service.settings.Settings``.

    ``request_timeout_ms`` bounds every wait on the cluster (start, produce,
    admin, metadata; a fetch may additionally wait its long-poll time).
    ``buffer_bytes`` bounds the bytes of records handed to the producer and not
    yet acknowledged; ``readahead_bytes`` bounds the fetched-but-not-returned
    records kept for sequential readers. ``idempotence`` needs a broker with
    InitProducerId (Kafka >= 0.11); turn it off only for brokers that lack it.
    ``security`` is how every client of the log signs in (PLAINTEXT by default).
    """

    client_id: str = "brokergate"
    request_timeout_ms: int = 30_000
    linger_ms: int = 0
    batch_bytes: int = MiB
    compression: Compression = "none"
    buffer_bytes: int = 64 * MiB
    readahead_bytes: int = 32 * MiB
    idempotence: bool = True
    metadata_max_age_ms: int = 5_000
    fetch_max_wait_ms: int = 500
    fetch_bytes: int = MiB
    security: KafkaSecurity = field(default_factory=KafkaSecurity)

    def __post_init__(self) -> None:
        positive = {
            "request_timeout_ms": self.request_timeout_ms,
            "batch_bytes": self.batch_bytes,
            "buffer_bytes": self.buffer_bytes,
            "fetch_max_wait_ms": self.fetch_max_wait_ms,
            "fetch_bytes": self.fetch_bytes,
        }
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"kafka {name} must be positive, got {value}")
        for name, value in {
            "linger_ms": self.linger_ms,
            "readahead_bytes": self.readahead_bytes,
            "metadata_max_age_ms": self.metadata_max_age_ms,
        }.items():
            if value < 0:
                raise ValueError(f"kafka {name} must not be negative, got {value}")
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"kafka compression must be one of {', '.join(COMPRESSIONS)}")
        if not codec_available(self.compression):
            raise ValueError(
                f"kafka compression {self.compression!r} needs its Python package, which is not "
                "installed; use 'none' or 'gzip'"
            )
        if not self.client_id:
            raise ValueError("kafka client_id must not be empty")

    @property
    def request_timeout(self) -> float:
        """``request_timeout_ms`` in seconds, as asyncio wants it."""
        return self.request_timeout_ms / 1000

    @property
    def aiokafka_compression(self) -> str | None:
        return None if self.compression == "none" else self.compression
