"""The HTTP server ``brokergate serve`` runs: uvicorn, with the gateway's limits on connections.

How the gateway is served, by ``brokergate serve`` and by the tests alike (``server_config`` of
``service.server.app`` puts these protocols under uvicorn):

- **Connections are a budget, fairly shared.** A connection counts from its TCP accept (before
  any TLS handshake) until it closes, against ``MAX_CONNECTIONS`` and against its address's
  share, ``MAX_CONNECTIONS_PER_ADDRESS`` (``core.fair``: one client cannot take what the others
  need), unless it comes from a proxy trusted with ``FORWARDED_ALLOW_IPS`` (``Proxies``). Past
  either, the connection's requests are answered 503 (Confluent's shape, with ``Retry-After``)
  and it is closed, rather than queued or left to fail with EMFILE. The
  embedded log keeps ``MAX_CONNECTIONS`` descriptors free for them (``fds.check_room``); should
  refused connections pile up until fewer than ``SPARE_FDS`` are left, each new one is answered
  503 at once, before its request, and closed (over TLS, where no answer can go before a
  handshake, closed), so that accepting never fails and the connections served keep theirs.
- **Slow clients are cut off.** A request's headers must arrive within ``HEADER_TIMEOUT_MS`` of
  the connection opening or of the previous response (else 408, and the connection is
  closed), and may hold at most ``MAX_HEADER_BYTES`` of request line and headers (else 431).
- **TLS when configured.** With ``tls_cert`` it serves HTTPS (``service.security.tls``): the
  protocol starts the handshake itself on the accepted connection, bounded by
  ``TLS_HANDSHAKE_TIMEOUT_MS``, so a client that never finishes one is counted meanwhile and
  closed after it. The client certificate the handshake verified is read once per connection
  and put in the scope of each of its requests and of its WebSocket (``PEER_KEY``, by
  ``_ConnectionState``, which both protocols share), for ``Authenticate``.
- **Every answer is in the Confluent shape.** uvicorn's own plain-text answers (a request
  that is not HTTP, a request task cancelled at shutdown, an exception the app did not
  answer) become ``{"error_code": …, "message": …}``.

``DrainingServer`` tells the app first when a stop signal comes: on SIGTERM uvicorn stops
accepting connections and waits for the requests in flight, up to its graceful-shutdown
timeout, before the app hears of it. A long-poll would hold that wait for its whole
timeout and then be cut off. Told at once (``service.api.gateway.begin_drain``), long-polls and
stateless reads answer with what they have, produces in flight finish, and the process exits
well inside a Kubernetes grace period. Streams end by themselves with a final event; uvicorn
closes WebSockets as its shutdown begins, so that begins once they did (``STREAMS_DRAIN_S`` at
most).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
from asyncio import sslproto
from collections.abc import Sequence
from http import HTTPStatus
from types import FrameType
from typing import Any, ClassVar

import orjson
import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State as WebSocketState

from service.adapters.embedded.log.fds import descriptors_left
from service.api.auth import PEER_KEY
from service.api.gateway import begin_drain
from service.api.replies import error_response
from service.api.streams.socket import TEXT_PARTS
from service.core.fair import FairCounter, Hold
from service.errors import ErrorCode
from service.security.tls import PeerCertificate
from service.server.connections import SPARE_FDS, ConnectionLimits, Proxies

log = logging.getLogger("brokergate")

GRACEFUL_SHUTDOWN_S = 10
STREAMS_DRAIN_S = 2.0  # how long a stop waits for streams to send their final event


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self._app = app

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        begin_drain(self._app)
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        gateway = getattr(self._app.state, "gateway", None)
        if gateway is not None:  # before uvicorn closes the WebSockets: their ``end`` goes out first
            await gateway.streams.drained(STREAMS_DRAIN_S)
        await super().shutdown(sockets)


def _answer(status: int, code: int, message: str, *, retry_after: int | None = None) -> bytes:
    """A whole HTTP/1.1 response in the Confluent error shape that closes the connection, written
    straight to the transport by the protocol (no request reached the app)."""
    body = orjson.dumps({"error_code": code, "message": message})
    head = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        "content-type: application/vnd.kafka.v2+json",
        f"content-length: {len(body)}",
        "connection: close",
        *([f"retry-after: {retry_after}"] if retry_after is not None else []),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class _HeadersTooLarge(Exception):
    """Stops the parser (httptools reports it as a parse error) when the headers pass the limit."""


class _ConnectionState:
    """What a connection keeps whichever protocol speaks on it, HTTP or (once upgraded) WebSocket:
    its place among the connections, and the client certificate its handshake verified, put in
    the scope of everything it asks (``_stamp``). One place for both protocols, so a WebSocket
    can never be told less about its client than a request on the same connection."""

    _hold: Hold | None = None
    _peer: PeerCertificate | None = None

    def _read_peer(self, transport: asyncio.BaseTransport) -> None:
        self._peer = PeerCertificate.of(transport.get_extra_info("ssl_object"))

    def _stamp(self, scope: Any) -> None:
        if self._peer is not None:
            scope[PEER_KEY] = self._peer

    def _take_over(self, other: _ConnectionState) -> None:
        """Carry on the connection ``other`` spoke on (a WebSocket upgrade): its place and peer."""
        self._hold, other._hold = other._hold, None
        self._peer = other._peer

    def _release(self) -> None:
        if self._hold is not None:
            self._hold.release()
            self._hold = None


class GatewayProtocol(_ConnectionState, HttpToolsProtocol):
    """uvicorn's httptools protocol with the gateway's connection limits and TLS (``server_config``
    makes a subclass that sets ``limits``, the server's ``counter`` and its ``tls`` context).

    A connection takes its place in ``counter`` when it is accepted; over TLS the handshake
    follows (asyncio's TLS layer, bounded in time), and only then is HTTP spoken on it.
    """

    limits: ClassVar[ConnectionLimits]
    counter: ClassVar[FairCounter]
    tls: ClassVar[ssl.SSLContext | None]
    proxies: ClassVar[Proxies] = Proxies(False, ())

    _raw: asyncio.Transport | None = None  # accepted, its TLS handshake under way
    _served = False  # HTTP is spoken on it (``_serve``)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self._raw is not None:  # the TLS layer's, its handshake done: the secured transport
            self._raw = None
            self._serve(transport)
            return
        peer = transport.get_extra_info("peername")
        address: str | None = f"address {peer[0]}" if isinstance(peer, tuple) else "address local"
        if isinstance(peer, tuple) and peer[0] in self.proxies:
            address = None  # the whole limit is its share
        self._hold = self.counter.try_take(address)
        self._refusal_reason = None if self._hold is not None else self.counter.refusal(address)
        if self._hold is None and descriptors_left() < SPARE_FDS:
            # No descriptor to spare for a refused connection: answered now, not held until its
            # request comes (over TLS nothing can be said before a handshake: closed).
            if self.tls is None:
                message = f"Too many connections to this gateway: {self._refusal_reason}; retry shortly."
                transport.write(_answer(503, ErrorCode.UNAVAILABLE, message, retry_after=1))
                transport.close()
            else:
                transport.abort()
            return
        if self.tls is None:
            self._serve(transport)
            return
        # Counted from now, handshake included; in ``connections`` so that a stop closes it too.
        self._raw = transport
        self.connections.add(self)
        self._start_tls(transport, self.tls)

    def _start_tls(self, raw: asyncio.Transport, context: ssl.SSLContext) -> None:
        """Put asyncio's TLS layer between ``raw`` and this protocol, now: it calls
        ``connection_made`` again with the secured transport once the handshake is done, and
        aborts the connection if that takes longer than the handshake timeout. Done here rather
        than with ``loop.start_tls`` from a task: until that task ran, the ClientHello could reach
        this protocol (uvloop starts reading after ``connection_made``, whatever it paused)."""
        handshake = self.loop.create_future()
        layer = sslproto.SSLProtocol(
            self.loop,
            self,
            context,
            handshake,
            server_side=True,
            ssl_handshake_timeout=self.limits.handshake_timeout_s,  # type: ignore[arg-type]  # seconds, any float
        )
        raw.set_protocol(layer)
        layer.connection_made(raw)
        handshake.add_done_callback(self._handshake_ended)

    def _handshake_ended(self, handshake: asyncio.Future[None]) -> None:
        if not handshake.cancelled():
            handshake.exception()  # timed out, refused, or the client left: nothing to log
        if not self._served:  # it failed (done, it would have called connection_made first)
            self._gone()

    def _serve(self, transport: asyncio.Transport) -> None:
        self._served = True
        super().connection_made(transport)
        self._read_peer(transport)  # over TLS the handshake is done: read once per connection
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._refusal: bytes | None = None
        if self._refusal_reason is not None:
            self.app = _over_capacity(self._refusal_reason)
        self._arm_header_timer()

    def _gone(self) -> None:
        """The connection ended before HTTP started on it."""
        self._raw = None
        self.connections.discard(self)
        self._release()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._served:  # lost before TLS was up, or refused unanswered: no HTTP on it
            self._gone()
            return
        self._release()
        self._disarm_header_timer()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        if self._raw is not None:  # still in its handshake
            self._raw.abort()
            return
        super().shutdown()

    def handle_websocket_upgrade(self) -> None:
        self._disarm_header_timer()
        if self._refusal_reason is not None:  # an upgrade goes to the app, not to ``self.app``: refused here
            message = f"Too many connections to this gateway: {self._refusal_reason}; retry shortly."
            self.transport.write(_answer(503, ErrorCode.UNAVAILABLE, message, retry_after=1))
            self.transport.close()
            return
        super().handle_websocket_upgrade()
        protocol = self.transport.get_protocol()
        if isinstance(protocol, _ConnectionState):
            protocol._take_over(self)

    # --- slow and large headers ---------------------------------------------------------

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.limits.header_timeout_s, self._headers_too_slow)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or (self.cycle is not None and not self.cycle.response_complete):
            return
        message = f"The request's headers did not arrive within {self.limits.header_timeout_s:g} s."
        self.transport.write(_answer(408, ErrorCode.REQUEST_TIMEOUT, message))
        self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        self._stamp(self.scope)

    def on_url(self, url: bytes) -> None:
        self._count_header_bytes(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_header_bytes(len(name) + len(value) + 4)
        super().on_header(name, value)

    def _count_header_bytes(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > self.limits.max_header_bytes:
            limit = self.limits.max_header_bytes
            message = f"The request line and headers are over the limit of {limit} bytes."
            self._refusal = _answer(431, ErrorCode.HEADERS_TOO_LARGE, message)
            raise _HeadersTooLarge

    def on_headers_complete(self) -> None:
        self._disarm_header_timer()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # The next request's headers are due, unless they came pipelined with this one.
        if not self.transport.is_closing() and not self.pipeline:
            self._arm_header_timer()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes that are not HTTP (or to headers past the limit), as JSON."""
        self.transport.write(self._refusal or _answer(400, ErrorCode.BAD_REQUEST, msg))
        self.transport.close()


class GatewayWebSocketProtocol(_ConnectionState, WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, on the connection ``GatewayProtocol`` accepted (its place
    among the connections, its client certificate in the scope), with two changes:

    - a handshake refused with a response (ASGI's denial response: the gateway's 403, 404 or 503
      with Confluent's body) counts as answered: uvicorn's own logs an error after each, as if
      the app had not answered, which a client could repeat at will;
    - the ``TEXT_PARTS`` extension: a ``websocket.send`` whose ``text_parts`` are byte strings
      that together are UTF-8 text goes out as one text frame written as it is. ASGI's ``text``
      would cost a stream's batch of megabytes a decode to ``str``, an encode back and three more
      copies in the WebSocket library, several times what the gateway spent rendering it.
    """

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._read_peer(transport)  # the upgrade's own: ``_take_over`` hands over the rest after

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        super().connection_lost(exc)

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)  # only an upgrade the library accepted has one
        if scope is not None:
            scope["extensions"][TEXT_PARTS] = {}
            self._stamp(scope)

    async def send(self, message: Any) -> None:
        parts = message.get("text_parts") if message["type"] == "websocket.send" else None
        if parts is not None:
            await self._send_text_parts(parts)
            return
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get("more_body", False):
            self.handshake_complete = True

    async def _send_text_parts(self, parts: Sequence[bytes]) -> None:
        await self.writable.wait()  # as uvicorn's send: flow control first
        if self.disconnected or self.close_sent or self.conn.state is not WebSocketState.OPEN:
            raise ClientDisconnected()  # what uvicorn's send raises then (the library's InvalidState)
        if not self.handshake_complete:
            raise RuntimeError("Expected ASGI message 'websocket.accept' before 'websocket.send'.")
        self.transport.writelines((text_frame_header(sum(len(part) for part in parts)), *parts))


def text_frame_header(length: int) -> bytes:
    """The header of a whole, unmasked text frame (a server's) of ``length`` bytes (RFC 6455 5.2)."""
    if length < 126:
        return bytes((0x81, length))
    if length < 1 << 16:
        return struct.pack("!BBH", 0x81, 126, length)
    return struct.pack("!BBQ", 0x81, 127, length)


def _over_capacity(reason: str) -> ASGIApp:
    """The app of a connection past MAX_CONNECTIONS or its address's share: each request on it is
    answered so, then it closes."""
    message = f"Too many connections to this gateway: {reason}; retry shortly."
    return error_response(503, ErrorCode.UNAVAILABLE, message, retry_after=1, headers={"Connection": "close"})


# What ``LastResort`` answers a request the app did not.
_STOPPING = error_response(
    503, ErrorCode.UNAVAILABLE, "The gateway is stopping; retry.", headers={"Connection": "close"}
)
_INTERNAL = error_response(500, ErrorCode.INTERNAL, "Internal server error.", headers={"Connection": "close"})


class LastResort:
    """Outside everything: whatever escapes the app never reaches uvicorn's plain-text 500.

    Starlette answers an unexpected exception (through the app's handler, in the Confluent
    shape) and then re-raises it for the server to log; that is logged already. A request
    task cancelled before it answered (the server stopping past its grace period) is answered
    503 here.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except asyncio.CancelledError:
            if not started:
                await _STOPPING(scope, receive, send)
        except Exception:
            if not started:  # the app's handler did not answer: something below it failed
                log.exception("unanswered error on %s %s", scope.get("method"), scope.get("path"))
                await _INTERNAL(scope, receive, send)
