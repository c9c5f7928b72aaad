"""``ProduceFastPath``: the two produce routes served straight from ASGI.

Produce is the gateway's hottest request. For a request of 100 small records,
FastAPI's per-request machinery (route matching, dependency solving, two exit
stacks, exception wrappers) cost about a third of the gateway's CPU, as much
as the produce itself. This middleware recognises ``POST /topics/{topic}`` and
``POST /topics/{topic}/partitions/{partition}`` and calls the very handler the
FastAPI routes call (``topics.serve_produce``); errors go through the app's own
exception handlers, so clients cannot tell the two paths apart. Whatever it
does not recognise (another method, a name Kafka would refuse, a partition
that is not a plain number) goes down the normal stack, where the documented
FastAPI routes answer it.

Sits inside ``MetricsMiddleware``: it sets ``scope["route"]`` to the matching
FastAPI route of ``topics.router``, so requests are counted under the same route template.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Final

from fastapi import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .topics import router, serve_produce

# A valid Kafka topic name, and a partition number small enough to be one.
_PRODUCE: Final = re.compile(r"/topics/([A-Za-z0-9._-]{1,249})(?:/partitions/([0-9]{1,9}))?")
TOPIC_ROUTE: Final = "/topics/{topic}"
PARTITION_ROUTE: Final = "/topics/{topic}/partitions/{partition}"

Handler = Callable[[Request, Exception], Awaitable[Response]]


class ProduceFastPath:
    """Serves produce requests without FastAPI's routing; passes everything else on to ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        posts = [r for r in router.routes if isinstance(r, Route) and "POST" in (r.methods or ())]
        self._topic_route = next(r for r in posts if r.path == TOPIC_ROUTE)
        self._partition_route = next(r for r in posts if r.path == PARTITION_ROUTE)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        match = _PRODUCE.fullmatch(scope["path"])
        if match is None or match[1] in (".", ".."):
            await self.app(scope, receive, send)
            return
        topic, partition = match[1], match[2]
        scope["route"] = self._topic_route if partition is None else self._partition_route
        scope["path_params"] = (
            {"topic": topic} if partition is None else {"topic": topic, "partition": partition}
        )
        request = Request(scope, receive, send)
        try:
            response = await serve_produce(
                request,
                scope["app"].state.gateway,
                topic,
                None if partition is None else int(partition),
                request.headers.get("idempotency-key"),
            )
        except Exception as exc:
            handler = _handler_for(scope["app"].exception_handlers, exc)
            if handler is None:
                raise
            response = await handler(request, exc)
        await response(scope, receive, send)


def _handler_for(handlers: dict[Any, Handler], exc: Exception) -> Handler | None:
    """The app's handler for ``exc``: the one registered for its nearest class, as Starlette picks."""
    for cls in type(exc).__mro__:
        if cls in handlers:
            return handlers[cls]
    return None
