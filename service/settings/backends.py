"""How the gateway talks to its distributed backends: Kafka (the log), ZooKeeper (the coordinator)
and Redis (the sessions), and the credentials it signs in to each with.

The adapters' options (``service.adapters.kafka.options``, ``.zookeeper.security``,
``.redis.security``) read them and check how the credentials combine when the adapters are built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from .group import SettingsGroup


class BackendCredentialSettings(SettingsGroup):
    """The gateway's own credentials and TLS to Kafka, ZooKeeper and Redis."""

    # the gateway's own credentials to its backends: how it signs in to Kafka, ZooKeeper and Redis
    # (not how clients sign in to it). Secrets are SecretStr, never shown in a repr or a log; a
    # *_file setting names a file holding the secret instead (a mounted Kubernetes Secret), read at
    # start. Combinations are checked when the adapters are built, before anything connects: a bad
    # one stops the start with one line naming the settings.
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT",
        description="How the gateway connects to Kafka: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT, or SASL_SSL "
        "(SASL over TLS).",
    )
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = Field(
        None, description="With SASL_*: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER."
    )
    kafka_sasl_username: str | None = Field(None, description="The gateway's Kafka user (PLAIN, SCRAM-*).")
    kafka_sasl_password: SecretStr | None = Field(None, description="Its password (PLAIN, SCRAM-*).")
    kafka_sasl_password_file: Path | None = Field(
        None, description="A file holding the Kafka password, instead of kafka_sasl_password."
    )
    kafka_sasl_oauth_token: SecretStr | None = Field(None, description="OAUTHBEARER: a fixed token.")
    kafka_sasl_oauth_token_file: Path | None = Field(
        None,
        description="OAUTHBEARER: a file holding the token, read again whenever it changes (whatever "
        "refreshes the token rewrites it).",
    )
    kafka_ssl_cafile: Path | None = Field(
        None,
        description="With SSL or SASL_SSL: CA certificates (PEM) the brokers' certificates and hostnames "
        "are checked against; default: the system's.",
    )
    kafka_ssl_certfile: Path | None = Field(
        None, description="The gateway's client certificate (PEM) for Kafka's mutual TLS; may hold its key."
    )
    kafka_ssl_keyfile: Path | None = Field(None, description="The key (PEM) of kafka_ssl_certfile, if apart.")
    kafka_ssl_password: SecretStr | None = Field(None, description="The password of an encrypted Kafka key.")
    zookeeper_username: str | None = Field(
        None,
        description="ZooKeeper digest user: the session signs in as it, and every znode the gateway "
        "creates is changeable by it alone (the same on every replica).",
    )
    zookeeper_password: SecretStr | None = Field(None, description="The ZooKeeper digest password.")
    zookeeper_password_file: Path | None = Field(
        None, description="A file holding the ZooKeeper password, instead of zookeeper_password."
    )
    zookeeper_world_readable: bool = Field(
        True,
        description="With ZooKeeper credentials: anyone may still read the gateway's znodes (offsets, "
        "ACL bindings), as Kafka's zookeeper.set.acl leaves them; false: only the gateway.",
    )
    redis_username: str | None = Field(
        None,
        description="Redis ACL user (with redis_password); without it, the password is the default user's.",
    )
    redis_password: SecretStr | None = Field(None, description="Redis password (AUTH).")
    redis_password_file: Path | None = Field(
        None, description="A file holding the Redis password, instead of redis_password."
    )
    redis_ssl_cafile: Path | None = Field(
        None,
        description="With rediss:// sessions: CA certificates (PEM) Redis's certificate and hostname are "
        "checked against; default: the system's.",
    )
    redis_ssl_certfile: Path | None = Field(
        None,
        description="The gateway's client certificate (PEM) for Redis's tls-auth-clients; may hold its key.",
    )
    redis_ssl_keyfile: Path | None = Field(None, description="The key (PEM) of redis_ssl_certfile, if apart.")
    redis_ssl_password: SecretStr | None = Field(None, description="The password of an encrypted Redis key.")

    @field_validator("kafka_security_protocol", "kafka_sasl_mechanism", mode="before")
    @classmethod
    def _kafka_names_upper(cls, v: object) -> object:
        # Kafka's own configs spell them in capitals; accept any case, as its clients do
        return v.upper() if isinstance(v, str) else v


class RedisSettings(SettingsGroup):
    """Redis sessions: timeouts, the deployment's key prefix, how long idle state outlives its timeout."""

    # redis sessions (--sessions redis://...)
    redis_connect_timeout_ms: int = Field(
        2_000, ge=50, description="How long start waits for Redis, and the longest wait to connect."
    )
    redis_socket_timeout_ms: int = Field(
        2_000, ge=50, description="Longest wait for one Redis reply before answering 503."
    )
    redis_key_prefix: str = Field(
        "brokergate:", min_length=1, description="Prefix of every Redis key: one per deployment."
    )
    redis_ttl_margin_ms: int = Field(
        60_000, ge=0, description="How long an idle instance outlives its timeout in Redis, for the reaper."
    )


class ZooKeeperSettings(SettingsGroup):
    """The ZooKeeper coordinator's session, start and request timeouts."""

    # zookeeper coordinator
    zookeeper_session_timeout_ms: int = Field(
        10_000, ge=500, description="ZooKeeper session timeout: how soon a dead replica's leadership moves."
    )
    zookeeper_connect_timeout_ms: int = Field(
        10_000, ge=100, description="How long start waits for ZooKeeper before refusing to start."
    )
    zookeeper_request_timeout_ms: int = Field(
        5_000, ge=100, description="Longest wait for one ZooKeeper request before answering 503."
    )


class KafkaSettings(SettingsGroup):
    """The Kafka log's client: its id, timeouts, producer batching and compression, and fetching."""

    # kafka log (--log kafka://...)
    kafka_client_id: str = Field("brokergate", min_length=1, description="Client id sent to Kafka.")
    kafka_request_timeout_ms: int = Field(
        30_000, ge=100, description="Longest wait on the Kafka cluster (start, produce, admin) before 503."
    )
    kafka_linger_ms: int = Field(0, ge=0, description="How long a produce batch may wait for company.")
    kafka_batch_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest Kafka record batch (capped by the topic's max.message.bytes).",
    )
    kafka_compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = Field(
        "none", description="Batch compression; snappy, lz4 and zstd need their Python package."
    )
    kafka_buffer_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Records handed to the producer and not yet acknowledged."
    )
    kafka_readahead_bytes: int = Field(
        32 * 1024 * 1024, ge=0, description="Fetched records kept for sequential readers (0: off)."
    )
    kafka_idempotence: bool = Field(
        True,
        description="Idempotent producer, as Kafka's clients; off only for a broker without InitProducerId.",
    )
    kafka_metadata_max_age_ms: int = Field(
        5_000, ge=0, description="How long a described topic (partitions, leaders, configs) is reused."
    )
    kafka_fetch_max_wait_ms: int = Field(
        500, ge=1, description="Longest wait of one FetchRequest; longer polls send several."
    )
    kafka_fetch_bytes: int = Field(
        1024 * 1024,
        ge=1,
        description="Bytes asked per partition and fetch (what exceeds max_bytes is read ahead).",
    )

    @field_validator("kafka_compression")
    @classmethod
    def _kafka_codec(cls, v: str) -> str:
        if v in ("none", "gzip"):  # gzip is in the standard library
            return v
        from aiokafka import codec  # only when a codec with an optional package is asked for

        if not {"snappy": codec.has_snappy, "lz4": codec.has_lz4, "zstd": codec.has_zstd}[v]():
            raise ValueError(f"kafka_compression {v!r} needs its Python package, which is not installed")
        return v
