"""The web console at ``/ui``: its static files, read from the package once, served with a strict CSP.

The console is a client of the public API and nothing more: the page calls the same routes any
client calls, with the browser's credentials, so it can show or change only what the API lets
that principal see or change. This router serves its files and nothing else:

- ``GET /ui``: the page (``index.html``), with ``ui_read_only`` written into it, and what the
  gateway knows of the request that asked for it (``Viewer``): the principal it was
  authenticated as, whether listings are filtered by the ACLs, and the topics the gateway keeps
  for itself (which the API refuses to delete or produce to);
- ``GET /ui/{asset}``: its scripts, style sheet and icon, by file name (one path segment, so no
  name reaches outside the console's directory; an unknown name is 404).

``HEAD`` is answered on every route as ``GET`` is, without the body.

Every file is read at start and answered from memory with an ``ETag`` (304 when the browser has
it), ``Cache-Control: no-cache`` (a new version of the gateway is picked up at once) and the
headers a careful console sends: a ``Content-Security-Policy`` that runs only the console's own
scripts (no inline script, no ``eval``) and lets it talk only to its own origin, no framing, no
MIME sniffing, no referrer. The routes are left out of the OpenAPI document: they are no API.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Annotated, Final

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from service.api.auth import principal_of
from service.api.gateway import Gateway, get_gateway
from service.api.pages import SECURITY_HEADERS
from service.errors import NotFound

PREFIX: Final = "/ui"
PAGE: Final = "index.html"
READ_ONLY_MARK: Final = "{{read_only}}"  # in index.html: where the setting goes
VIEWER_MARK: Final = "{{viewer}}"  # in index.html: where the page's ``Viewer`` attributes go
METHODS: Final = ["GET", "HEAD"]
# The topics the gateway keeps for itself, and whose records they hold (the API refuses to
# delete them, grow them or produce to them).
RESERVED_OWNER: Final = "the schema registry's records"

MEDIA_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


def answer(request: Request, body: bytes, media_type: str, headers: Mapping[str, str]) -> Response:
    """``body`` as ``GET`` is answered, or its headers alone for ``HEAD`` (its length said)."""
    if request.method == "HEAD":
        return Response(media_type=media_type, headers={**headers, "Content-Length": str(len(body))})
    return Response(body, media_type=media_type, headers=dict(headers))


@dataclass(frozen=True, slots=True)
class Asset:
    """One file of the console, as served."""

    body: bytes
    media_type: str
    etag: str

    @classmethod
    def of(cls, name: str, body: bytes) -> Asset:
        suffix = name[name.rfind(".") :]
        return cls(body, MEDIA_TYPES[suffix], '"' + hashlib.sha256(body).hexdigest()[:32] + '"')

    def response(self, request: Request) -> Response:
        headers = {**SECURITY_HEADERS, "ETag": self.etag}
        if self.etag in _etags(request.headers.get("if-none-match")):
            return Response(status_code=304, headers=headers)
        return answer(request, self.body, self.media_type, headers)


def _etags(header: str | None) -> set[str]:
    return {tag.strip().removeprefix("W/") for tag in (header or "").split(",")}


@dataclass(frozen=True, slots=True)
class Viewer:
    """What the page is told of the request that asked for it, as ``data-`` attributes of its body.

    ``principal`` is who the gateway authenticated (``User:ANONYMOUS`` when authentication is off);
    ``filtered``, whether the ACLs decide, so listings hold only what the principal may describe;
    ``reserved``, the topics the gateway keeps for itself, each with whose records it holds.
    """

    principal: str
    authenticated: bool
    filtered: bool
    reserved: Mapping[str, str]

    @classmethod
    def of(cls, request: Request, gw: Gateway) -> Viewer:
        settings = gw.settings
        return cls(
            principal_of(request.scope),
            authenticated=bool(settings.auth_methods),
            filtered=settings.authorize,
            reserved={settings.schema_registry_topic: RESERVED_OWNER},
        )

    def attributes(self) -> str:
        values = {
            "principal": self.principal,
            "authenticated": "true" if self.authenticated else "false",
            "filtered": "true" if self.filtered else "false",
            "reserved": json.dumps(dict(self.reserved)),
        }
        return " ".join(f'data-{name}="{html.escape(value, quote=True)}"' for name, value in values.items())


def load_assets(*, read_only: bool) -> dict[str, Asset]:
    """The console's files by name (the package's ``static`` directory), the page's setting filled
    in (the page's ``Viewer`` is filled in for each request)."""
    assets: dict[str, Asset] = {}
    for entry in (resources.files(__package__) / "static").iterdir():
        name = entry.name
        if not entry.is_file() or name[name.rfind(".") :] not in MEDIA_TYPES:
            continue
        body = entry.read_bytes()
        if name == PAGE:
            body = body.replace(READ_ONLY_MARK.encode(), b"true" if read_only else b"false")
        assets[name] = Asset.of(name, body)
    if PAGE not in assets:
        raise RuntimeError(f"the console's {PAGE} is not in the package: reinstall brokergate")
    return assets


def console_router(*, read_only: bool) -> APIRouter:
    """The routes of the console; ``read_only`` hides what would create, delete or produce."""
    assets = load_assets(read_only=read_only)
    template = assets[PAGE].body
    router = APIRouter(include_in_schema=False)

    @router.api_route(PREFIX, methods=METHODS)
    async def console(request: Request, gw: Annotated[Gateway, Depends(get_gateway)]) -> Response:
        page = template.replace(VIEWER_MARK.encode(), Viewer.of(request, gw).attributes().encode())
        return Asset.of(PAGE, page).response(request)

    @router.api_route(PREFIX + "/{asset}", methods=METHODS)
    async def console_asset(asset: str, request: Request) -> Response:
        found = assets.get(asset)
        if found is None or asset == PAGE:  # the page only at /ui: its relative links resolve there
            raise NotFound(f"Not found: {PREFIX}/{asset}")
        return found.response(request)

    return router
