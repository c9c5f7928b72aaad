"""``TrailingSlash``: ``/topics/`` is served as ``/topics``, not redirected to it.

Starlette's router answers a path that only differs from a route's by a trailing ``/`` with a
307 whose ``Location`` it builds from the request's ``Host`` header: a forged ``Host`` would
become a URL the gateway hands out. Confluent's REST Proxy (Jersey) does not redirect either:
it serves ``/topics/`` as ``/topics``. So the app's router does not redirect
(``redirect_slashes`` off) and this middleware, in front of every guard and of the produce fast
path, rewrites such a path to the route's own before anything matches it: every guard, the fast
path and the route see the same path, and no answer carries a URL built from ``Host`` (the only
URLs the gateway writes are made by ``http.public_base``).

A page whose links are relative to its own path (the console at ``/ui``: ``ui/main.js``) would
break when served at ``/ui/``: the slashed path of such a page (``pages``) is redirected instead,
with a relative ``Location`` (``../ui``), which names no host either.

Only a path ending in ``/`` (no route takes it: the one without) or one of the few routes ending
in ``/`` without it (``/schema-registry``) is looked at; other requests pass untouched.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send


class TrailingSlash:
    def __init__(self, app: ASGIApp, *, routes: Sequence[BaseRoute], pages: Collection[str] = ()) -> None:
        self.app = app
        self._routes = routes  # the app's list: read at each request, so routes added later count
        self._pages = frozenset(pages)
        self._slashed: set[str] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            other = self._other_form(scope["path"])
            if other is not None and not self._taken(scope) and self._taken({**scope, "path": other}):
                if other in self._pages and scope["type"] == "http":
                    slashes = len(scope["path"]) - len(other)
                    location = "../" * slashes + other.rsplit("/", 1)[1]
                    await Response(status_code=307, headers={"Location": location})(scope, receive, send)
                    return
                raw: bytes | None = scope.get("raw_path")
                if raw is not None:
                    raw = raw + b"/" if other.endswith("/") else raw.rstrip(b"/")
                scope = {**scope, "path": other, "raw_path": raw}
        await self.app(scope, receive, send)

    def _other_form(self, path: str) -> str | None:
        """The path with its trailing ``/`` taken off or added, where a route may take that form."""
        if path == "/":
            return None
        if path.endswith("/"):
            return path.rstrip("/") or None
        if self._slashed is None:
            templates = (getattr(route, "path", "") for route in self._routes)
            self._slashed = {template[:-1] for template in templates if template.endswith("/")}
        return path + "/" if path in self._slashed else None

    def _taken(self, scope: Scope) -> bool:
        """Whether a route takes ``scope``'s path (with any method: a wrong one is answered 405)."""
        return any(route.matches(scope)[0] is not Match.NONE for route in self._routes)
