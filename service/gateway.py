"""The wired-up gateway: everything a request may need, in one place.

Built once per application by ``service.app.create_app``'s lifespan from the
settings, the three ports, the quotas and the metrics; routers and the
produce fast path reach it through ``get_gateway`` (or ``gateway_of``) and
nothing else: no router reads ``app.state`` or opens an adapter.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from fastapi import Request
from starlette.types import Scope

from .core.acl import Access
from .core.consumers import ConsumerService, InstanceLimits
from .core.groups import GroupManager
from .core.idempotency import IdempotencyGuard
from .core.partitioner import Partitioner
from .core.ports import Coordinator, Log, Sessions
from .core.producer import ProduceService
from .core.quotas import Quotas
from .core.topics import TopicService
from .core.waits import OpenWaits
from .metrics import Metrics
from .settings import Settings


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
    idempotency: IdempotencyGuard
    access: Access  # who may do what: the ACL bindings, or everything when authorization is off
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
        metadata_changed = asyncio.Event()
        draining = asyncio.Event()
        waits = OpenWaits(settings.max_open_polls)  # polls and stateless reads share one bound
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
            consumers=ConsumerService(
                log,
                coordinator,
                sessions,
                groups,
                topics,
                quotas,
                draining=draining,
                limits=InstanceLimits(settings.max_instances_per_group, settings.max_instances),
                waits=waits,
            ),
            idempotency=IdempotencyGuard(
                sessions, window_ms=settings.idempotency_window_ms, wait_ms=settings.idempotency_wait_ms
            ),
            access=access,
            metadata_changed=metadata_changed,
            draining=draining,
            loop=asyncio.get_running_loop(),
        )


def gateway_of(scope: Scope) -> Gateway:
    """The gateway of the application serving ``scope`` (set by the lifespan before any request)."""
    gateway: Gateway = scope["app"].state.gateway
    return gateway


async def get_gateway(request: Request) -> Gateway:
    """The FastAPI dependency routers declare (async on purpose: FastAPI would run a plain function
    dependency in a worker thread)."""
    return gateway_of(request.scope)
