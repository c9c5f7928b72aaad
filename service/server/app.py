"""The composition root: the one place that turns the settings into brokergate's parts and connects them.

Read top to bottom, it shows every part and what it is given:

- ``create_app`` builds the application. At its start (the lifespan, an ``AsyncExitStack`` closed in
  reverse): the audit trail and the process log's bound (``logs``); the three ports, each adapter
  chosen by ``backends``; the quotas and their store; the core services over the ports, gathered
  in the ``Gateway`` the routers depend on (``build_gateway``); the schema registry (the gateway's
  own, or its client of an external one, ``schema_registry``); the background workers (reaper,
  retention, metadata watcher). Around the routes, from the outside in: one-line start errors,
  metrics, trailing slashes, the cross-site guard, the raw-path guard, authentication (with the
  verifiers of ``basic_verifier`` and ``token_verifier``), authorization and the produce fast path.
- ``server_config`` is how uvicorn serves that application: on ``protocol.GatewayProtocol`` with
  the connection limits and the TLS context of the settings.

``brokergate serve`` and the test fixtures use exactly these two. Nothing else reads the settings
into parts: adapters are given their options, core services their limits, and routers the
``Gateway`` (whose ``settings`` they read per request, e.g. the bounds of a body).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, cast

import uvicorn
from fastapi import FastAPI

from service.adapters.push_sender import HttpPushSender
from service.adapters.registry import HttpSchemaRegistry
from service.api import acls, asyncapi, consumers, ops, push, registry, share_groups, topics, v3
from service.api.access import Authorize, RouteTable
from service.api.auth import Authenticate, open_paths
from service.api.crosssite import CrossSiteGuard
from service.api.error_handlers import add_error_handlers
from service.api.fastpath import ProduceFastPath, fast_routes
from service.api.gateway import Gateway
from service.api.openapi import build_openapi
from service.api.replies import JSONBody
from service.api.slashes import TrailingSlash
from service.api.streams import socket as stream_socket
from service.core.acl import Access
from service.core.consumers import ConsumerService
from service.core.groups import GroupManager
from service.core.idempotency import IdempotencyGuard
from service.core.partitioner import Partitioner
from service.core.ports import Coordinator, Log, Sessions
from service.core.producer import ProduceService
from service.core.quotas import Quotas
from service.core.schemas.registry import SchemaRegistry
from service.core.schemas.serde import Serde
from service.core.shares.consumers import ShareAdmin, ShareConsumers
from service.core.shares.dead_letters import DeadLetters
from service.core.shares.service import ShareGroups
from service.core.streams import StreamService
from service.core.topics import TopicService
from service.core.waits import OpenWaits
from service.metrics import Metrics
from service.security.tls import server_context
from service.security.tokens import KeySet, TokenRules, TokenVerifier
from service.security.users import UsersFile, Verifier
from service.server.backends import build_ports, build_quota_store, registry_client_options
from service.server.codings import BodyCodings
from service.server.connections import ConnectionLimits, Proxies
from service.server.logs import audit_trail, bounded_logs
from service.server.middleware import MetricsMiddleware, OneLineStartupErrors, RawPathGuard
from service.server.protocol import GRACEFUL_SHUTDOWN_S, GatewayProtocol, GatewayWebSocketProtocol, LastResort
from service.server.push import push_service, push_worker
from service.settings import Settings
from service.ui import CONSOLE_PAGE, console_router, docs_asset_paths, docs_router
from workers.metadata import metadata_watcher
from workers.reaper import reaper
from workers.retention import retention

__all__ = ["build_gateway", "create_app", "server_config"]

log = logging.getLogger("brokergate")

VERSION = "0.1.0"
DESCRIPTION = (
    "HTTP gateway to Kafka-style messaging. Speaks the Confluent REST Proxy v2 API "
    "(produce, consumer groups, commit, seek) plus native extensions: long-poll, timestamp seek, "
    "headers and timestamps, stateless reads by offset, v3 topic admin, consumer-group lag; and "
    "Confluent's schema-registry API under /schema-registry."
)


def create_app(settings: Settings, ports: tuple[Log, Coordinator, Sessions] | None = None) -> FastAPI:
    """Build the application; ``ports`` overrides the adapters the settings would pick."""
    metrics = Metrics()
    closing: list[Callable[[], Awaitable[None]]] = []  # what the app's middleware holds open

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        log_port, coordinator, sessions = ports or build_ports(settings)
        async with AsyncExitStack() as stack:
            for close in closing:
                stack.push_async_callback(close)
            stack.enter_context(audit_trail(settings.audit_log))
            # after the audit trail's handler is in, out before it goes: the last counts reach it
            logs = bounded_logs(settings.log_lines_per_s, settings.log_traceback_bytes)
            await stack.enter_async_context(logs)
            for port in (log_port, coordinator, sessions):
                await port.start()
                stack.push_async_callback(port.stop)
            quotas = await _open_quotas(settings, metrics, stack)
            sender = HttpPushSender()
            stack.push_async_callback(sender.stop)  # after the push worker stopped: it goes first
            gateway = build_gateway(
                settings, log_port, coordinator, sessions, quotas=quotas, metrics=metrics, push_sender=sender
            )
            # the gateway's own schema registry, or its client of an external one (which starts
            # whether or not that registry answers now)
            registry = gateway.registry if gateway.registry is not None else gateway.schemas
            if isinstance(registry, (SchemaRegistry, HttpSchemaRegistry)):
                await registry.start()
                stack.push_async_callback(registry.stop)
            app.state.gateway = gateway
            workers = [
                reaper(
                    gateway.consumers, gateway.share_consumers.shares, metrics, settings.reaper_interval_ms
                ),
                retention(log_port, metrics, settings.retention_check_ms),
                metadata_watcher(gateway.groups, settings.metadata_refresh_ms, wake=gateway.metadata_changed),
            ]
            workers.append(push_worker(gateway, settings, sender))
            for worker in workers:
                if worker is not None:
                    await worker.start()
                    stack.push_async_callback(worker.stop)
            if settings.log != "embedded" and settings.coordinator == "embedded":
                log.warning(
                    "the schema registry's writes take a lock of this process only: several replicas on "
                    "one Kafka cluster need --coordinator zookeeper://... to keep schema ids unique"
                )
            if settings.coordinator != "embedded" and settings.sessions == "embedded":
                log.warning(
                    "groups are shared through ZooKeeper but consumer instances live in this process: "
                    "each is reachable only through this replica (sticky routing), unless --sessions "
                    "redis://... is used"
                )
            log.info(
                "brokergate ready: log=%s coordinator=%s sessions=%s",
                settings.log,
                settings.coordinator,
                settings.sessions,
            )
            yield

    app = FastAPI(
        title="brokergate",
        version=VERSION,
        description=DESCRIPTION,
        lifespan=lifespan,
        default_response_class=JSONBody,
        docs_url=None,  # FastAPI's pages load scripts from a CDN: docs_router serves its own
        redoc_url=None,
        redirect_slashes=False,  # no Location built from Host: TrailingSlash serves /topics/ as /topics
    )
    routers = [ops.router, topics.router, consumers.router, v3.router, acls.router, registry.router]
    routers += [share_groups.router, share_groups.admin, push.admin, asyncapi.router]
    routers.append(stream_socket.router)  # the WebSocket stream (no OpenAPI: it is no HTTP operation)
    routers.append(docs_router(title=app.title))
    if settings.ui:
        routers.append(console_router(read_only=settings.ui_read_only))
    # The routes themselves, in one list: what routing, the guards and the document read. A router
    # included by FastAPI would be a branch that each of them descends into.
    app.router.routes.extend(route for router in routers for route in router.routes)
    add_error_handlers(app)
    if settings.produce_fast_path:  # inside the metrics: counted the same
        app.add_middleware(ProduceFastPath, routes=fast_routes(app.routes), handlers=app.exception_handlers)
    # inside the guards (a request they refuse is never decoded), around everything that reads a body
    app.add_middleware(
        BodyCodings,
        limit=settings.max_request_bytes,
        compress=settings.compression,
        min_bytes=settings.compression_min_bytes,
        metrics=metrics,
    )
    opened = open_paths(docs=settings.docs_open, metrics=settings.metrics_open)
    if settings.docs_open:  # the pages' files with the pages
        opened |= docs_asset_paths()
    ruled = RouteTable(app.routes)  # a route without a rule fails the start whether or not it is enforced
    if settings.authorize:  # after authentication, before any route, the fast path's included
        app.add_middleware(Authorize, routes=ruled, open_paths=opened)
    if settings.auth_methods:  # before any route, the fast path's included
        tokens = token_verifier(settings)
        if tokens is not None:
            closing.append(tokens.keys.close)
        app.add_middleware(
            Authenticate,
            open_paths=opened,
            basic=basic_verifier(settings) if "basic" in settings.auth_methods else None,
            tokens=tokens,
            certificates=settings.tls_principal if "mtls" in settings.auth_methods else None,
        )
    app.add_middleware(RawPathGuard)  # before any routing, the fast path's included
    # a browser's, first; it decides from the route, whatever the method (the rules say which change state)
    app.add_middleware(CrossSiteGuard, routes=ruled, advertised_url=settings.advertised_url)
    # /topics/ is /topics for every guard and route; /ui/ is redirected (its page's links are relative)
    app.add_middleware(TrailingSlash, routes=app.routes, pages=(CONSOLE_PAGE,) if settings.ui else ())
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(OneLineStartupErrors)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def build_gateway(
    settings: Settings,
    log: Log,
    coordinator: Coordinator,
    sessions: Sessions,
    *,
    quotas: Quotas | None = None,
    metrics: Metrics | None = None,
    push_sender: HttpPushSender | None = None,
) -> Gateway:
    """The core services over the ports, as the settings ask, gathered for the routers."""
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
    instance_limits = settings.instance_limits()
    template = settings.share_dead_letter_topic
    shares = ShareGroups(
        log,
        coordinator,
        limits=settings.share_limits(),
        dead_letters=DeadLetters(log, topics, template) if template else None,
        draining=draining,
        shared=settings.coordinator != "embedded",  # the embedded one is this replica's alone
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
    return Gateway(
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
        share_admin=ShareAdmin(sessions, shares, log),
        push=push_service(settings, log, coordinator, shares, push_sender or HttpPushSender()),
        push_changed=asyncio.Event(),
        streams=StreamService(
            consumers,
            topics,
            quotas=quotas,
            serde=serde,
            limits=settings.stream_limits(),
            draining=draining,
            authorizing=access.enabled,
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


def schema_registry(
    settings: Settings, log: Log, coordinator: Coordinator
) -> SchemaRegistry | HttpSchemaRegistry:
    """The registry of the settings: the embedded one, or the client of the external registry at
    the URL ``schema_registry`` is (``ValueError`` naming the setting if a password or TLS file of
    its cannot be used). Neither connects to anything before it is started."""
    if settings.schema_registry != "embedded":
        return HttpSchemaRegistry(registry_client_options(settings))
    return SchemaRegistry(
        log,
        coordinator,
        topic=settings.schema_registry_topic,
        default_compatibility=settings.schema_registry_compatibility,
        limits=settings.registry_limits(),
        lock_timeout_s=settings.schema_registry_lock_timeout_ms / 1000,
    )


async def _open_quotas(settings: Settings, metrics: Metrics, stack: AsyncExitStack) -> Quotas:
    """The configured quotas, their store started (and its stop pushed on ``stack``); or none."""
    limits = settings.quota_limits()
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


def basic_verifier(settings: Settings) -> Verifier:
    """The HTTP Basic verifier of ``auth=basic``: the credentials file, with the guess budgets."""
    return Verifier(
        UsersFile(settings.users_path),
        guesses_per_address=settings.password_guesses_per_address,
        guesses_per_name=settings.password_guesses_per_user,
        guess_refill_s=settings.password_guess_refill_s,
    )


def token_verifier(settings: Settings) -> TokenVerifier | None:
    """The Bearer JWT verifier of ``auth=jwt`` (None without it)."""
    if "jwt" not in settings.auth_methods:
        return None
    assert settings.jwt_issuer is not None  # the settings' own check
    rules = TokenRules(
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        jwks_url=settings.jwt_jwks_url,
        algorithms=tuple(Settings.split(settings.jwt_algorithms)),
        leeway_s=settings.jwt_leeway_s,
        principal_claim=settings.jwt_principal_claim,
    )
    verify: ssl.SSLContext | bool = True
    if settings.jwt_cafile is not None:
        try:
            verify = ssl.create_default_context(cafile=settings.jwt_cafile)
        except OSError as exc:
            where = str(settings.jwt_cafile)
            raise ValueError(f"jwt_cafile: cannot load CA certificates from {where!r} ({exc})") from None
    return TokenVerifier(rules, KeySet(rules, verify=verify))


def server_config(app: FastAPI, settings: Settings, **options: Any) -> uvicorn.Config:
    """How the gateway is served: the app behind ``LastResort``, on ``GatewayProtocol`` with the
    connection limits of ``settings``, over TLS when ``tls_cert`` is set; ``options`` are more
    ``uvicorn.Config`` arguments. A TLS file that cannot be used raises ``ValueError``."""
    limits = ConnectionLimits(
        settings.max_connections,
        settings.max_connections_per_address,
        settings.header_timeout_ms / 1000,
        settings.max_header_bytes,
        settings.tls_handshake_timeout_ms / 1000,
    )
    context: ssl.SSLContext | None = None
    if settings.tls_cert is not None:
        password = settings.tls_key_password
        context = server_context(
            certfile=settings.tls_cert,
            keyfile=settings.tls_key,
            password=password.get_secret_value() if password is not None else None,
            client_ca=settings.tls_client_ca,
            client_cert_required=settings.client_cert_required,
        )
    # TLS is the protocol's, not the server's (``GatewayProtocol``): asyncio's own would hand the
    # connection over only once its handshake is done, unbounded and uncounted until then.
    attributes = {"limits": limits, "counter": limits.counter(), "tls": context}
    protocol = cast("type[GatewayProtocol]", type("GatewayProtocol", (GatewayProtocol,), attributes))
    config = uvicorn.Config(
        LastResort(app),
        host=settings.bind_host,
        port=settings.port,
        http=protocol,
        ws=GatewayWebSocketProtocol,
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        ws_max_size=settings.stream_max_message_bytes,  # a larger WebSocket message is refused (1009) unread
        # Stream batches are large JSON: compressing each costs more CPU than it saves on a network.
        ws_per_message_deflate=False,
        **options,
    )
    # The proxies uvicorn takes a client's address from (FORWARDED_ALLOW_IPS) carry many clients.
    protocol.proxies = Proxies.of(config.forwarded_allow_ips)
    return config
