"""What a browser is sent: the headers every page of the gateway carries, and the front page.

``GET /`` answers ``{}`` as Confluent's proxy does, for API clients; a browser, whose ``Accept``
names ``text/html`` above any JSON type, gets instead a small page that says where to go: the
console at ``/ui`` (when it is served), the API documentation at ``/docs`` and the OpenAPI
document. The page has no script and no style; it is sent with the console's headers (a
``Content-Security-Policy`` that loads nothing from elsewhere, no framing, no sniffing, no
referrer), and both answers with ``Vary: Accept``, since which one is sent depends on it.
"""

from __future__ import annotations

import html
from typing import Final

from fastapi import Request
from fastapi.responses import Response

from .accept import V2_ANSWERS, MalformedAccept, media_ranges, quality

HTML: Final = "text/html"

SECURITY_HEADERS: Final = {
    "Content-Security-Policy": "; ".join(
        (
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self'",
            "connect-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-cache",
}

_FRONT: Final = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>brokergate</title></head>
<body>
<h1>brokergate</h1>
<p>An HTTP gateway to Kafka's model, speaking the Confluent REST Proxy v2 API.
This address answers API clients <code>{{}}</code>; a browser gets this page.</p>
<ul>
{links}
</ul>
</body>
</html>
"""


def prefers_html(accept: str | None) -> bool:
    """Whether an Accept header names ``text/html`` itself (not through a wildcard) and weighs it
    above every JSON type the root answers in: a browser's does, curl's ``*/*`` and an API
    client's do not; a tie goes to JSON. An unreadable header is not (the JSON route refuses it)."""
    try:
        ranges = media_ranges(accept)
    except MalformedAccept:
        return False
    named = max((r.q for r in ranges if (r.type, r.subtype) == ("text", "html")), default=0)
    return named > 0 and all(named > quality(ranges, answer) for answer in V2_ANSWERS)


def front_page(request: Request, *, console: bool) -> Response:
    """The page that points a browser at the console (if ``console``), the docs and the OpenAPI
    document, by path after the ASGI ``root_path`` (no URL from the request's ``Host``)."""
    root = html.escape(request.scope.get("root_path", "").rstrip("/"))
    links = [(f"{root}/docs", "API documentation"), (f"{root}/openapi.json", "OpenAPI document")]
    if console:
        links.insert(0, (f"{root}/ui", "Web console"))
    items = "\n".join(f'<li><a href="{href}">{text}</a> <code>{href}</code></li>' for href, text in links)
    return Response(
        _FRONT.format(links=items),
        media_type="text/html; charset=utf-8",
        headers={**SECURITY_HEADERS, "Vary": "Accept"},
    )
