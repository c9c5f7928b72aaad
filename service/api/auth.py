"""Who a request is from: ``Authenticate``, the ASGI middleware in front of every route.

With ``AUTH`` off (the default) there is no middleware and every request is from
``ANONYMOUS``. With ``AUTH=basic``, a request must carry HTTP Basic credentials of a user of
the credentials file (``service.security.users``), or it is answered 401 with
``WWW-Authenticate`` and Confluent's body (40101) before any route, the produce fast path
included, sees it. The health endpoints stay open; ``/metrics`` (it names every topic and
group) and the documentation are open or closed by setting.

The principal, ``User:<name>`` as Kafka names it, is put in the request's scope
(``principal_of``) for what comes after: quotas and idempotency keys are per principal.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Final

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from service.errors import ErrorCode
from service.security.users import Verifier

from .http import JSONBody, error_response

ANONYMOUS: Final = "User:ANONYMOUS"
ALWAYS_OPEN: Final = frozenset({"/healthz", "/readyz"})
DOCS: Final = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
METRICS: Final = frozenset({"/metrics"})
_KEY: Final = "brokergate.principal"


def principal_of(scope: Scope) -> str:
    """The authenticated principal of a request (``ANONYMOUS`` when authentication is off)."""
    principal: str = scope.get(_KEY, ANONYMOUS)
    return principal


def open_paths(*, docs: bool, metrics: bool) -> frozenset[str]:
    return ALWAYS_OPEN | (DOCS if docs else frozenset()) | (METRICS if metrics else frozenset())


class Authenticate:
    def __init__(self, app: ASGIApp, *, basic: Verifier, open_paths: Iterable[str]) -> None:
        self.app = app
        self.basic = basic
        self.open = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization")
        if header is None:
            if scope["path"] in self.open:
                await self.app(scope, receive, send)
                return
            await _refuse("Authentication is required: send HTTP Basic credentials.")(scope, receive, send)
            return
        name = await self._basic(header)
        if name is None:
            await _refuse("The credentials are not valid.")(scope, receive, send)
            return
        scope[_KEY] = f"User:{name}"
        await self.app(scope, receive, send)

    async def _basic(self, header: str) -> str | None:
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            decoded = base64.b64decode(encoded.strip().encode("latin-1"), validate=True).decode("utf-8")
            name, sep, password = decoded.partition(":")
        except (binascii.Error, UnicodeError):
            return None
        if not sep or not name:
            return None
        return name if await self.basic.check(name, password) else None


def _refuse(message: str) -> JSONBody:
    return error_response(
        401,
        ErrorCode.UNAUTHORIZED,
        message,
        headers={"WWW-Authenticate": 'Basic realm="brokergate", charset="UTF-8"'},
    )
