"""Which client a request is from, as the quotas count it.

A client is the value of the configured header (``X-API-Key`` by default),
else its address. Behind a load balancer the address is the balancer's
unless the server trusts it to report the client's: uvicorn, which
``brokergate serve`` runs on, takes the client address from
``X-Forwarded-For`` only when the connection comes from an address listed in
``FORWARDED_ALLOW_IPS`` (default: loopback), so no client can pick its own.

The routers ask only when quotas are on (``quotas.produce``/``quotas.consume``,
fixed at start), so a gateway without quotas does no extra work per request;
the core services charge the buckets.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection

from service.core.quotas import Quotas, client_id

from .auth import ANONYMOUS, principal_of

__all__ = ["client_of", "identity_of"]


def identity_of(request: HTTPConnection, header: str) -> str | None:
    """Who the request says it is, hashed: its authenticated principal when there is one (which
    it cannot dodge by changing a header), else its API key in ``header``; None if neither."""
    principal = principal_of(request.scope)
    if principal != ANONYMOUS:
        return client_id(principal, None)
    api_key = request.headers.get(header) if header else None
    return client_id(api_key, None) if api_key else None


def client_of(request: HTTPConnection, quotas: Quotas) -> str:
    """The bucket name part of the request's client: ``identity_of``, else its address."""
    peer = request.client
    return identity_of(request, quotas.header) or client_id(None, peer.host if peer else None)
