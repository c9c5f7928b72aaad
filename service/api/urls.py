"""The URL clients reach the gateway at, for the links it hands out (``base_uri``, v3's ``self``)."""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import Request

from service.api.gateway import gateway_of

__all__ = ["public_base"]


def public_base(request: Request) -> str:
    """The URL clients reach this gateway at, for ``base_uri`` and v3 links, without a trailing ``/``.

    ``ADVERTISED_URL`` when set. Else the request's ``Host``, if its name is in
    ``ALLOWED_HOSTS``: a forged ``Host`` must not become a URL the gateway hands out. Else the
    address and port the connection reached, which the client evidently can reach.
    """
    settings = gateway_of(request.scope).settings
    if settings.advertised_url:
        return settings.advertised_url.rstrip("/")
    scheme = request.url.scheme
    allowed = settings.allowed_host_names
    netloc = _netloc(request.headers.get("host", ""))
    if netloc is not None and ("*" in allowed or netloc[0] in allowed):
        return f"{scheme}://{_join(*netloc)}"
    server = request.scope.get("server") or (settings.bind_host, settings.port)
    return f"{scheme}://{_join(str(server[0]), server[1])}"


def _netloc(host_header: str) -> tuple[str, int | None] | None:
    """The host name and port of a ``Host`` header, or None if it is not one."""
    try:
        parts = urlsplit("//" + host_header)
        port = parts.port
    except ValueError:
        return None
    name = parts.hostname
    if not name or parts.path or parts.query or parts.fragment or parts.username is not None:
        return None
    return name, port


def _join(host: str, port: int | None) -> str:
    host = f"[{host}]" if ":" in host else host
    return host if port is None else f"{host}:{port}"
