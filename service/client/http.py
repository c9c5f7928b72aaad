"""The HTTP layer under ``GatewayClient`` (``service.client``): paths, errors, credentials, TLS.

``url_path`` percent-encodes each path segment, so a name is always exactly one segment;
``data_type`` is a format's v2 media type, ``_json`` an answer's body. ``ClientError`` is a request
the gateway refused (status >= 400) or that never reached it (status 0). ``BearerAuth`` sends a
Bearer token; ``tls_context`` builds what httpx verifies the gateway with, a client certificate
loaded for mutual TLS, and ``_tls_failure`` says why a handshake failed (an untrusted gateway
certificate, a client certificate required or refused).

``service.client`` and ``service.client.consumers`` both build on it; it imports neither.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Generator
from typing import Any, cast
from urllib.parse import quote

import httpx

from service.wire.codings import CODINGS, Coding, encode


def data_type(fmt: str) -> str:
    return f"application/vnd.kafka.{fmt}.v2+json"


def body_coding(name: str | None) -> Coding | None:
    """``name`` as a coding of request bodies (None: plain); ``ValueError`` if it is none of them."""
    if name is not None and name not in CODINGS:
        raise ValueError(f"compress is one of {', '.join(CODINGS)}, not {name!r}")
    return cast("Coding | None", name)


def coded_body(kwargs: dict[str, Any], coding: Coding) -> dict[str, Any]:
    """httpx's request arguments with the body (``json`` or ``content`` bytes) coded ``coding``,
    and ``Content-Encoding`` saying so; a request without a body is left as it is."""
    if "json" in kwargs:
        headers = {"Content-Type": "application/json", **(kwargs.get("headers") or {})}
        raw = json.dumps(kwargs["json"], ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        kwargs = {k: v for k, v in kwargs.items() if k != "json"} | {"headers": headers}
    elif isinstance(kwargs.get("content"), bytes):
        raw, headers = kwargs["content"], dict(kwargs.get("headers") or {})
    else:
        return kwargs
    return kwargs | {"content": encode(coding, raw), "headers": headers | {"Content-Encoding": coding}}


def url_path(*segments: str | int) -> str:
    """An absolute path of ``segments``, each percent-encoded into exactly one segment."""
    return "".join("/" + quote(str(segment), safe="") for segment in segments)


class ClientError(Exception):
    """A request the gateway refused (status >= 400) or that never reached it (status 0)."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


class BearerAuth(httpx.Auth):
    """``Authorization: Bearer <token>`` on every request."""

    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header
        yield request


def tls_context(
    verify: str | bool = True, cert: str | tuple[str, str] | None = None
) -> ssl.SSLContext | bool:
    """What httpx's ``verify`` takes: the CA certificates file ``verify`` names (``True``: the
    system's; ``False``: no verification), with the client certificate ``cert`` (a PEM file
    holding certificate and key, or ``(certificate, key)``) loaded for mutual TLS.

    A file that cannot be used raises ``ValueError`` naming it and saying why.
    """
    if cert is None and not isinstance(verify, str):
        return verify
    if isinstance(verify, str):
        try:
            context = ssl.create_default_context(cafile=verify)
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot use the CA certificates in {verify!r}: {_reason(exc)}") from exc
    else:
        context = httpx.create_ssl_context(verify=verify)
    if cert is not None:
        certfile, keyfile = (cert, None) if isinstance(cert, str) else cert
        try:
            context.load_cert_chain(certfile, keyfile)
        except (OSError, ValueError) as exc:
            named = repr(certfile) if keyfile is None else f"{certfile!r} with the key {keyfile!r}"
            raise ValueError(f"cannot use the client certificate {named}: {_reason(exc)}") from exc
    return context


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc)


def _tls_failure(exc: BaseException) -> str | None:
    """What went wrong in the TLS handshake behind a transport error, if that is what failed."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return f"its TLS certificate is not trusted ({seen.verify_message})"
        if isinstance(seen, ssl.SSLError):
            reason = str(seen.reason or seen)
            if "CERTIFICATE_REQUIRED" in reason:
                return "it requires a client certificate"
            if any(r in reason for r in ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN")):
                return f"it refused the client certificate ({reason})"
            return f"TLS failed ({reason})"
        seen = seen.__cause__ or seen.__context__
    return None


def _json(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    return response.json()
