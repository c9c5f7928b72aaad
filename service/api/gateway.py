"""The wired-up gateway: everything a request may need, in one place.

Built once per application by ``service.server.app.create_app``'s lifespan from the
settings, the three ports, the quotas and the metrics (the lifespan also starts
and stops the schema registry built here); routers and the
produce fast path reach it through ``get_gateway`` (or ``gateway_of``) and
nothing else: no router reads ``app.state`` or opens an adapter.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import Request
from starlette.types import Scope

from service.core.acl import Access
from service.core.consumers import ConsumerService
from service.core.credit import CreditLimits
from service.core.fair import InstanceLimits
from service.core.groups import GroupManager
from service.core.idempotency import IdempotencyGuard
from service.core.partitioner import Partitioner
from service.core.ports import Coordinator, Log, SchemaResolver, Sessions
from service.core.producer import ProduceService
from service.core.quotas import Quotas
from service.core.schemas.registry import RegistryLimits, SchemaRegistry
from service.core.schemas.serde import Serde
from service.core.shares.consumers import ShareAdmin, ShareConsumers
from service.core.shares.dead_letters import DeadLetters
from service.core.shares.service import ShareGroups
from service.core.shares.state import ShareLimits
from service.core.streams import StreamLimits, StreamService
from service.core.topics import TopicService
from service.core.waits import OpenWaits
from service.metrics import Metrics
from service.settings import Settings

if TYPE_CHECKING:
    from service.adapters.registry import HttpSchemaRegistry


@dataclass(slots=True, kw_only=True)
class Gateway:
    settings: Settings
    log: Log
    coordinator: Coordinator
    sessions: Sessions
    quotas: Quotas
    metrics: Metrics
    topics: TopicService
    producer: ProduceService
    groups: GroupManager
    consumers: ConsumerService
    share_consumers: ShareConsumers  # share groups' consumers (KIP-932), over ``ShareGroups``
    share_admin: ShareAdmin  # share groups as an administrator sees them
    streams: StreamService  # SSE and WebSocket streams over the consumers and topics
    idempotency: IdempotencyGuard
    access: Access  # who may do what: the ACL bindings, or everything when authorization is off
    # the embedded schema registry, whose API /schema-registry serves; None with an external registry
    registry: SchemaRegistry | None
    schemas: SchemaResolver  # what producing and consuming with schemas ask of a registry
    serde: Serde  # JSON to and from the wire format with those schemas
    # Set when topic metadata changed in a way groups may care about (a topic was auto-created);
    # the metadata worker wakes on it instead of waiting out its interval.
    metadata_changed: asyncio.Event
    # Set when the server was asked to stop: long-polls answer with what they have, at once.
    draining: asyncio.Event
    loop: asyncio.AbstractEventLoop

    def drain(self) -> None:
        """Start draining; safe from a signal handler or another thread."""
        self.loop.call_soon_threadsafe(self.draining.set)

    @classmethod
    def build(
        cls,
        settings: Settings,
        log: Log,
        coordinator: Coordinator,
        sessions: Sessions,
        *,
        quotas: Quotas | None = None,
        metrics: Metrics | None = None,
    ) -> Gateway:
        quotas = quotas or Quotas.off()
        registry = schema_registry(settings, log, coordinator)
        serde = Serde(registry, strategy=settings.schema_subject_strategy)
        metadata_changed = asyncio.Event()
        draining = asyncio.Event()
        # polls and stateless reads share one bound, and each principal's share of it
        waits = OpenWaits(settings.max_open_polls, share=settings.max_open_polls_per_principal)
        access = Access(coordinator.acls, super_users=settings.super_user_names, enabled=settings.authorize)
        groups = GroupManager(log, coordinator, access)
        topics = TopicService(
            log,
            auto_create=settings.auto_create_topics_enable,
            default_partitions=settings.default_partitions,
            on_change=groups.refresh,
            on_created=metadata_changed.set,
            draining=draining,
            waits=waits,
            reserved={settings.schema_registry_topic: "the schema registry's records"},
        )
        instance_limits = InstanceLimits(
            settings.max_instances_per_group, settings.max_instances, settings.max_instances_per_principal
        )
        template = settings.share_dead_letter_topic
        shares = ShareGroups(
            log,
            coordinator,
            limits=ShareLimits(
                max_in_flight=settings.share_partition_max_record_locks,
                delivery_limit=settings.share_delivery_attempt_limit,
                lock_ms=settings.share_record_lock_duration_ms,
                park=bool(template),
            ),
            dead_letters=DeadLetters(log, topics, template) if template else None,
            draining=draining,
        )
        share_consumers = ShareConsumers(
            log,
            coordinator,
            sessions,
            shares,
            quotas,
            limits=instance_limits,
            waits=waits,
            serde=serde,
            max_partitions=settings.share_max_partitions,
        )
        consumers = ConsumerService(
            log,
            coordinator,
            sessions,
            groups,
            topics,
            quotas,
            draining=draining,
            limits=instance_limits,
            waits=waits,
            serde=serde,
            shares=share_consumers,
        )
        return cls(
            settings=settings,
            log=log,
            coordinator=coordinator,
            sessions=sessions,
            quotas=quotas,
            metrics=metrics or Metrics(),
            topics=topics,
            producer=ProduceService(log, topics, Partitioner(), quotas),
            groups=groups,
            consumers=consumers,
            share_consumers=share_consumers,
            share_admin=ShareAdmin(coordinator, sessions, shares, log),
            streams=StreamService(
                consumers,
                topics,
                quotas=quotas,
                serde=serde,
                limits=stream_limits(settings),
                draining=draining,
            ),
            idempotency=IdempotencyGuard(
                sessions, window_ms=settings.idempotency_window_ms, wait_ms=settings.idempotency_wait_ms
            ),
            access=access,
            registry=registry if isinstance(registry, SchemaRegistry) else None,
            schemas=registry,
            serde=serde,
            metadata_changed=metadata_changed,
            draining=draining,
            loop=asyncio.get_running_loop(),
        )


def stream_limits(settings: Settings) -> StreamLimits:
    """The bounds of the streams the settings ask for (``max_open_streams``, ``stream_*``)."""
    return StreamLimits(
        open=settings.max_open_streams,
        open_per_holder=settings.max_open_streams_per_principal,
        heartbeat_ms=settings.stream_heartbeat_ms,
        lifetime_ms=settings.stream_max_lifetime_ms,
        send_timeout_ms=settings.stream_send_timeout_ms,
        batch_bytes=settings.stream_max_batch_bytes,
        message_bytes=settings.stream_max_message_bytes,
        credit=CreditLimits(settings.stream_max_credit_records, settings.stream_max_credit_bytes),
        held_bytes=settings.stream_max_held_bytes,
        held_bytes_per_holder=settings.stream_max_held_bytes_per_principal,
    )


def schema_registry(
    settings: Settings, log: Log, coordinator: Coordinator
) -> SchemaRegistry | HttpSchemaRegistry:
    """The registry of the settings: the embedded one, or the client of the external registry at
    the URL ``schema_registry`` is (``ValueError`` naming the setting if a password or TLS file of
    its cannot be used). Neither connects to anything before it is started."""
    if settings.schema_registry != "embedded":
        from service.adapters.registry import HttpSchemaRegistry, RegistryClientOptions

        return HttpSchemaRegistry(RegistryClientOptions.from_settings(settings))
    return SchemaRegistry(
        log,
        coordinator,
        topic=settings.schema_registry_topic,
        default_compatibility=settings.schema_registry_compatibility,
        limits=RegistryLimits(
            schema_bytes=settings.schema_registry_max_schema_bytes,
            schemas=settings.schema_registry_max_schemas,
            subjects=settings.schema_registry_max_subjects,
            versions=settings.schema_registry_max_versions,
            total_bytes=settings.schema_registry_max_bytes,
            cache_chars=settings.schema_registry_cache_bytes,
        ),
        lock_timeout_s=settings.schema_registry_lock_timeout_ms / 1000,
    )


def gateway_of(scope: Scope) -> Gateway:
    """The gateway of the application serving ``scope`` (set by the lifespan before any request)."""
    gateway: Gateway = scope["app"].state.gateway
    return gateway


async def get_gateway(request: Request) -> Gateway:
    """The FastAPI dependency routers declare (async on purpose: FastAPI would run a plain function
    dependency in a worker thread)."""
    return gateway_of(request.scope)
