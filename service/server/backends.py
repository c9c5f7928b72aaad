"""The composition root's adapter half: one adapter per port, chosen and configured from the settings.

The only module that knows every adapter, and the only one that reads the settings into their
options (``kafka_options``, ``redis_security``, ``digest_credentials``, ``registry_client_options``):
the adapters themselves never see the settings. Imports are local so a deployment that does not
use a backend never imports its client library. ``service.server.app`` is the rest of the root.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from service.adapters.secrets import secret
from service.adapters.share_states import ShareStoreLimits
from service.adapters.tls import client_context
from service.core.ports import Coordinator, GroupOffsets, Log, QuotaStore, Sessions
from service.settings import Settings

if TYPE_CHECKING:
    from service.adapters.kafka.options import KafkaOptions
    from service.adapters.kafka.security import KafkaSecurity
    from service.adapters.redis.security import RedisSecurity
    from service.adapters.registry.options import RegistryClientOptions
    from service.adapters.zookeeper.security import DigestCredentials

REDIS_SCHEMES = ("redis://", "rediss://")


class BackendNotAvailable(Exception):
    """A configured backend has no adapter in this build, or cannot be built from the settings
    (a malformed URL, credentials that do not fit together, an unreadable certificate or
    password file); the message is one line for the CLI."""


def build_log(settings: Settings) -> Log:
    if settings.log == "embedded":
        from service.adapters.embedded.log import EmbeddedLog

        return EmbeddedLog(
            settings.data_dir,
            flush=settings.flush,
            flush_interval_ms=settings.flush_interval_ms,
            segment_bytes=settings.segment_bytes,
            sealed_fds=settings.sealed_fds,
            connection_fds=settings.max_connections,
            segment_ms=settings.segment_ms,
            retention_ms=settings.retention_ms,
            retention_bytes=settings.retention_bytes,
            advertised_port=settings.port,
        )
    if settings.log.startswith("kafka://"):
        from service.adapters.kafka import KafkaLog

        try:
            return KafkaLog(settings.log, kafka_options(settings))
        except ValueError as exc:  # a malformed URL, option or credential: one line for the CLI
            raise BackendNotAvailable(str(exc)) from exc
    raise BackendNotAvailable(f"log backend {settings.log!r} has no adapter")


def share_store_limits(settings: Settings) -> ShareStoreLimits:
    """How much share-group state a coordinator keeps (the ``share_max_*`` settings)."""
    return ShareStoreLimits(
        max_groups=settings.share_max_groups,
        max_partitions=settings.share_max_partitions,
        max_state_bytes=settings.share_max_state_bytes,
    )


def build_coordinator(settings: Settings) -> Coordinator:
    if settings.coordinator == "embedded":
        from service.adapters.embedded.coordinator import EmbeddedCoordinator

        return EmbeddedCoordinator(settings.data_dir, share_limits=share_store_limits(settings))
    if settings.coordinator.startswith("zookeeper://"):
        from service.adapters.zookeeper import ZooKeeperCoordinator

        try:
            return ZooKeeperCoordinator(
                settings.coordinator,
                node_id=settings.node_id,
                session_timeout_ms=settings.zookeeper_session_timeout_ms,
                connect_timeout_ms=settings.zookeeper_connect_timeout_ms,
                request_timeout_ms=settings.zookeeper_request_timeout_ms,
                # in-process sessions die with this replica: so must its members
                ephemeral_members=settings.sessions == "embedded",
                credentials=digest_credentials(settings),
                share_limits=share_store_limits(settings),
            )
        except ValueError as exc:  # a malformed URL or bad credentials: one line for the CLI
            raise BackendNotAvailable(str(exc)) from exc
    raise BackendNotAvailable(f"coordinator backend {settings.coordinator!r} has no adapter")


def build_sessions(settings: Settings) -> Sessions:
    if settings.sessions == "embedded":
        from service.adapters.embedded.sessions import EmbeddedSessions

        return EmbeddedSessions(
            max_idempotency_keys=settings.idempotency_max_keys,
            max_idempotency_bytes=settings.idempotency_max_bytes,
        )
    if settings.sessions.startswith(REDIS_SCHEMES):
        from service.adapters.redis import RedisSessions

        try:
            return RedisSessions(
                settings.sessions,
                key_prefix=settings.redis_key_prefix,
                connect_timeout_ms=settings.redis_connect_timeout_ms,
                socket_timeout_ms=settings.redis_socket_timeout_ms,
                ttl_margin_ms=settings.redis_ttl_margin_ms,
                security=redis_security(settings),
            )
        except ValueError as exc:  # a malformed URL or bad credentials: one line for the CLI
            raise BackendNotAvailable(str(exc)) from exc
    raise BackendNotAvailable(f"sessions backend {settings.sessions!r} has no adapter")


def build_quota_store(settings: Settings) -> QuotaStore:
    """Where quota buckets live: in Redis when the sessions are (so every replica shares them)."""
    if settings.sessions.startswith(REDIS_SCHEMES):
        from service.adapters.redis.quotas import RedisQuotas

        try:
            return RedisQuotas(
                settings.sessions,
                key_prefix=settings.redis_key_prefix,
                connect_timeout_ms=settings.redis_connect_timeout_ms,
                socket_timeout_ms=settings.redis_socket_timeout_ms,
                security=redis_security(settings),
            )
        except ValueError as exc:  # a malformed URL or bad credentials: one line for the CLI
            raise BackendNotAvailable(str(exc)) from exc
    from service.adapters.embedded.quotas import EmbeddedQuotas

    return EmbeddedQuotas()


def build_ports(settings: Settings) -> tuple[Log, Coordinator, Sessions]:
    """All three adapters, or ``BackendNotAvailable`` before anything is opened.

    With a Kafka log, committed offsets are Kafka's (``build_group_offsets``): the coordinator
    the settings name keeps the rest of what a ``Coordinator`` holds."""
    log = build_log(settings)
    coordinator = build_coordinator(settings)
    offsets = build_group_offsets(settings)
    if offsets is not None:
        from service.adapters.split_offsets import SplitOffsetsCoordinator

        coordinator = SplitOffsetsCoordinator(coordinator, offsets)
    return log, coordinator, build_sessions(settings)


def build_group_offsets(settings: Settings) -> GroupOffsets | None:
    """Where committed offsets go when not in the coordinator: Kafka's group coordinator, when
    the log is Kafka (so that Kafka's tools, autoscalers and native consumers see them)."""
    if not settings.log.startswith("kafka://"):
        return None
    from service.adapters.kafka.group_offsets import KafkaGroupOffsets

    try:
        return KafkaGroupOffsets(settings.log, kafka_options(settings))
    except ValueError as exc:  # a malformed URL, option or credential: one line for the CLI
        raise BackendNotAvailable(str(exc)) from exc


# --- what each adapter is given: the settings' values, secrets read from their files ---------


def kafka_options(settings: Settings) -> KafkaOptions:
    from service.adapters.kafka.options import KafkaOptions

    return KafkaOptions(
        client_id=settings.kafka_client_id,
        request_timeout_ms=settings.kafka_request_timeout_ms,
        linger_ms=settings.kafka_linger_ms,
        batch_bytes=settings.kafka_batch_bytes,
        compression=settings.kafka_compression,
        buffer_bytes=settings.kafka_buffer_bytes,
        readahead_bytes=settings.kafka_readahead_bytes,
        idempotence=settings.kafka_idempotence,
        metadata_max_age_ms=settings.kafka_metadata_max_age_ms,
        fetch_max_wait_ms=settings.kafka_fetch_max_wait_ms,
        fetch_bytes=settings.kafka_fetch_bytes,
        security=kafka_security(settings),
    )


def kafka_security(settings: Settings) -> KafkaSecurity:
    """The settings' values; reads ``kafka_sasl_password_file`` (``ValueError`` if it cannot)."""
    from service.adapters.kafka.security import KafkaSecurity

    return KafkaSecurity(
        protocol=settings.kafka_security_protocol,
        sasl_mechanism=settings.kafka_sasl_mechanism,
        username=settings.kafka_sasl_username,
        password=secret(
            settings.kafka_sasl_password, settings.kafka_sasl_password_file, setting="kafka_sasl_password"
        ),
        oauth_token=secret(settings.kafka_sasl_oauth_token, None, setting="kafka_sasl_oauth_token"),
        oauth_token_file=settings.kafka_sasl_oauth_token_file,
        ssl_cafile=settings.kafka_ssl_cafile,
        ssl_certfile=settings.kafka_ssl_certfile,
        ssl_keyfile=settings.kafka_ssl_keyfile,
        ssl_key_password=secret(settings.kafka_ssl_password, None, setting="kafka_ssl_password"),
    )


def registry_client_options(settings: Settings) -> RegistryClientOptions:
    """The settings' values; reads ``schema_registry_password_file`` and the TLS files
    (``ValueError`` naming the setting if one cannot be used)."""
    from service.adapters.registry.options import RegistryClientOptions

    url = settings.schema_registry.rstrip("/")
    tls = None
    if url.startswith("https://"):
        tls = client_context(
            cafile=settings.schema_registry_ssl_cafile,
            certfile=settings.schema_registry_ssl_certfile,
            keyfile=settings.schema_registry_ssl_keyfile,
            password=secret(
                settings.schema_registry_ssl_password, None, setting="schema_registry_ssl_password"
            ),
            setting="schema_registry_ssl",
        )
    return RegistryClientOptions(
        url=url,
        username=settings.schema_registry_username,
        password=secret(
            settings.schema_registry_password,
            settings.schema_registry_password_file,
            setting="schema_registry_password",
        ),
        tls=tls,
        timeout_ms=settings.schema_registry_request_timeout_ms,
        max_schema_bytes=settings.schema_registry_max_schema_bytes,
        cache_chars=settings.schema_registry_cache_bytes,
    )


def redis_security(settings: Settings) -> RedisSecurity:
    """The settings' values; reads ``redis_password_file`` (``ValueError`` if it cannot)."""
    from service.adapters.redis.security import RedisSecurity

    return RedisSecurity(
        username=settings.redis_username,
        password=secret(settings.redis_password, settings.redis_password_file, setting="redis_password"),
        ssl_cafile=settings.redis_ssl_cafile,
        ssl_certfile=settings.redis_ssl_certfile,
        ssl_keyfile=settings.redis_ssl_keyfile,
        ssl_key_password=secret(settings.redis_ssl_password, None, setting="redis_ssl_password"),
    )


def digest_credentials(settings: Settings) -> DigestCredentials | None:
    """The settings' credentials (reading ``zookeeper_password_file``), or None if none are set."""
    from service.adapters.zookeeper.security import DigestCredentials

    password = secret(
        settings.zookeeper_password, settings.zookeeper_password_file, setting="zookeeper_password"
    )
    if settings.zookeeper_username is None and password is None:
        return None
    if settings.zookeeper_username is None or password is None:
        raise ValueError(
            "ZooKeeper digest credentials need both zookeeper_username and zookeeper_password "
            "(or zookeeper_password_file)"
        )
    return DigestCredentials(
        settings.zookeeper_username, password, world_readable=settings.zookeeper_world_readable
    )
