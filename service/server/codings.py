"""``BodyCodings``: request bodies decoded by their ``Content-Encoding``, and the answers of record
reads encoded by the client's ``Accept-Encoding`` (``service.wire.codings``: gzip and zstd).

A request body coded gzip or zstd reaches the routes decoded, as if it had been sent plain:
every limit of a body (``max_request_bytes`` first) holds for its decoded bytes, the decoding
itself refuses (413) a body that decodes past ``max_request_bytes`` as soon as it does, and a
body that is not its coding is a 400; a coding the gateway does not decode is a 415 before any
route. The routes never see ``Content-Encoding`` nor the coded ``Content-Length``.

The answers of the routes that read records (``RECORD_READS``: long-polls, share-group polls,
stateless reads, and the SSE streams of the first) are encoded when the client accepts gzip or
zstd and the answer is at least ``min_bytes``: a whole answer at once, a streamed one (SSE) a
chunk at a time, each flushed, so an event reaches its reader when it is sent. They say
``Vary: Accept-Encoding`` whether encoded or not. Other answers are left as they are: they are
small, or (the console's files, the documents) not worth the CPU.
"""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.access import INSTANCE, SHARE
from service.api.replies import error_response
from service.errors import UnsupportedMediaType
from service.metrics import Metrics
from service.wire.codings import Coding, Decoder, Encoder, encode, negotiate, request_coding

__all__ = ["RECORD_READS", "BodyCodings"]

RECORD_READS: Final = frozenset(
    {
        ("GET", "/topics/{topic}/partitions/{partition}/records"),
        ("GET", f"{INSTANCE}/records"),
        ("GET", f"{SHARE}/{{instance}}/records"),
        ("POST", f"{SHARE}/{{instance}}/records"),
    }
)
_DROPPED: Final = (b"content-encoding", b"content-length")


class BodyCodings:
    """See the module docstring. ``limit``: the most bytes a request body may decode to;
    ``compress``: whether record reads' answers are encoded at all; ``metrics`` count the bodies
    of each coding and their bytes, coded and plain."""

    def __init__(self, app: ASGIApp, *, limit: int, compress: bool, min_bytes: int, metrics: Metrics) -> None:
        self.app = app
        self.limit = limit
        self.compress = compress
        self.min_bytes = min_bytes
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        coded: bytes | None = None
        accepted: bytes | None = None
        for name, value in scope["headers"]:
            if name == b"content-encoding":
                coded = value if coded is None else coded + b"," + value
            elif name == b"accept-encoding":
                accepted = value if accepted is None else accepted + b"," + value
        if coded is not None:
            try:
                coding = request_coding(coded.decode("latin-1"))
            except UnsupportedMediaType as exc:
                await error_response(exc.http_status, exc.error_code, exc.message)(scope, receive, send)
                return
            if coding is not None:
                headers = [(n, v) for n, v in scope["headers"] if n not in _DROPPED]
                scope = {**scope, "headers": headers}
                self.metrics.coded_bodies.labels("request", coding).inc()
                receive = _decoding(receive, Decoder(coding, self.limit), self.metrics)
        if self.compress:
            answer = negotiate(accepted.decode("latin-1")) if accepted is not None else None
            send = _Answer(scope, send, answer, self.min_bytes, self.metrics).send
        await self.app(scope, receive, send)


def _decoding(receive: Receive, decoder: Decoder, metrics: Metrics) -> Receive:
    coded = metrics.coded_bytes.labels("request", decoder.coding, "coded")
    plain = metrics.coded_bytes.labels("request", decoder.coding, "plain")

    async def decoded() -> Message:
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return message  # the client went
            more = bool(message.get("more_body", False))
            chunk = message.get("body", b"")
            coded.inc(len(chunk))
            body = decoder.feed(chunk)
            plain.inc(len(body))
            if not more:
                decoder.end()
            if body or not more:
                return {"type": "http.request", "body": body, "more_body": more}

    return decoded


class _Answer:
    """One answer on its way out: encoded (``coding``) if its route reads records and it is big
    enough, else sent as it is."""

    def __init__(
        self, scope: Scope, send: Send, coding: Coding | None, min_bytes: int, metrics: Metrics
    ) -> None:
        self._scope = scope
        self._send = send
        self._coding = coding
        self._min = min_bytes
        self._metrics = metrics
        self._start: Message | None = None  # held until the first body chunk says how to send it
        self._encoder: Encoder | None = None
        self._passing = False

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            if self._reads_records():
                self._start = message
                return
            self._passing = True
        elif kind == "http.response.body" and not self._passing:
            await self._body(message)
            return
        await self._send(message)

    def _reads_records(self) -> bool:
        route = self._scope.get("route")
        return (self._scope["method"], getattr(route, "path", None)) in RECORD_READS

    async def _body(self, message: Message) -> None:
        body: bytes = message.get("body", b"")
        more = bool(message.get("more_body", False))
        if self._start is not None:  # the first chunk
            start, self._start = self._start, None
            headers = [(n, v) for n, v in start["headers"] if n != b"vary"]
            headers.append((b"vary", b"Accept-Encoding"))
            coding = self._coding
            already = any(n == b"content-encoding" for n, _ in headers)
            if coding is None or already or (not more and len(body) < self._min):
                self._passing = True
                await self._send({**start, "headers": headers})
                await self._send(message)
                return
            headers = [(n, v) for n, v in headers if n != b"content-length"]
            headers.append((b"content-encoding", coding.encode()))
            self._metrics.coded_bodies.labels("answer", coding).inc()
            if not more:
                encoded = encode(coding, body)
                self._count(coding, len(body), len(encoded))
                headers.append((b"content-length", str(len(encoded)).encode()))
                await self._send({**start, "headers": headers})
                await self._send({"type": "http.response.body", "body": encoded})
                return
            self._encoder = Encoder(coding)
            await self._send({**start, "headers": headers})
        assert self._encoder is not None
        out = self._encoder.chunk(body, flush=True) if more else self._encoder.finish(body)
        self._count(self._encoder.coding, len(body), len(out))
        await self._send({"type": "http.response.body", "body": out, "more_body": more})

    def _count(self, coding: Coding, plain: int, coded: int) -> None:
        self._metrics.coded_bytes.labels("answer", coding, "plain").inc(plain)
        self._metrics.coded_bytes.labels("answer", coding, "coded").inc(coded)
