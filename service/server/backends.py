"""Picks one adapter per port from the settings.

The only module that knows every adapter; imports are local so a deployment
that does not use a backend never imports its client library.
"""

from __future__ import annotations

from service.adapters.share_states import ShareStoreLimits
from service.core.ports import Coordinator, Log, QuotaStore, Sessions
from service.core.quotas import QuotaLimits
from service.settings import Settings

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
        from service.adapters.kafka.options import KafkaOptions

        try:
            return KafkaLog(settings.log, KafkaOptions.from_settings(settings))
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
        from service.adapters.zookeeper.security import DigestCredentials

        try:
            return ZooKeeperCoordinator(
                settings.coordinator,
                node_id=settings.node_id,
                session_timeout_ms=settings.zookeeper_session_timeout_ms,
                connect_timeout_ms=settings.zookeeper_connect_timeout_ms,
                request_timeout_ms=settings.zookeeper_request_timeout_ms,
                # in-process sessions die with this replica: so must its members
                ephemeral_members=settings.sessions == "embedded",
                credentials=DigestCredentials.from_settings(settings),
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
        from service.adapters.redis.security import RedisSecurity

        try:
            return RedisSessions(
                settings.sessions,
                key_prefix=settings.redis_key_prefix,
                connect_timeout_ms=settings.redis_connect_timeout_ms,
                socket_timeout_ms=settings.redis_socket_timeout_ms,
                ttl_margin_ms=settings.redis_ttl_margin_ms,
                security=RedisSecurity.from_settings(settings),
            )
        except ValueError as exc:  # a malformed URL or bad credentials: one line for the CLI
            raise BackendNotAvailable(str(exc)) from exc
    raise BackendNotAvailable(f"sessions backend {settings.sessions!r} has no adapter")


def quota_limits(settings: Settings) -> QuotaLimits:
    return QuotaLimits.from_rates(
        burst_s=settings.quota_burst_s,
        client_produce=settings.quota_client_produce_bytes_per_s,
        client_consume=settings.quota_client_consume_bytes_per_s,
        topic_produce=settings.quota_topic_produce_bytes_per_s,
        topic_consume=settings.quota_topic_consume_bytes_per_s,
        client_requests=settings.quota_client_requests_per_s,
    )


def build_quota_store(settings: Settings) -> QuotaStore:
    """Where quota buckets live: in Redis when the sessions are (so every replica shares them)."""
    if settings.sessions.startswith(REDIS_SCHEMES):
        from service.adapters.redis.quotas import RedisQuotas
        from service.adapters.redis.security import RedisSecurity

        try:
            return RedisQuotas(
                settings.sessions,
                key_prefix=settings.redis_key_prefix,
                connect_timeout_ms=settings.redis_connect_timeout_ms,
                socket_timeout_ms=settings.redis_socket_timeout_ms,
                security=RedisSecurity.from_settings(settings),
            )
        except ValueError as exc:  # a malformed URL or bad credentials: one line for the CLI
            raise BackendNotAvailable(str(exc)) from exc
    from service.adapters.embedded.quotas import EmbeddedQuotas

    return EmbeddedQuotas()


def build_ports(settings: Settings) -> tuple[Log, Coordinator, Sessions]:
    """All three adapters, or ``BackendNotAvailable`` before anything is opened."""
    return build_log(settings), build_coordinator(settings), build_sessions(settings)
