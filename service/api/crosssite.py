"""``CrossSiteGuard``: a page of another site cannot make a browser change anything here.

A browser holding credentials for the gateway (the web console's Basic sign-in, a client
certificate) sends them with every request to it, whichever page asks: a page of another site
could create or delete topics, produce, or commit a group's offsets as the signed-in user,
with a form or a ``fetch`` that needs no CORS preflight, open a WebSocket, or consume a
consumer's records with an ``<img>``, a link or an ``EventSource`` (a poll is a GET, and it
advances a position; a share consumer's GET acquires and locks records). Browsers say where a
request comes from (``Sec-Fetch-Site``, ``Origin``), and programs that are not browsers send
neither, so the guard refuses (403, 40301) a request that changes state when the browser says it
comes from another site: ``Sec-Fetch-Site`` ``cross-site`` or ``same-site``, or an ``Origin``
that is neither the request's own host nor ``ADVERTISED_URL``'s.

Whether a request changes state is its route's to say, not its method's: the guard finds the
route as routing will (``access.RouteTable``) and reads ``Rule.changes_state`` — by default a
GET reads and every other method and every WebSocket session changes state; a GET that changes
state says so in ``access.RULES``. A request no route takes changes state unless it is a GET,
HEAD or OPTIONS (it will be answered 404 or 405 anyway). Reads need no guard: the gateway sends
no CORS headers, so a page of another site cannot read an answer.

The guard stands in front of authentication, authorization and the produce fast path, so no way
in is left out.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from service.errors import ErrorCode, Forbidden

from .access import RouteTable, refuse_handshake
from .replies import error_response

_SAFE: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_OTHER_SITES: Final = frozenset({b"cross-site", b"same-site"})


class CrossSiteGuard:
    def __init__(self, app: ASGIApp, *, routes: RouteTable, advertised_url: str | None = None) -> None:
        self.app = app
        self._routes = routes
        self._advertised = _origin_of(advertised_url) if advertised_url else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind in ("http", "websocket"):
            # What the browser says first: a program sends neither header, and its request then
            # needs no route looked up (the produce hot path among them).
            why = self._foreign(dict(scope["headers"]))
            if why is not None and self._changes_state(scope):
                if kind == "websocket":
                    await refuse_handshake(scope, send, Forbidden(why))
                else:
                    await error_response(403, ErrorCode.FORBIDDEN, why)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _changes_state(self, scope: Scope) -> bool:
        found = self._routes.find(scope)
        if found is not None:
            ruled = found[0]
            return ruled.rule.changes(ruled.key)
        return scope["type"] == "websocket" or scope["method"] not in _SAFE

    def _foreign(self, headers: dict[bytes, bytes]) -> str | None:
        """Why the request comes from another site, or None if nothing says it does."""
        site = headers.get(b"sec-fetch-site")
        if site in _OTHER_SITES:
            return f"A request from a page of another site ({site.decode()}) may not change anything here."
        origin = headers.get(b"origin")
        if origin is None:
            return None
        text = origin.decode("latin-1")
        own = headers.get(b"host", b"").decode("latin-1").lower()
        mine = _origin_of(text)
        if mine is not None and (mine[1] == own or mine == self._advertised):
            return None
        return f"A request from {text[:100]!r}, another site, may not change anything here."


def _origin_of(url: str) -> tuple[str, str] | None:
    """(scheme, host[:port]) of a URL or an ``Origin`` header (None for ``null`` or garbage)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if not parts.scheme or not parts.netloc:
        return None
    return parts.scheme.lower(), parts.netloc.lower()
