"""What the routers depend on: the ``Gateway``, everything a request may need, in one place.

The composition root (``service.server.app``) builds it once per application, from the settings,
the three ports, the quotas and the metrics, and puts it on ``app.state``; routers and the produce
fast path reach it through ``get_gateway`` (or ``gateway_of``) and nothing else: no router reads
``app.state``, opens an adapter or builds a service.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from fastapi import FastAPI, Request
from starlette.types import Scope

from service.core.acl import Access
from service.core.consumers import ConsumerService
from service.core.groups import GroupManager
from service.core.idempotency import IdempotencyGuard
from service.core.ports import Coordinator, Log, SchemaResolver, Sessions
from service.core.producer import ProduceService
from service.core.push.service import PushService
from service.core.quotas import Quotas
from service.core.schemas.registry import SchemaRegistry
from service.core.schemas.serde import Serde
from service.core.shares.consumers import ShareAdmin, ShareConsumers
from service.core.streams import StreamService
from service.core.topics import TopicService
from service.metrics import Metrics
from service.settings import Settings


@dataclass(slots=True, kw_only=True)
class Gateway:
    """The parts a request may need: the settings, the ports, and the core services over them."""

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
    push: PushService  # push subscriptions: records delivered to HTTP endpoints
    # Set when a push subscription changed through this replica: the push worker looks at once.
    push_changed: asyncio.Event
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


def gateway_of(scope: Scope) -> Gateway:
    """The gateway of the application serving ``scope`` (set by the lifespan before any request)."""
    gateway: Gateway = scope["app"].state.gateway
    return gateway


async def get_gateway(request: Request) -> Gateway:
    """The FastAPI dependency routers declare (async on purpose: FastAPI would run a plain function
    dependency in a worker thread)."""
    return gateway_of(request.scope)


def begin_drain(app: FastAPI) -> None:
    """Tell a running app the server is stopping (from a signal handler too): open long-polls and
    stateless reads answer with what they have instead of holding the shutdown for their timeout."""
    gateway: Gateway | None = getattr(app.state, "gateway", None)
    if gateway is not None:
        gateway.drain()
