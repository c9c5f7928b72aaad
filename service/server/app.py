"""The FastAPI application: routers, error shape, lifecycle.

``create_app(settings)`` builds the app; its lifespan opens the three ports
and the quota store in an ``AsyncExitStack`` (closed in reverse), wires the
``Gateway`` (everything a request may need), starts its schema registry, and
owns the background workers.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api_schemas.formats import V2
from service.adapters.registry import HttpSchemaRegistry
from service.api import acls, consumers, ops, registry, share_groups, topics, v3
from service.api.access import Authorize, check_rules
from service.api.auth import ALWAYS_OPEN, Authenticate, open_paths
from service.api.crosssite import CrossSiteGuard
from service.api.fastpath import ProduceFastPath
from service.api.gateway import Gateway
from service.api.http import BODY_MODELS, JSONBody, error_response
from service.api.slashes import TrailingSlash
from service.api.streams import socket as stream_socket
from service.core.audit import AUDIT
from service.core.ports import Coordinator, Log, Sessions
from service.core.quotas import Quotas
from service.core.schemas.registry import SchemaRegistry
from service.errors import ErrorCode, GatewayError
from service.metrics import Metrics
from service.security.tokens import KeySet, TokenRules, TokenVerifier
from service.security.users import UsersFile, Verifier
from service.server.backends import build_ports, build_quota_store, quota_limits
from service.server.logs import bounded_logs
from service.settings import Settings
from service.ui import CONSOLE_PAGE, console_router, docs_asset_paths, docs_router
from workers.metadata import metadata_watcher
from workers.reaper import reaper
from workers.retention import retention

log = logging.getLogger("brokergate")

VERSION = "0.1.0"
DESCRIPTION = (
    "HTTP gateway to Kafka-style messaging. Speaks the Confluent REST Proxy v2 API "
    "(produce, consumer groups, commit, seek) plus native extensions: long-poll, timestamp seek, "
    "headers and timestamps, stateless reads by offset, v3 topic admin, consumer-group lag; and "
    "Confluent's schema-registry API under /schema-registry."
)


def _error_type(request: Request) -> str | None:
    """The media type of an error: the schema registry's under its prefix, else the v2 type."""
    return registry.SR_V1 if registry.is_registry_path(request.url.path) else None


async def _gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    if exc.http_status >= 500:
        log.warning("%s %s: %s", request.method, request.url.path, exc.message)
    return error_response(
        exc.http_status,
        int(exc.error_code),
        exc.message,
        retry_after=exc.retry_after,
        media_type=_error_type(request),
    )


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    in_registry = registry.is_registry_path(request.url.path)
    if any(err["loc"][:1] == ("path",) for err in errors):
        # /topics/t/partitions/abc names no resource: that is a 404, as Confluent answers.
        if in_registry:  # the schema registry's generic codes are the HTTP status
            return error_response(404, 404, "HTTP 404 Not Found", media_type=registry.SR_V1)
        return error_response(404, ErrorCode.NOT_FOUND, f"Not found: {request.url.path}")
    parts = [
        f"{'.'.join(str(x) for x in err['loc'][1:]) or err['loc'][0]}: {err['msg']}" for err in errors[:5]
    ]
    if in_registry:
        return error_response(400, 400, "Invalid request: " + "; ".join(parts), media_type=registry.SR_V1)
    return error_response(422, ErrorCode.INVALID_REQUEST, "Invalid request: " + "; ".join(parts))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if registry.is_registry_path(request.url.path):
        return error_response(
            exc.status_code,
            exc.status_code,
            f"HTTP {exc.status_code} {exc.detail}",
            headers=dict(exc.headers or {}),
            media_type=registry.SR_V1,
        )
    if exc.status_code == 404:  # no route: nothing says which resource, so the generic code
        return error_response(404, ErrorCode.NOT_FOUND, f"Not found: {request.url.path}")
    return error_response(exc.status_code, exc.status_code * 100 + 1, str(exc.detail))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return error_response(500, ErrorCode.INTERNAL, "Internal server error.", media_type=_error_type(request))


class MetricsMiddleware:
    """Counts and times requests by route template (pure ASGI: no per-request copies)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            method = scope["method"]
            self.metrics.requests.labels(method, path, str(status)).inc()
            self.metrics.latency.labels(method, path).observe(time.perf_counter() - start)


class RawPathGuard:
    """Refuses a path with a segment that is, once percent-decoded, ``.``, ``..`` or holds a ``/``.

    Routing sees the decoded path, so ``/topics/orders%2Fpartitions%2F0`` would otherwise produce
    to partition 0 of ``orders``, and a client that sends ``/topics/foo/../orders`` unnormalised
    would act on ``orders``. No name brokergate accepts is such a segment, so the request is refused
    (42207) before any route or the produce fast path sees it. Only paths holding ``%`` or ``/.``
    are looked at.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw: bytes = scope.get("raw_path") or scope["path"].encode()
            if b"%" in raw or b"/." in raw:
                bad = _bad_segment(raw)
                if bad is not None:
                    message = f"Path segment {bad!r} names no resource: it decodes to '.', '..' or holds '/'."
                    await error_response(422, ErrorCode.INVALID_TOPIC, message)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _bad_segment(raw_path: bytes) -> str | None:
    for segment in raw_path.split(b"/"):
        decoded = unquote_to_bytes(segment)
        if decoded in (b".", b"..") or b"/" in decoded:
            return segment.decode("latin-1")
    return None


class OneLineStartupErrors:
    """Reports a failed start as one line (e.g. "data dir in use"), not a traceback.

    Starlette hands the server the whole traceback of a failed lifespan; an
    operator needs its last line.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def send_short(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed":
                last = (message.get("message") or "").strip().splitlines()[-1:] or ["unknown error"]
                kind, _, text = last[0].partition(": ")
                message = {**message, "message": f"brokergate: cannot start: {text if text else kind}"}
            await send(message)

        try:
            await self.app(scope, receive, send_short)
        except Exception:  # already reported in one line through send_short
            return


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
            gateway = Gateway.build(settings, log_port, coordinator, sessions, quotas=quotas, metrics=metrics)
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
    routers = (ops.router, topics.router, consumers.router, v3.router, acls.router, registry.router)
    for router in (*routers, share_groups.router, share_groups.admin):
        app.include_router(router)
    app.include_router(stream_socket.router)  # the WebSocket stream (no OpenAPI: it is no HTTP operation)
    app.include_router(docs_router(title=app.title))
    if settings.ui:
        app.include_router(console_router(read_only=settings.ui_read_only))
    app.add_exception_handler(GatewayError, _gateway_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
    if settings.produce_fast_path:
        app.add_middleware(ProduceFastPath, served=app)  # inside the metrics: counted the same
    opened = open_paths(docs=settings.docs_open, metrics=settings.metrics_open)
    if settings.docs_open:  # the pages' files with the pages
        opened |= docs_asset_paths()
    if settings.authorize:  # after authentication, before any route, the fast path's included
        app.add_middleware(Authorize, routes=app.routes, open_paths=opened)
    else:
        check_rules(app.routes)  # a route without a rule fails the start whether or not it is enforced
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
    app.add_middleware(CrossSiteGuard, routes=app.routes, advertised_url=settings.advertised_url)
    # /topics/ is /topics for every guard and route; /ui/ is redirected (its page's links are relative)
    app.add_middleware(TrailingSlash, routes=app.routes, pages=(CONSOLE_PAGE,) if settings.ui else ())
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(OneLineStartupErrors)
    # Built now rather than at the first ASGI call: a produce route the fast path cannot serve
    # (``FastPathMismatch``) fails here, before anything listens, not in some request.
    app.middleware_stack = app.build_middleware_stack()

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


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


@contextmanager
def audit_trail(path: Path | None) -> Iterator[None]:
    """The audit logger at INFO whatever the process's level; into ``path`` (appended) if given."""
    level = AUDIT.level
    AUDIT.setLevel(logging.INFO)
    handler: logging.Handler | None = None
    if path is not None:
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        AUDIT.addHandler(handler)
        AUDIT.propagate = False
    try:
        yield
    finally:
        AUDIT.setLevel(level)
        if handler is not None:
            AUDIT.removeHandler(handler)
            AUDIT.propagate = True
            handler.close()


async def _open_quotas(settings: Settings, metrics: Metrics, stack: AsyncExitStack) -> Quotas:
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


def begin_drain(app: FastAPI) -> None:
    """Tell a running app the server is stopping (from a signal handler too): open long-polls and
    stateless reads answer with what they have instead of holding the shutdown for their timeout."""
    gateway: Gateway | None = getattr(app.state, "gateway", None)
    if gateway is not None:
        gateway.drain()


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the request-body models the routers parse themselves."""
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, model in sorted(BODY_MODELS.items()):
        model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for def_name, definition in model_schema.pop("$defs", {}).items():
            components.setdefault(def_name, definition)
        components[name] = model_schema
    for methods in schema["paths"].values():
        for operation in methods.values():
            # FastAPI declares the bare ``Response`` of a 201 (createAcls) as a JSON string; it
            # has no body, and a generated client must not try to parse one.
            created = operation.get("responses", {}).get("201", {})
            if created.get("content", {}).get(V2, {}) == {"schema": {"type": "string"}}:
                del created["content"]
            # Where a route declares a model for its ``Response``, FastAPI leaves the string type
            # beside the model's reference: the reference alone says what the body is.
            for response in operation.get("responses", {}).values():
                for content in response.get("content", {}).values():
                    body = content.get("schema", {})
                    if "$ref" in body and body.get("type") == "string":
                        del body["type"]
    schema["components"]["securitySchemes"] = SECURITY_SCHEMES
    # Any one of the methods the gateway was started with; none when authentication is off ({}).
    schema["security"] = [{}, *({name: []} for name in SECURITY_SCHEMES)]
    for path in ALWAYS_OPEN:
        for operation in schema["paths"].get(path, {}).values():
            operation["security"] = []
    return schema


SECURITY_SCHEMES: dict[str, Any] = {
    "basic": {
        "type": "http",
        "scheme": "basic",
        "description": "AUTH=basic: a user of the gateway's credentials file (brokergate users).",
    },
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "AUTH=jwt: a token of the configured OpenID Connect issuer.",
    },
    "mtls": {
        "type": "mutualTLS",
        "description": "AUTH=mtls: a client certificate signed by the configured CA.",
    },
}
