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
the ``Idempotency-Key`` header, the request and the gateway, as the endpoint's
signature declares them. Should a produce route gain anything else (a
dependency, a query parameter), ``fast_routes``, which ``create_app`` calls,
fails with ``FastPathMismatch`` instead of letting produce requests skip it.
The ``produce_fast_path`` setting turns it off.

Sits inside ``MetricsMiddleware``: it sets ``scope["route"]`` to the route it
served, so requests are counted under the same route template.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from fastapi import Request, params
from fastapi.routing import APIRoute
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.gateway import gateway_of
from service.core.rules import valid_topic

from .topics import FAST_PATH_ENDPOINTS, serve_produce

__all__ = ["FastPathMismatch", "FastRoute", "ProduceFastPath", "fast_routes"]

# What the fast path supplies, by the name of the endpoint's parameter.
_SUPPLIED: Final = frozenset({"topic", "partition", "request", "gw", "idempotency_key"})
_HEADER_PARAM: Final = "idempotency_key"
_MAX_PARTITION_DIGITS: Final = 9  # a partition number small enough to be one; longer goes to the route


class FastPathMismatch(RuntimeError):
    """A produce route takes an input the fast path does not supply (the app refuses to start)."""


@dataclass(frozen=True, slots=True)
class FastRoute:
    """A produce route of the app, and the header its endpoint reads the Idempotency-Key from."""

    route: APIRoute
    header: str


def fast_routes(routes: Sequence[BaseRoute]) -> tuple[FastRoute, ...]:
    """The produce routes of ``routes``; ``FastPathMismatch`` if one is missing or takes an input
    the fast path does not supply."""
    found = tuple(
        FastRoute(route, _header_of(route))
        for route in routes
        if isinstance(route, APIRoute) and route.endpoint in FAST_PATH_ENDPOINTS
    )
    if len(found) != len(FAST_PATH_ENDPOINTS):
        raise FastPathMismatch("the produce fast path did not find every produce route in the app")
    return found


def _header_of(route: APIRoute) -> str:
    """The route's Idempotency-Key header, if the fast path supplies everything the route takes."""
    where = f"POST {route.path}"
    extra = [_name(dependency.dependency) for dependency in route.dependencies]
    extra += [name for name in inspect.signature(route.endpoint).parameters if name not in _SUPPLIED]
    if extra:
        raise FastPathMismatch(
            f"{where} takes {', '.join(extra)}, which the produce fast path does not run; "
            "teach service/api/fastpath.py to, or set BROKERGATE_PRODUCE_FAST_PATH=false"
        )
    hint = typing.get_type_hints(route.endpoint, include_extras=True).get(_HEADER_PARAM)
    headers = [m.alias for m in getattr(hint, "__metadata__", ()) if isinstance(m, params.Header) and m.alias]
    if len(headers) != 1:
        raise FastPathMismatch(f"{where} does not declare the Idempotency-Key header the fast path reads")
    return headers[0]


def _name(call: Any) -> str:
    return getattr(call, "__qualname__", None) or repr(call)


class _Produce:
    """The ASGI app serving one produce route: its path parameters and its Idempotency-Key header."""

    def __init__(self, header: str) -> None:
        self.header = header  # as the route declares it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive, send)
        path = scope["path_params"]
        partition = path.get("partition")
        response = await serve_produce(
            request,
            gateway_of(scope),
            path["topic"],
            None if partition is None else int(partition),
            request.headers.get(self.header),
        )
        await response(scope, receive, send)


class ProduceFastPath:
    """Serves ``routes`` (``fast_routes``) without FastAPI's per-request machinery, answering their
    errors through the app's exception ``handlers``; passes everything else on to ``app``."""

    def __init__(self, app: ASGIApp, *, routes: Sequence[FastRoute], handlers: Mapping[Any, Any]) -> None:
        self.app = app
        # The app's own handler table, looked up as Starlette looks it up for the routes.
        self._routes = [
            (fast.route, ExceptionMiddleware(_Produce(fast.header), handlers=handlers)) for fast in routes
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            for route, served in self._routes:
                match, child = route.matches(scope)
                if match is Match.FULL and _takes(child["path_params"]):
                    scope.update(child)
                    scope["route"] = route  # as routing sets it
                    await served(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _takes(path: dict[str, str]) -> bool:
    """Whether the fast path serves these path parameters; the route answers anything odd itself."""
    partition = path.get("partition")
    if partition is not None and not (partition.isdigit() and len(partition) <= _MAX_PARTITION_DIGITS):
        return False
    return valid_topic(path["topic"])
