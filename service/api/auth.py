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
``Retry-After``: the client did nothing wrong. Whatever else a verifier raises for a token is
the token's fault: 401. Two ``Authorization`` headers are refused (400, 40001) rather than one
picked, and no credential may name ``User:*`` (Kafka's wildcard) or ``User:ANONYMOUS`` (every
unauthenticated client). A WebSocket handshake is refused with the very same response (one
function, ``Authenticate.refusal``, makes it for both), sent as ASGI's WebSocket denial
response. The health endpoints stay open; ``/metrics`` (it names every topic and group) and the
documentation are open or closed by setting.

The principal, ``User:<name>`` as Kafka names it, is put in the request's scope
(``principal_of``) for what comes after: ACLs, quotas and idempotency keys are per principal.
So is the ``Credential`` that authenticated it (``credential_of``): a stream asks it on every
poll, commit, seek and produce whether it still holds (Basic: the user's line of the users file
is unchanged; a token: not past its ``exp`` and its key still listed; a certificate: not past
its ``notAfter``), and ends when it does not.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from service.core import audit
from service.core.acl import ANONYMOUS, ANY_USER, CLUSTER_NAME
from service.core.credentials import Credential
from service.errors import ErrorCode, GatewayError
from service.security.guesses import TooManyGuesses
from service.security.tls import PeerCertificate, PrincipalSource
from service.security.tokens import JWKS_MIN_REFETCH_S, InvalidToken, KeysUnavailable, TokenVerifier
from service.security.users import UsersFile, Verifier

from .replies import JSONBody, error_response

log = logging.getLogger(__name__)

ALWAYS_OPEN: Final = frozenset({"/healthz", "/readyz"})
DOCS: Final = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
METRICS: Final = frozenset({"/metrics"})
PEER_KEY: Final = "brokergate.peer"  # the connection's verified client certificate (a PeerCertificate)
_KEY: Final = "brokergate.principal"
_CREDENTIAL_KEY: Final = "brokergate.credential"  # what authenticated it (a Credential)
_RESERVED: Final = frozenset({ANY_USER, ANONYMOUS})  # Kafka's wildcard, and every unauthenticated client
_REALM: Final = 'realm="brokergate"'

__all__ = [
    "ALWAYS_OPEN",
    "ANONYMOUS",
    "PEER_KEY",
    "Authenticate",
    "BasicCredential",
    "CertificateCredential",
    "credential_of",
    "open_paths",
    "principal_of",
]


def principal_of(scope: Scope) -> str:
    """The authenticated principal of a request (``ANONYMOUS`` when authentication is off)."""
    principal: str = scope.get(_KEY, ANONYMOUS)
    return principal


def credential_of(scope: Scope) -> Credential | None:
    """What authenticated the request, to ask later whether it still would (None: nothing did)."""
    credential: Credential | None = scope.get(_CREDENTIAL_KEY)
    return credential


def open_paths(*, docs: bool, metrics: bool) -> frozenset[str]:
    return ALWAYS_OPEN | (DOCS if docs else frozenset()) | (METRICS if metrics else frozenset())


@dataclass(frozen=True, slots=True)
class BasicCredential:
    """HTTP Basic credentials that were valid: they hold while the user's line of the users file
    (its hash) stays as it was when they were checked."""

    principal: str
    name: str
    hashed: str | None
    users: UsersFile

    async def still_valid(self) -> bool:
        return self.hashed is not None and self.users.hash_of(self.name) == self.hashed


@dataclass(frozen=True, slots=True)
class CertificateCredential:
    """A verified client certificate: it holds until it expires (``notAfter``)."""

    principal: str
    not_after: float | None

    async def still_valid(self) -> bool:
        return self.not_after is None or time.time() < self.not_after


class _Refused(Exception):
    """Why a request or handshake is not let in, and how it is answered (``Authenticate.refusal``):
    401 with a challenge per scheme on offer by default; the ``status`` and Confluent ``code`` of
    anything else, with ``retry_after`` when the client should come back."""

    def __init__(
        self,
        message: str,
        *,
        claimed: str = ANONYMOUS,
        bearer_error: str | None = None,
        status: int = 401,
        code: int = ErrorCode.UNAUTHORIZED,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.claimed = claimed  # who the credentials said they were, for the audit line
        self.bearer_error = bearer_error  # RFC 6750's error code for the Bearer challenge
        self.status = status
        self.code = code
        self.retry_after = retry_after

    @classmethod
    def of(cls, error: GatewayError, *, claimed: str = ANONYMOUS) -> _Refused:
        """The refusal a ``GatewayError`` raised while authenticating stands for (too many guesses, say)."""
        return cls(
            error.message,
            claimed=claimed,
            status=error.http_status,
            code=int(error.error_code),
            retry_after=error.retry_after,
        )


class Authenticate:
    """The ASGI middleware in front of every route and every WebSocket handshake (see the module
    docstring). Collaborators: the users file's ``Verifier``, the ``TokenVerifier`` and the
    certificate's ``PrincipalSource``, whichever ``AUTH`` turns on; the audit trail."""

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
            credential = await self._credential(scope)
        except GatewayError as exc:
            refused = _Refused.of(exc)
        except _Refused as exc:
            refused = exc
        else:
            if credential is not None:
                scope[_KEY] = credential.principal
                scope[_CREDENTIAL_KEY] = credential
            await self.app(scope, receive, send)
            return
        self._audit(refused, scope)
        if scope["type"] == "websocket" and "websocket.http.response" not in scope.get("extensions", {}):
            # a server that cannot answer a handshake with a response: closed before it, a bare 403
            await send({"type": "websocket.close", "code": 1008, "reason": refused.message[:120]})
            return
        # the same response either way: a refused handshake is answered with it (ASGI's
        # websocket.http.response, which starlette's responses send for a WebSocket scope)
        await self.refusal(refused)(scope, receive, send)

    def refusal(self, refused: _Refused) -> JSONBody:
        """The answer to a request or a WebSocket handshake that is not let in, the one function
        that makes it for both transports: Confluent's body, and a ``WWW-Authenticate`` challenge
        per scheme on offer for a 401, ``Retry-After`` when the client should come back."""
        response = error_response(
            refused.status, refused.code, refused.message, retry_after=refused.retry_after
        )
        if refused.status == 401:
            challenges = []
            if self.basic is not None:
                challenges.append(f'Basic {_REALM}, charset="UTF-8"')
            if self.tokens is not None:
                error = f', error="{refused.bearer_error}"' if refused.bearer_error else ""
                challenges.append(f"Bearer {_REALM}{error}")
            if not challenges:  # a client certificate only: no header scheme to offer, but 401 needs one
                challenges.append(f"Mutual-TLS {_REALM}")
            for challenge in challenges:
                response.headers.append("WWW-Authenticate", challenge)
        return response

    async def _credential(self, scope: Scope) -> Credential | None:
        """What authenticates the request (None: nothing, on an open path); ``_Refused`` if its
        credentials do not, or name a principal no one may be."""
        credential = await self._principal(scope)
        if credential is not None and credential.principal in _RESERVED:
            raise _Refused(f"No one authenticates as {credential.principal}.", claimed=credential.principal)
        return credential

    async def _principal(self, scope: Scope) -> Credential | None:
        headers = Headers(scope=scope).getlist("authorization")
        if len(headers) > 1:  # which one counts would be a guess, and a proxy in between may guess otherwise
            raise _Refused(
                f"A request carries one Authorization header; this one carries {len(headers)}.",
                status=400,
                code=ErrorCode.BAD_REQUEST,
            )
        if headers:
            scheme, _, credentials = headers[0].partition(" ")
            scheme = scheme.lower()
            if scheme == "basic" and self.basic is not None:
                return await self._basic(credentials, scope)
            if scheme == "bearer" and self.tokens is not None:
                return await self._bearer(credentials.strip())
            raise _Refused(f"The Authorization scheme is not accepted here: send {self._offered}.")
        if self.certificates is not None:
            peer: PeerCertificate | None = scope.get(PEER_KEY)
            if peer is not None:
                principal = peer.principal(self.certificates)
                if principal is None:
                    raise _Refused(f"The client certificate has no {self.certificates} name to authenticate.")
                credential = CertificateCredential(principal, peer.not_after)
                if not await credential.still_valid():  # a connection kept open past its certificate
                    raise _Refused("The client certificate has expired.", claimed=principal)
                return credential
        if scope["path"] in self.open:
            return None
        raise _Refused(f"Authentication is required: send {self._offered}.")

    async def _basic(self, encoded: str, scope: Scope) -> Credential:
        assert self.basic is not None
        try:
            decoded = base64.b64decode(encoded.strip().encode("latin-1"), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeError):
            raise _Refused("The Basic credentials are not base64 of 'user:password'.") from None
        name, sep, password = decoded.partition(":")
        if not sep or not name:
            raise _Refused("The Basic credentials are not base64 of 'user:password'.")
        hashed = self.basic.users.hash_of(name)  # before the check: a change meanwhile ends what they open
        client = scope.get("client")
        try:
            valid = await self.basic.check(name, password, client[0] if client else None)
        except TooManyGuesses as exc:  # 429 before any hashing: this address or name failed too often
            raise _Refused.of(exc, claimed=f"User:{name}") from None
        if not valid:
            raise _Refused("The credentials are not valid.", claimed=f"User:{name}")
        return BasicCredential(f"User:{name}", name, hashed, self.basic.users)

    async def _bearer(self, token: str) -> Credential:
        assert self.tokens is not None
        try:
            return await self.tokens.verify(token)
        except InvalidToken as exc:
            raise _Refused(f"The token is not valid: {exc}.", bearer_error="invalid_token") from None
        except KeysUnavailable as exc:  # the client did nothing wrong: the provider is away
            raise _Refused(
                f"The token cannot be checked now: {exc}; retry.",
                status=503,
                code=ErrorCode.UNAVAILABLE,
                retry_after=JWKS_MIN_REFETCH_S,
            ) from None
        except Exception as exc:  # whatever else a client's token makes the verifier raise: still its token
            # one line, not a traceback: any client can send such a token (tests/unit/test_tokens_fuzz.py)
            log.warning("a Bearer token made the verifier fail: %s", exc.__class__.__name__)
            raise _Refused("The token is not valid.", bearer_error="invalid_token") from None

    @staticmethod
    def _audit(refused: _Refused, scope: Scope) -> None:
        client = scope.get("client")
        audit.record(
            "authentication",
            principal=refused.claimed,
            address=client[0] if client else None,
            operation="AUTHENTICATE",
            resource=f"CLUSTER:{CLUSTER_NAME}",
            outcome=audit.FAILED,
            reason=refused.message,
            path=scope["path"],
        )
