"""The server's own ASGI layers around the application: what every request passes first.

``OneLineStartupErrors`` (outermost: a failed start in one line), ``MetricsMiddleware`` (counts and
times by route template) and ``RawPathGuard`` (no path segment that decodes to ``.``, ``..`` or
holds ``/``, but a registry subject's). ``create_app`` (``service.server.app``) puts them in their
order around the API's guards (``service.api``: trailing slashes, cross-site, authentication, authorization).
"""

from __future__ import annotations

import time
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.registry import PREFIX, SLASH, subject_segment
from service.api.replies import error_response
from service.errors import ErrorCode
from service.metrics import Metrics

__all__ = ["MetricsMiddleware", "OneLineStartupErrors", "RawPathGuard"]

_SLASH = SLASH.encode()
_REGISTRY = PREFIX[1:].encode()


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

    One exception, as Confluent's registry has it: a schema subject may hold ``/``. The one segment
    of a registry path that is a subject (``registry.subject_segment``: after ``subjects``,
    ``config``, ``mode`` or ``compatibility/subjects``) may decode to hold it; routing is handed
    that segment with ``registry.SLASH`` in place of each ``/``, so it is one segment, which only
    a ``subject`` parameter takes, and turns back. A path that decodes to hold ``SLASH`` itself is
    refused, so no client can forge one.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw: bytes = scope.get("raw_path") or scope["path"].encode()
            if b"%" in raw or b"/." in raw or _SLASH in raw:
                segments = raw.split(b"/")
                decoded = [unquote_to_bytes(segment) for segment in segments]
                subject = subject_segment(decoded)
                bad = _bad_segment(segments, decoded, subject)
                if bad is not None:
                    message = f"Path segment {bad!r} names no resource: it decodes to '.', '..' or holds '/'."
                    await error_response(422, ErrorCode.INVALID_TOPIC, message)(scope, receive, send)
                    return
                if subject is not None and b"/" in decoded[subject]:
                    decoded[subject] = decoded[subject].replace(b"/", _SLASH)
                    path = b"/".join(decoded).decode("utf-8", "replace")
                    scope = {**scope, "path": path}
        await self.app(scope, receive, send)


def _bad_segment(segments: list[bytes], decoded: list[bytes], subject: int | None) -> str | None:
    """The first segment that names no resource: one that decodes to ``.`` or ``..``, or holds
    ``/`` anywhere but in a registry subject (``subject``: its index), or, in a registry path,
    ``SLASH`` (routing would read it as "/")."""
    registry = len(decoded) > 1 and decoded[1] == _REGISTRY
    for i, (segment, plain) in enumerate(zip(segments, decoded, strict=True)):
        if plain in (b".", b"..") or (b"/" in plain and i != subject) or (registry and _SLASH in plain):
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
