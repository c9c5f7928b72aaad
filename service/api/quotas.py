"""Quotas at the HTTP edge: which client a request is from, and the application's ``Quotas``.

The routers of produce and reads check ``quotas.produce``/``quotas.consume``
(fixed at start) and only then call in here, so a gateway without quotas
does no extra work per request.

A client is the value of the configured header (``X-API-Key`` by default),
else its address. Behind a load balancer the address is the balancer's
unless the server trusts it to report the client's: uvicorn, which
``brokergate serve`` runs on, takes the client address from
``X-Forwarded-For`` only when the connection comes from an address listed in
``FORWARDED_ALLOW_IPS`` (default: loopback), so no client can pick its own.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack

from fastapi import Request

from service.adapters.factory import build_quota_store, quota_limits
from service.core.quotas import Quotas, client_id
from service.gateway import Gateway
from service.metrics import Metrics
from service.settings import Settings

log = logging.getLogger("brokergate")

__all__ = ["admit_poll", "admit_read", "client_of", "open_quotas"]


def client_of(request: Request, quotas: Quotas) -> str:
    """The bucket name part of the request's client (an API key is hashed, never kept)."""
    api_key = request.headers.get(quotas.header) if quotas.header else None
    peer = request.client
    return client_id(api_key, peer.host if peer else None)


async def admit_read(request: Request, quotas: Quotas, topic: str) -> str:
    """Admit a stateless read of ``topic`` (or raise ``Throttled``); returns the client, for ``consumed``."""
    client = client_of(request, quotas)
    await quotas.admit_consume(client, (topic,))
    return client


async def admit_poll(request: Request, quotas: Quotas, gw: Gateway, group: str, instance: str) -> str:
    """Admit a consumer instance's poll (or raise ``Throttled``); returns the client, for ``consumed``.

    A poll reads whatever its instance is assigned: with per-topic quotas it
    is refused while any of those topics is in debt.
    """
    client = client_of(request, quotas)
    topics: set[str] = set()
    if quotas.consume_by_topic:
        topics = {tp.topic for tp in await gw.consumers.assignment(group, instance)}
    await quotas.admit_consume(client, topics)
    return client


async def open_quotas(settings: Settings, metrics: Metrics, stack: AsyncExitStack) -> Quotas:
    """The configured quotas, their store started (and its stop pushed on ``stack``); or none."""
    limits = quota_limits(settings)
    if not limits.any:
        return Quotas.off()
    store = build_quota_store(settings)
    await store.start()
    stack.push_async_callback(store.stop)
    if settings.sessions == "embedded" and settings.coordinator != "embedded":
        log.warning(
            "quotas are counted by each replica on its own (a client gets them once per replica it "
            "reaches), unless --sessions redis://... is used"
        )
    throttled = metrics.throttled
    return Quotas(
        store,
        limits,
        header=settings.quota_client_header,
        on_throttled=lambda quota: throttled.labels(quota).inc(),
        on_unchecked=metrics.quota_unchecked.inc,
    )
