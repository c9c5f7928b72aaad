"""Server-Sent Events: a consumer instance's records, or a partition's, pushed as they arrive.

``GET /consumers/{group}/instances/{instance}/records`` and ``GET /topics/{topic}/partitions/
{partition}/records`` answer ``text/event-stream`` when ``Accept`` asks for it (a browser's
``EventSource`` does) instead of one JSON body. The stream renders ``service.core.streams``'
events::

    event: records                  a batch: data is the JSON array a poll returns, in the
    id: orders:0:42,orders:1:7      instance's format (a partition's: the stateless read's
    data: [{"topic":"orders",…},…]  "records", in ?format=); id is the cursor after it

    event: rebalance                the instance's partitions changed; id: where each starts
    id: orders:0:42
    data: {"partitions":[{"topic":"orders","partition":0}]}

    id: orders:0:40,orders:1:7      alone: where the stream starts (EventSource keeps it as
                                    the last event id and dispatches nothing)
    : keep-alive                    after ``stream_heartbeat_ms`` without an event

    event: end                      the last one, then the response ends: "shutdown" (the
    data: {"reason":"shutdown"}     gateway drains: reconnect, through any replica), "deleted"
                                    (the instance is gone), "error" with Confluent's error body

The cursor is ``service.core.cursors``': every owned partition's next offset (a partition
stream's is its next offset). A reconnect with ``Last-Event-ID``, which ``EventSource`` sends by
itself, resumes there: the instance's owned partitions among them are sought to it first. So
a batch lost in flight is sent again and none is sent twice, through any replica when the
sessions are in Redis.

``EventStream`` is the response, in plain ASGI: every write waits until the client took enough
of the one before (uvicorn's flow control), so a client that stops reading holds one batch of
the gateway's memory, never more, and after ``stream_send_timeout_ms`` without progress its
connection is closed. A client that goes away ends its stream at once: the wait is cut short and
nothing more is polled for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import ExitStack, aclosing
from typing import Annotated, Any, Final, Protocol

import orjson
from fastapi import Header, Request
from fastapi.responses import Response
from starlette.types import Receive, Scope, Send

from service.api.gateway import Gateway
from service.core.cursors import parse_offset, parse_positions, render_positions
from service.core.models import EmbeddedFormat, TopicPartition
from service.core.streams import STEP_WAIT_MS, End, Event, Opened, Rebalance, Records
from service.errors import GatewayError
from service.wire.records import records_array

from ..accept import MalformedAccept, media_ranges
from ..access import caller_of
from ..auth import credential_of
from ..quotas import client_of

log = logging.getLogger(__name__)

EVENT_STREAM: Final = "text/event-stream"
# The 200 response's content under ``text/event-stream``, for the routes' OpenAPI declarations.
EVENT_STREAM_DOC: Final[dict[str, Any]] = {
    EVENT_STREAM: {
        "schema": {
            "type": "string",
            "description": "With `Accept: text/event-stream`: Server-Sent Events, `event: records` "
            "(data: the records array, id: the cursor after it), `event: rebalance`, `event: end` "
            "(data: {reason: shutdown|deleted|error, …}) and `: keep-alive` comments; `Last-Event-ID` "
            "resumes at a cursor. See the README's Streaming section.",
        }
    }
}
LastEventId = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        description="With Accept: text/event-stream, the id of the last event received (EventSource "
        "sends it when it reconnects): the stream resumes there.",
    ),
]
KEEP_ALIVE: Final = b": keep-alive\n\n"
_HEADERS: Final = [
    (b"content-type", EVENT_STREAM.encode()),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx, the deployments' balancer, must not hold events back
]


def wants_events(request: Request) -> bool:
    """Whether ``Accept`` asks for Server-Sent Events: an item naming ``text/event-stream`` with a
    ``q`` above 0, read by the gateway's one Accept parser (one it cannot read does not)."""
    try:
        ranges = media_ranges(request.headers.get("accept"))
    except MalformedAccept:
        return False
    return any((r.type, r.subtype) == ("text", "event-stream") and r.q > 0 for r in ranges)


class _Streaming(Protocol):
    """What the response needs of a stream: to end it when the client goes."""

    closed: bool

    def close(self) -> None: ...

    def ended(self) -> End | None: ...


async def instance_events(
    request: Request,
    gw: Gateway,
    group: str,
    instance: str,
    *,
    max_bytes: int | None,
    last_event_id: str | None,
) -> Response:
    """The consumer instance's records as Server-Sent Events, from ``Last-Event-ID`` when given.

    What can be refused is refused before the stream starts, as the poll would refuse it (an
    instance that is not there or not the caller's, a malformed cursor, too many streams open);
    what happens later ends the stream with an ``end`` event.
    """
    cursor = parse_positions(last_event_id, what="Last-Event-ID") if last_event_id else {}
    decide = functools.partial(gw.access.decision, caller_of(request.scope))
    client = client_of(request, gw.quotas) if gw.quotas.consume else ""
    credential = credential_of(request.scope)
    stream = gw.streams.instance(group, instance, decide=decide, client=client, credential=credential)
    with ExitStack() as slot:
        slot.enter_context(gw.streams.slot(caller_of(request.scope)))
        opening = await stream.open(cursor)
        slot.enter_context(gw.streams.watching(stream))
        budget = _budget(gw, max_bytes)

        def step(wait_ms: int) -> Awaitable[list[Event]]:
            return stream.step(max_bytes=budget, wait_ms=wait_ms)

        chunks = _chunks(gw, stream, step, instance_cursor, opening)
        send_timeout_s = gw.settings.stream_send_timeout_ms / 1000
        return EventStream(chunks, stream, slot.pop_all(), send_timeout_s=send_timeout_s)


async def partition_events(
    request: Request,
    gw: Gateway,
    tp: TopicPartition,
    fmt: EmbeddedFormat,
    *,
    offset: int,
    max_bytes: int | None,
    last_event_id: str | None,
) -> Response:
    """One partition's records from ``offset`` (or ``Last-Event-ID``, the next offset) on, as
    Server-Sent Events in ``fmt``: the stateless read, pushed."""
    start = parse_offset(last_event_id, what="Last-Event-ID") if last_event_id else offset
    await gw.topics.check_partition(tp)  # a partition that is not there is a 404, not a stream
    decide = functools.partial(gw.access.decision, caller_of(request.scope))
    client = client_of(request, gw.quotas) if gw.quotas.consume else ""
    credential = credential_of(request.scope)
    stream = gw.streams.partition(tp, start, fmt, decide=decide, client=client, credential=credential)
    with ExitStack() as slot:
        slot.enter_context(gw.streams.slot(caller_of(request.scope)))
        slot.enter_context(gw.streams.watching(stream))
        budget = _budget(gw, max_bytes)

        def step(wait_ms: int) -> Awaitable[list[Event]]:
            return stream.step(max_bytes=budget, wait_ms=wait_ms)

        chunks = _chunks(gw, stream, step, partition_cursor)
        send_timeout_s = gw.settings.stream_send_timeout_ms / 1000
        return EventStream(chunks, stream, slot.pop_all(), send_timeout_s=send_timeout_s)


def _budget(gw: Gateway, max_bytes: int | None) -> int:
    most = gw.settings.stream_max_batch_bytes
    return most if max_bytes is None or max_bytes <= 0 else min(max_bytes, most)


Cursor = Callable[[dict[TopicPartition, int]], bytes]


def instance_cursor(positions: dict[TopicPartition, int]) -> bytes:
    """An instance stream's cursor: every partition's next offset (``cursors.render_positions``)."""
    return render_positions(positions).encode()


def partition_cursor(positions: dict[TopicPartition, int]) -> bytes:
    """A partition stream's cursor: its next offset."""
    [offset] = positions.values()
    return str(offset).encode()


async def _chunks(
    gw: Gateway,
    stream: _Streaming,
    step: Callable[[int], Awaitable[list[Event]]],
    cursor: Cursor,
    opening: list[Event] | None = None,
) -> AsyncGenerator[bytes, None]:
    """The stream's bytes: ``opening`` and its events rendered, heartbeats when idle, ``end`` last;
    nothing more once the stream is closed (its client went away)."""
    heartbeat = gw.settings.stream_heartbeat_ms / 1000
    quiet_since = time.monotonic()
    events: list[Event] = opening or []
    stepping: asyncio.Future[list[Event]] | None = None
    try:
        while not stream.closed:
            for event in events:
                if isinstance(event, Records):
                    try:
                        rendered = records_event(event, cursor(event.positions))
                    except (
                        GatewayError
                    ) as exc:  # a record its format cannot show: the client must seek past it
                        yield end_event(End("error", exc))
                        return
                    gw.metrics.count_consumed(event.polled)
                    yield rendered
                elif isinstance(event, (Opened, Rebalance)):
                    yield cursor_event(event)
                elif isinstance(event, End):
                    yield end_event(event)
                    return
            if events:
                quiet_since = time.monotonic()
            end = stream.ended()
            if end is not None:
                yield end_event(end)
                return
            # One poll for as long as it waits (records, a rebalance, a wake or the drain end it):
            # the keep-alives go out meanwhile, so an idle stream costs a timer per heartbeat.
            stepping = asyncio.ensure_future(step(STEP_WAIT_MS))
            while True:
                due = quiet_since + heartbeat - time.monotonic()
                done, _ = await asyncio.wait((stepping,), timeout=max(0.0, due))
                if done:
                    break
                yield KEEP_ALIVE
                quiet_since = time.monotonic()
            events, stepping = stepping.result(), None
    finally:
        if stepping is not None and not stepping.done():
            stepping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stepping


def records_event(event: Records, cursor: bytes) -> bytes:
    """``event: records`` with its cursor and the records' JSON array. Rendered whole (a batch is
    bounded by ``stream_max_batch_bytes``) before any of it is sent, so that a record its format
    cannot show (``ConversionError``) never leaves half an event behind."""
    return b"".join((b"event: records\nid: ", cursor, b"\ndata: ", render_array(event), b"\n\n"))


def render_array(event: Records) -> bytes:
    """The records' JSON array, as a poll in their format renders it."""
    return records_array(event.format, event.polled)


def cursor_event(event: Opened | Rebalance) -> bytes:
    """Where the stream starts (``id:`` alone), or ``event: rebalance`` with where each partition starts."""
    cursor = render_positions(event.positions).encode()
    if isinstance(event, Opened):
        return b"id: " + cursor + b"\n\n" if cursor else b""
    partitions = [{"topic": tp.topic, "partition": tp.partition} for tp in event.partitions]
    data = orjson.dumps({"partitions": partitions})
    return b"event: rebalance\nid: " + cursor + b"\ndata: " + data + b"\n\n"


def end_event(end: End) -> bytes:
    """``event: end`` saying why: ``{"reason": …}``, with Confluent's error body for an error."""
    return b"event: end\ndata: " + orjson.dumps(end_body(end)) + b"\n\n"


def end_body(end: End) -> dict[str, Any]:
    body: dict[str, Any] = {"reason": end.reason}
    if end.error is not None:
        body["error_code"] = int(end.error.error_code)
        body["message"] = end.error.message
    elif end.reason == "deleted":
        body["message"] = "The consumer instance was deleted (or expired)."
    else:
        body["message"] = "The gateway is shutting down; reconnect to resume where this ended."
    return body


class _Stalled(Exception):
    """The client took nothing for the send timeout."""


class EventStream(Response):
    """The ASGI response of a stream: ``text/event-stream`` made of ``chunks``.

    Holds the stream's ``slot`` (its place among the open streams) until it ends. Every chunk is
    sent as the client takes it: uvicorn's ``send`` waits while the connection's write buffer is
    full, so nothing piles up in the gateway. A chunk the client does not take within
    ``send_timeout_s`` ends the response unfinished, which closes the connection. A disconnect
    (``http.disconnect``) closes the stream, which cuts its wait short.
    """

    media_type = EVENT_STREAM

    def __init__(
        self,
        chunks: AsyncGenerator[bytes, None],
        stream: _Streaming,
        slot: ExitStack,
        *,
        send_timeout_s: float,
    ) -> None:
        super().__init__(status_code=200, media_type=EVENT_STREAM)
        self._chunks = chunks
        self._stream = stream
        self._slot = slot
        self._send_timeout_s = send_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.ensure_future(self._watch(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
            async with aclosing(self._chunks) as chunks:
                async for chunk in chunks:
                    if self._stream.closed:
                        return
                    if chunk:
                        await self._send(send, chunk)
            await self._send(send, b"", more=False)
        except _Stalled:
            log.info("%s: the client took nothing for %g s; closing it", scope["path"], self._send_timeout_s)
        finally:
            self._stream.close()
            watcher.cancel()
            self._slot.close()

    async def _send(self, send: Send, body: bytes, *, more: bool = True) -> None:
        try:
            async with asyncio.timeout(self._send_timeout_s):
                await send({"type": "http.response.body", "body": body, "more_body": more})
        except TimeoutError:
            raise _Stalled from None

    async def _watch(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self._stream.close()
