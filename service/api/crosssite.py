"""``CrossSiteGuard``: a page of another site cannot make a browser change anything here.

A browser holding credentials for the gateway (the web console's Basic sign-in, a client
certificate) sends them with every request to it, whichever page asks: a page of another site
could create or delete topics, produce, or commit a group's offsets as the signed-in user,
with a form or a ``fetch`` that needs no CORS preflight, or open a WebSocket. Browsers say
where a request comes from (``Sec-Fetch-Site``, ``Origin``), and programs that are not
browsers send neither, so the guard refuses (403, 40301) a request that changes state — any
method but GET, HEAD and OPTIONS, and every WebSocket handshake — when the browser says it
comes from another site: ``Sec-Fetch-Site`` ``cross-site`` or ``same-site``, or an ``Origin``
that is neither the request's own host nor ``ADVERTISED_URL``'s. Reads need no guard: the
gateway sends no CORS headers, so a page of another site cannot read an answer.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from service.errors import ErrorCode

from .http import error_response

_SAFE: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_OTHER_SITES: Final = frozenset({b"cross-site", b"same-site"})


class CrossSiteGuard:
    def __init__(self, app: ASGIApp, *, advertised_url: str | None = None) -> None:
        self.app = app
        self._advertised = _origin_of(advertised_url) if advertised_url else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if (kind == "http" and scope["method"] not in _SAFE) or kind == "websocket":
            why = self._foreign(dict(scope["headers"]))
            if why is not None:
                if kind == "websocket":  # refused before the handshake: the server answers 403
                    await send({"type": "websocket.close", "code": 1008, "reason": why[:120]})
                else:
                    await error_response(403, ErrorCode.FORBIDDEN, why)(scope, receive, send)
                return
        await self.app(scope, receive, send)

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
