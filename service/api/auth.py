"""Who a request is from: ``Authenticate``, the ASGI middleware in front of every route.

With ``AUTH`` off (the default) there is no middleware and every request is from
``ANONYMOUS``. Otherwise ``AUTH`` lists the methods a client may use, any of them:

- ``basic``: HTTP Basic credentials of a user of the credentials file (``service.security.users``);
- ``jwt``: a Bearer JWT of the configured OpenID Connect provider (``service.security.tokens``);
- ``mtls``: the client certificate the TLS handshake verified (``service.security.tls``).

Credentials in ``Authorization`` decide when they are sent; without them the connection's
client certificate does (with ``mtls``). A request authenticated by neither is answered 401
with Confluent's body (40101) and one ``WWW-Authenticate`` challenge per header scheme on offer,
before any route, the produce fast path included, sees it, and the refusal is audited. A
token that cannot be checked because the provider's keys cannot be fetched is answered 503 with
``Retry-After``: the client did nothing wrong. The
health endpoints stay open; ``/metrics`` (it names every topic and group) and the
documentation are open or closed by setting.

The principal, ``User:<name>`` as Kafka names it, is put in the request's scope
(``principal_of``) for what comes after: ACLs, quotas and idempotency keys are per principal.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Final

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from service.core import audit
from service.core.acl import ANONYMOUS, CLUSTER_NAME
from service.errors import ErrorCode
from service.security.tls import PeerCertificate, PrincipalSource
from service.security.tokens import JWKS_MIN_REFETCH_S, InvalidToken, KeysUnavailable, TokenVerifier
from service.security.users import Verifier

from .http import error_response

ALWAYS_OPEN: Final = frozenset({"/healthz", "/readyz"})
DOCS: Final = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
METRICS: Final = frozenset({"/metrics"})
PEER_KEY: Final = "brokergate.peer"  # the connection's verified client certificate (a PeerCertificate)
_KEY: Final = "brokergate.principal"
_REALM: Final = 'realm="brokergate"'

__all__ = ["ALWAYS_OPEN", "ANONYMOUS", "PEER_KEY", "Authenticate", "open_paths", "principal_of"]


def principal_of(scope: Scope) -> str:
    """The authenticated principal of a request (``ANONYMOUS`` when authentication is off)."""
    principal: str = scope.get(_KEY, ANONYMOUS)
    return principal


def open_paths(*, docs: bool, metrics: bool) -> frozenset[str]:
    return ALWAYS_OPEN | (DOCS if docs else frozenset()) | (METRICS if metrics else frozenset())


class _Refused(Exception):
    def __init__(self, message: str, *, claimed: str = ANONYMOUS, bearer_error: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.claimed = claimed  # who the credentials said they were, for the audit line
        self.bearer_error = bearer_error  # RFC 6750's error code for the Bearer challenge


class _CannotCheck(Exception):
    """The credentials cannot be checked now (the identity provider's keys are unknown)."""


class Authenticate:
    def __init__(
        self,
        app: ASGIApp,
        *,
        open_paths: Iterable[str],
        basic: Verifier | None = None,
        tokens: TokenVerifier | None = None,
        certificates: PrincipalSource | None = None,
    ) -> None:
        self.app = app
        self.open = frozenset(open_paths)
        self.basic = basic
        self.tokens = tokens
        self.certificates = certificates
        self._offered = " or ".join(
            what
            for what, on in (
                ("HTTP Basic credentials", basic is not None),
                ("a Bearer token", tokens is not None),
                ("a client certificate", certificates is not None),
            )
            if on
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        try:
            principal = await self._principal(scope)
        except (_Refused, _CannotCheck) as exc:
            if scope["type"] == "websocket":  # closed before the handshake: the server answers 403
                self._audit(exc, scope)
                await send({"type": "websocket.close", "code": 1008, "reason": str(exc)[:120]})
                return
            if isinstance(exc, _Refused):
                await self._refuse(exc, scope, receive, send)
                return
            # the client did nothing wrong: the provider is away
            await error_response(503, ErrorCode.UNAVAILABLE, str(exc), retry_after=JWKS_MIN_REFETCH_S)(
                scope, receive, send
            )
            return
        if principal is not None:
            scope[_KEY] = principal
        await self.app(scope, receive, send)

    async def _principal(self, scope: Scope) -> str | None:
        header = Headers(scope=scope).get("authorization")
        if header is not None:
            scheme, _, credentials = header.partition(" ")
            scheme = scheme.lower()
            if scheme == "basic" and self.basic is not None:
                return await self._basic(credentials)
            if scheme == "bearer" and self.tokens is not None:
                return await self._bearer(credentials.strip())
            raise _Refused(f"The Authorization scheme is not accepted here: send {self._offered}.")
        if self.certificates is not None:
            peer: PeerCertificate | None = scope.get(PEER_KEY)
            if peer is not None:
                principal = peer.principal(self.certificates)
                if principal is None:
                    raise _Refused(f"The client certificate has no {self.certificates} name to authenticate.")
                return principal
        if scope["path"] in self.open:
            return None
        raise _Refused(f"Authentication is required: send {self._offered}.")

    async def _basic(self, encoded: str) -> str:
        assert self.basic is not None
        try:
            decoded = base64.b64decode(encoded.strip().encode("latin-1"), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeError):
            raise _Refused("The Basic credentials are not base64 of 'user:password'.") from None
        name, sep, password = decoded.partition(":")
        if not sep or not name:
            raise _Refused("The Basic credentials are not base64 of 'user:password'.")
        if not await self.basic.check(name, password):
            raise _Refused("The credentials are not valid.", claimed=f"User:{name}")
        return f"User:{name}"

    async def _bearer(self, token: str) -> str:
        assert self.tokens is not None
        try:
            return await self.tokens.principal(token)
        except InvalidToken as exc:
            raise _Refused(f"The token is not valid: {exc}.", bearer_error="invalid_token") from None
        except KeysUnavailable as exc:
            raise _CannotCheck(f"The token cannot be checked now: {exc}; retry.") from None

    @staticmethod
    def _audit(exc: Exception, scope: Scope) -> None:
        client = scope.get("client")
        audit.record(
            "authentication",
            principal=exc.claimed if isinstance(exc, _Refused) else ANONYMOUS,
            address=client[0] if client else None,
            operation="AUTHENTICATE",
            resource=f"CLUSTER:{CLUSTER_NAME}",
            outcome=audit.FAILED,
            reason=str(exc),
            path=scope["path"],
        )

    async def _refuse(self, refusal: _Refused, scope: Scope, receive: Receive, send: Send) -> None:
        self._audit(refusal, scope)
        challenges = []
        if self.basic is not None:
            challenges.append(f'Basic {_REALM}, charset="UTF-8"')
        if self.tokens is not None:
            error = f', error="{refusal.bearer_error}"' if refusal.bearer_error else ""
            challenges.append(f"Bearer {_REALM}{error}")
        if not challenges:  # a client certificate only: no header scheme to offer, but 401 needs one
            challenges.append(f"Mutual-TLS {_REALM}")
        response = error_response(401, ErrorCode.UNAUTHORIZED, refusal.message)
        for challenge in challenges:
            response.headers.append("WWW-Authenticate", challenge)
        await response(scope, receive, send)
