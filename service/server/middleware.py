"""The server's own ASGI layers around the application: what every request passes first.

``OneLineStartupErrors`` (outermost: a failed start in one line), ``MetricsMiddleware`` (counts and
times by route template) and ``RawPathGuard`` (no path segment that decodes to ``.``, ``..`` or
holds ``/``). ``create_app`` (``service.server.app``) puts them in their order around the API's
guards (``service.api``: trailing slashes, cross-site, authentication, authorization).
"""

from __future__ import annotations

import time
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.http import error_response
from service.errors import ErrorCode
from service.metrics import Metrics

__all__ = ["MetricsMiddleware", "OneLineStartupErrors", "RawPathGuard"]


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
