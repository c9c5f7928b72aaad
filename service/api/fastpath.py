"""``ProduceFastPath``: the two produce routes served straight from ASGI.

Produce is the gateway's hottest request. For a request of 100 small records,
FastAPI's per-request machinery (dependency solving, two exit stacks,
exception wrappers) cost about a third of the gateway's CPU, as much as the
produce itself. This middleware serves the documented produce routes
(``topics.FAST_PATH_ENDPOINTS``) itself: it matches a request with the
routes' own matchers, calls the very handler their endpoints call
(``topics.serve_produce``), and answers errors through the app's own exception
handlers (Starlette's ``ExceptionMiddleware`` over the same table), so clients
cannot tell the two paths apart. Whatever it does not take (another method, a
topic name ``rules`` refuses, a partition that is not a plain number) goes down
the normal stack, where the routes answer it.

It only serves a route whose every input it supplies: the path parameters,
the ``Idempotency-Key`` header, the request and the gateway. Should a produce
route gain anything else (an authentication dependency, a query parameter),
building the middleware stack, that is the application's start, fails with
``FastPathMismatch`` instead of letting produce requests skip it. The
``produce_fast_path`` setting turns it off.

Sits inside ``MetricsMiddleware``: it sets ``scope["route"]`` to the route it
served, so requests are counted under the same route template.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.gateway import gateway_of, get_gateway
from service.core.rules import valid_topic

from .topics import FAST_PATH_ENDPOINTS, serve_produce

# What the fast path supplies; a produce route asking for anything else cannot be served by it.
_PATH_PARAMS: Final = frozenset({"topic", "partition"})
_HEADER_PARAM: Final = "idempotency_key"
_DEPENDENCIES: Final = (get_gateway,)
_MAX_PARTITION_DIGITS: Final = 9  # a partition number small enough to be one; longer goes to the route


class FastPathMismatch(RuntimeError):
    """A produce route takes an input the fast path does not supply (the app refuses to start)."""


class _Produce:
    """The ASGI app serving one produce route: its path parameters and its Idempotency-Key header."""

    def __init__(self, header: str) -> None:
        self.header = header  # as the route declares it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        params = scope["path_params"]
        partition = params.get("partition")
        response = await serve_produce(
            request,
            gateway_of(scope),
            params["topic"],
            None if partition is None else int(partition),
            request.headers.get(self.header),
        )
        await response(scope, receive, send)


@dataclass(frozen=True, slots=True)
class _Served:
    route: RouteContext  # the route as the app includes it (with its router's dependencies)
    app: ASGIApp  # the route's ``_Produce``, inside the app's exception handlers


class ProduceFastPath:
    """Serves the produce routes of ``served`` without FastAPI's per-request machinery; passes
    everything else on to ``app``."""

    def __init__(self, app: ASGIApp, served: FastAPI) -> None:
        self.app = app
        self._routes = _served_routes(served.routes, served.exception_handlers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            for served in self._routes:
                match, child = served.route.matches(scope)
                if match is Match.FULL and _takes(child["path_params"]):
                    scope.update(child)
                    scope["route"] = served.route.original_route  # as routing sets it
                    await served.app(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _takes(params: dict[str, str]) -> bool:
    """Whether the fast path serves these path parameters; the route answers anything odd itself."""
    partition = params.get("partition")
    if partition is not None and not (partition.isdigit() and len(partition) <= _MAX_PARTITION_DIGITS):
        return False
    return valid_topic(params["topic"])


def _served_routes(routes: Sequence[BaseRoute], handlers: Mapping[Any, Any]) -> list[_Served]:
    served = [
        # The app's own handler table, looked up as Starlette looks it up for the routes.
        _Served(route, ExceptionMiddleware(_Produce(_header_of(route)), handlers=handlers))
        for route in iter_route_contexts(routes)
        if isinstance(route.original_route, APIRoute) and route.endpoint in FAST_PATH_ENDPOINTS
    ]
    if len(served) != len(FAST_PATH_ENDPOINTS):
        raise FastPathMismatch("the produce fast path did not find every produce route in the app")
    return served


def _header_of(route: RouteContext) -> str:
    """The route's Idempotency-Key header, if the fast path supplies everything the route takes;
    else ``FastPathMismatch``."""
    d = route.dependant
    where = f"POST {route.path}"
    extra = [p.name for p in (*d.query_params, *d.cookie_params, *d.body_params)]
    extra += [p.name for p in d.path_params if p.name not in _PATH_PARAMS]
    extra += [p.name for p in d.header_params if p.name != _HEADER_PARAM]
    extra += [_name(sub) for sub in d.dependencies if sub.call not in _DEPENDENCIES or sub.dependencies]
    if extra:
        raise FastPathMismatch(
            f"{where} takes {', '.join(extra)}, which the produce fast path does not run; "
            "teach service/api/fastpath.py to, or set BROKERGATE_PRODUCE_FAST_PATH=false"
        )
    headers = [p.alias for p in d.header_params]
    if len(headers) != 1:
        raise FastPathMismatch(f"{where} does not declare the Idempotency-Key header the fast path reads")
    return headers[0]


def _name(dependant: Dependant) -> str:
    return getattr(dependant.call, "__qualname__", None) or repr(dependant.call)
