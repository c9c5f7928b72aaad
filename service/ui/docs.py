"""The API documentation pages, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), served whole by the gateway.

FastAPI's own pages load Swagger UI and ReDoc from a public CDN (unpinned, without integrity) and
start them with an inline script: a third party's script would run on the gateway's origin,
where a browser holds the console's credentials. Here every file the pages load comes from an
installed package (``fastapi_offline`` ships Swagger UI's and ReDoc's builds) or from this one
(``docs_static``: the script that starts Swagger UI), served under ``/docs/{asset}`` from
memory with the console's ``Asset`` (ETag, no sniffing), and each page is sent with a
``Content-Security-Policy`` that runs only the gateway's own scripts (no inline script, no
``eval``), lets the page talk to its own origin only, and forbids framing (with
``X-Frame-Options: DENY`` for older browsers).

ReDoc styles its page with ``<style>`` elements it writes (styled-components) and searches in a
worker it makes from a ``blob:``: its page allows inline styles and blob workers, never inline
scripts. The pages name their files and the OpenAPI document by path (after the ASGI
``root_path``), so no URL in them comes from a request's ``Host``.

``/docs/oauth2-redirect`` is Swagger UI's OAuth2 return page, its script (FastAPI's) served
as a file too. ``HEAD`` is answered on every route as ``GET`` is, without the body. The routes
are left out of the OpenAPI document: they are no API.
"""

from __future__ import annotations

import html
import re
from importlib import resources
from typing import Final

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_oauth2_redirect_html
from fastapi.responses import Response

from service.errors import NotFound

from .router import METHODS, Asset, answer

DOCS: Final = "/docs"
REDOC: Final = "/redoc"
OAUTH2_REDIRECT: Final = "/docs/oauth2-redirect"
OPENAPI: Final = "/openapi.json"
VENDOR_PACKAGE: Final = "fastapi_offline"  # Swagger UI's and ReDoc's builds, as files of a package
VENDOR_FILES: Final = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")
OAUTH2_SCRIPT: Final = "oauth2-redirect.js"


def _policy(*, style: str = "'self'", extra: tuple[str, ...] = ()) -> str:
    return "; ".join(
        (
            "default-src 'none'",
            "script-src 'self'",
            f"style-src {style}",
            "img-src 'self' data:",
            "font-src 'self' data:",
            "connect-src 'self'",
            *extra,
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    )


def _headers(policy: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cross-Origin-Resource-Policy": "same-origin",
        "Cache-Control": "no-cache",
    }


SWAGGER_HEADERS: Final = _headers(_policy())
REDOC_HEADERS: Final = _headers(_policy(style="'self' 'unsafe-inline'", extra=("worker-src blob:",)))

_SWAGGER_PAGE: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<title>{title} - Swagger UI</title>
<link rel="icon" type="image/png" href="{root}/docs/favicon.png">
<link rel="stylesheet" href="{root}/docs/swagger-ui.css">
<script src="{root}/docs/swagger-ui-bundle.js"></script>
<script src="{root}/docs/main.js"></script>
</head>
<body>
<div id="swagger-ui" data-openapi="{root}{openapi}" data-oauth2-redirect="{root}{oauth2}"></div>
</body>
</html>
"""

_REDOC_PAGE: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="referrer" content="no-referrer">
<title>{title} - ReDoc</title>
<link rel="icon" type="image/png" href="{root}/docs/favicon.png">
</head>
<body>
<redoc spec-url="{root}{openapi}"></redoc>
<script src="{root}/docs/redoc.standalone.js"></script>
</body>
</html>
"""

_OAUTH2_PAGE: Final = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Swagger UI: OAuth2 Redirect</title></head>
<body><script src="{root}/docs/oauth2-redirect.js"></script></body>
</html>
"""


def load_docs_assets() -> dict[str, Asset]:
    """The files the pages load, by name: the vendor's builds, the start script and the OAuth2 script."""
    assets: dict[str, Asset] = {}
    vendor = resources.files(VENDOR_PACKAGE) / "static"
    for name in VENDOR_FILES:
        assets[name] = Asset.of(name, (vendor / name).read_bytes())
    own = resources.files(__package__) / "docs_static"
    for entry in own.iterdir():
        if entry.is_file() and entry.name.endswith(".js"):
            assets[entry.name] = Asset.of(entry.name, entry.read_bytes())
    assets[OAUTH2_SCRIPT] = Asset.of(OAUTH2_SCRIPT, _oauth2_script())
    return assets


def _oauth2_script() -> bytes:
    """The script of FastAPI's OAuth2 return page, to be served as a file rather than inline."""
    page = bytes(get_swagger_ui_oauth2_redirect_html().body).decode()
    found = re.search(r"<script>(.*?)</script>", page, re.DOTALL)
    if found is None:
        raise RuntimeError("FastAPI's OAuth2 redirect page has no script: update service/ui/docs.py")
    return found.group(1).encode()


def asset_paths() -> frozenset[str]:
    """The paths of the pages' files: open to anyone with the pages (``DOCS_OPEN``)."""
    own = resources.files(__package__) / "docs_static"
    names = {*VENDOR_FILES, OAUTH2_SCRIPT, *(e.name for e in own.iterdir() if e.name.endswith(".js"))}
    return frozenset(f"{DOCS}/{name}" for name in names)


def docs_router(*, title: str) -> APIRouter:
    """``/docs``, ``/redoc``, ``/docs/oauth2-redirect`` and the files they load, ``/docs/{asset}``."""
    assets = load_docs_assets()
    router = APIRouter(include_in_schema=False)
    name = html.escape(title)

    def page(template: str, headers: dict[str, str], request: Request) -> Response:
        root = html.escape(request.scope.get("root_path", "").rstrip("/"))
        body = template.format(title=name, root=root, openapi=OPENAPI, oauth2=OAUTH2_REDIRECT)
        return answer(request, body.encode(), "text/html; charset=utf-8", headers)

    @router.api_route(DOCS, methods=METHODS)
    async def swagger_ui(request: Request) -> Response:
        return page(_SWAGGER_PAGE, SWAGGER_HEADERS, request)

    @router.api_route(OAUTH2_REDIRECT, methods=METHODS)
    async def swagger_ui_oauth2_redirect(request: Request) -> Response:
        return page(_OAUTH2_PAGE, SWAGGER_HEADERS, request)

    @router.api_route(REDOC, methods=METHODS)
    async def redoc(request: Request) -> Response:
        return page(_REDOC_PAGE, REDOC_HEADERS, request)

    @router.api_route(DOCS + "/{asset}", methods=METHODS)
    async def docs_asset(asset: str, request: Request) -> Response:
        found = assets.get(asset)
        if found is None:
            raise NotFound(f"Not found: {DOCS}/{asset}")
        return found.response(request)

    return router
