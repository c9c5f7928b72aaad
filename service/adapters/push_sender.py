"""The ``PushSender`` port over httpx: one POST to a checked address, never a way further in.

Each request resolves its host (once: the name is never resolved again for that request),
asks ``Destinations`` which of the addresses may be used, and connects to that address,
naming the host in the ``Host`` header and, over TLS, in SNI, where the certificate is verified
against the name. Redirects are not followed. Of the answer, the status and ``Retry-After`` are
kept, and at most ``max_response_bytes`` of the body are read (the first few hundred characters
of a failure's body go into its outcome); the whole request is bounded by its deadline.

Connections are kept per endpoint host, port and scheme, so one is never reused for another name
that happens to share the address.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import ipaddress
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Final

import httpx

from service.core.push.destinations import DestinationRefused, Destinations, IpAddress, Target
from service.core.push.ports import Outcome, PushRequest

Resolver = Callable[[str, int], Awaitable[list[IpAddress]]]

MAX_RESPONSE_BYTES: Final = 64 * 1024
_IDLE_PER_HOST: Final = 64  # connections kept open to one endpoint between requests
_ONE_CONNECTION: Final = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=30)
_ERROR_CHARS: Final = 200  # of a failure's body kept in its outcome


async def resolve(host: str, port: int) -> list[IpAddress]:
    """The addresses ``host`` resolves to now, in the resolver's order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))


class HttpPushSender:
    """Sends push requests (see the module docstring). ``resolver`` answers names (the system's
    by default); ``verify`` is httpx's (True: the system's CAs, or an ``ssl.SSLContext``)."""

    def __init__(
        self,
        *,
        resolver: Resolver = resolve,
        verify: bool | ssl.SSLContext = True,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self._resolve = resolver
        self._verify = verify
        self._tls: ssl.SSLContext | None = None  # made once, on the first connection: it loads the CAs
        self._max_bytes = max_response_bytes
        # httpx transports of one connection each, kept idle per endpoint host, port and scheme: a
        # request takes one and gives it back. (One pool of many connections costs each request a
        # scan of them all, which under load took more time than the request; and the transport,
        # below the client, has no cookies, proxies or redirects to spend a request's time on.)
        self._idle: dict[tuple[str, str, int], list[httpx.AsyncHTTPTransport]] = {}

    async def stop(self) -> None:
        idle, self._idle = self._idle, {}
        for transports in idle.values():
            for transport in transports:
                await _close(transport)

    async def send(self, request: PushRequest, destinations: Destinations) -> Outcome:
        target = request.target
        deadline_s = request.timeout_ms / 1000
        started = time.monotonic()
        try:
            async with asyncio.timeout(deadline_s):
                address = await self._address(target, destinations)
                return await self._post(request, target, address)
        except DestinationRefused as exc:
            return Outcome(None, exc.message)
        except TimeoutError:
            return Outcome(None, f"no answer within {request.timeout_ms} ms")
        except OSError as exc:  # the name did not resolve
            return Outcome(None, f"{target.host} did not resolve: {exc.strerror or exc}")
        except httpx.ConnectError as exc:
            return Outcome(None, f"connection failed: {_reason(exc)}")
        except httpx.HTTPError as exc:
            spent = int((time.monotonic() - started) * 1000)
            return Outcome(None, f"{type(exc).__name__} after {spent} ms: {_reason(exc)}")

    async def check(self, target: Target, destinations: Destinations) -> None:
        try:
            async with asyncio.timeout(5):
                await self._address(target, destinations)
        except TimeoutError:
            raise DestinationRefused(f"{target.host} did not resolve within 5 s.") from None
        except OSError as exc:
            raise DestinationRefused(f"{target.host} did not resolve: {exc.strerror or exc}.") from None

    async def _address(self, target: Target, destinations: Destinations) -> IpAddress:
        if target.literal is not None:
            addresses = [target.literal]
        else:
            addresses = await self._resolve(target.host, target.port)
        return destinations.first_allowed(target, addresses)

    async def _post(self, request: PushRequest, target: Target, address: IpAddress) -> Outcome:
        host = f"[{address}]" if address.version == 6 else str(address)
        url = f"{target.scheme}://{host}:{target.port}{target.target}"
        headers = [("host", target.authority), *request.headers]
        extensions = (
            {"sni_hostname": target.host} if target.scheme == "https" and target.literal is None else {}
        )
        key = (target.scheme, target.host, target.port)
        idle = self._idle.setdefault(key, [])
        transport = idle.pop() if idle else self._transport()
        try:
            response = await transport.handle_async_request(
                httpx.Request("POST", url, content=request.body, headers=headers, extensions=extensions)
            )
            try:
                head = bytearray()
                async for chunk in response.aiter_raw():
                    if len(head) < self._max_bytes:
                        head += chunk[: self._max_bytes - len(head)]
                    if len(head) >= self._max_bytes:
                        break
                status = response.status_code
                retry_after = _retry_after_ms(response.headers.get("retry-after"))
            finally:
                await response.aclose()
        except BaseException:
            await _close(transport)
            raise
        if len(idle) < _IDLE_PER_HOST:
            idle.append(transport)
        else:
            await _close(transport)
        error = None if 200 <= status < 300 else _text(bytes(head[: _ERROR_CHARS * 4]))
        return Outcome(status, error or None, retry_after)

    def _transport(self) -> httpx.AsyncHTTPTransport:
        # A transport follows no redirect and knows no proxy (those are the client's): the
        # checked address is the one connected to; the request's deadline bounds it all.
        if self._tls is None:
            verify = self._verify
            self._tls = verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify)
        return httpx.AsyncHTTPTransport(verify=self._tls, limits=_ONE_CONNECTION, trust_env=False)


def _retry_after_ms(value: str | None) -> int | None:
    """``Retry-After`` in ms: seconds, or an HTTP date; None if absent or not understood."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return min(int(value), 86_400) * 1000
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0, int((when.timestamp() - time.time()) * 1000))


def _text(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    shown = "".join(ch if ch.isprintable() else " " for ch in text)
    return " ".join(shown.split())[:_ERROR_CHARS]


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text[:_ERROR_CHARS]


async def _close(transport: httpx.AsyncHTTPTransport) -> None:
    with contextlib.suppress(Exception):
        await transport.aclose()
