"""The WebSocket stream of a consumer instance: push, acknowledgement and produce on one connection.

``ws(s)://…/consumers/{group}/instances/{instance}/records`` speaks the protocol of
``api_schemas.streams`` (version 1, JSON text messages). A connection is a ``Session`` of three
tasks:

- **delivery** owns the instance: it runs the stream's polls as far as the client's ``Credit``
  allows (``service.core.credit``: never more records nor bytes than granted), and between two
  polls the client's commits and seeks, so that their answers and the records arrive in the
  order they happened. With no credit left it polls nothing, yet keeps the instance alive and
  reports a rebalance (``InstanceStream.pause``);
- **reception** reads the client's messages: credit is counted at once and wakes delivery;
  commits and seeks are queued for delivery (and wake it); produces are queued for
- **production**, which stores them one at a time, in the order sent, through the REST
  produce's own machinery (``topics.records_of``, ``topics.store_records``): the same record
  limits, produce quotas and topic auto-creation rules.

Whatever a message asks, it is answered (a failure the REST route would answer with a 500 is an
``error`` 50001, and the stream goes on) or, once the stream ends, not acted on: before ``end``
reception stops and the produce being stored is finished and answered (``Session._settle``); a
command or produce still queued is dropped unanswered.

Each ACL decision is made when a message is acted on, with the bindings of that moment, as the
REST route doing the same would make it: READ on the group and on the instance's topics for
every poll (``InstanceStream.step``), READ on the group for a commit or a seek, and READ on the
topics a commit names, DESCRIBE on those a seek names, WRITE on a produce's topic (CREATE if it
would create it). The handshake was decided as the poll's route is (``access.Authorize``: GROUP
READ), which also refuses an unauthenticated handshake (``auth``).

What a careless or hostile client gets:

- a handshake past ``max_open_streams``: 503 with Retry-After, the Confluent body;
- a message that is not JSON, not a known message or not valid: an ``error`` (42206) with the
  message's ``id`` when it has one, and the connection goes on;
- a message over ``stream_max_message_bytes``: closed with 1009 (uvicorn's frame limit, set to
  the same by ``server.app.server_config``, refuses it before it is buffered whole);
- credit past the server's maxima: an ``error`` (42206) naming them, the grant ignored;
- messages sent faster than they are answered (produces being stored, say): each holds its raw
  bytes from before it is parsed until it is answered, at most ``stream_max_held_bytes`` for the
  socket and ``stream_max_held_bytes_per_principal`` for all its principal's sockets
  (``StreamService.budget``); past either nothing more is read from the socket, so what the
  client keeps sending waits in its own TCP connection, never in the gateway's memory;
- a client that stops reading: every send waits for its connection to drain (uvicorn's flow
  control), so the gateway holds one message for it, and after ``stream_send_timeout_ms``
  without progress the connection is dropped; commands and produces it keeps sending wait in
  queues of ``_QUEUED`` within the byte budget above, then in its own TCP connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Coroutine
from contextlib import ExitStack
from typing import Any, Final

import orjson
from fastapi import APIRouter, WebSocket
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect

from api_schemas import streams as wire
from service.api.gateway import Gateway, gateway_of
from service.core.acl import Operation, ResourceType
from service.core.consumers import Blocked
from service.core.credit import ByteBudget, Credit, Reserved
from service.core.cursors import parse_positions, render_positions
from service.core.json_depth import check_depth
from service.core.models import TopicPartition
from service.core.rules import check_topic
from service.core.streams import End, Event, Opened, Rebalance, Records
from service.errors import GatewayError, InvalidPayload, PayloadTooLarge
from service.wire.timestamps import epoch_millis

from .. import topics
from ..access import caller_of, refuse_handshake
from ..auth import credential_of
from ..bodies import describe_validation
from ..quotas import client_of
from .sse import end_body, render_array

log = logging.getLogger(__name__)

router = APIRouter(prefix="/consumers/{group}", tags=["consumers"])

# An ASGI extension the gateway's server offers (``service.server.protocol.GatewayWebSocketProtocol``): a
# ``websocket.send`` may carry ``text_parts``, byte strings that together are the UTF-8 text of
# one message, sent as they are. Under another server messages go as ASGI's ``text``.
TEXT_PARTS: Final = "brokergate.websocket.text_parts"
_QUEUED: Final = 16  # commands, and produces, a client may have waiting
_PARSE_OFF_LOOP: Final = 256 * 1024  # a message this big or bigger is parsed in a worker thread
_PAUSE_S: Final = 60.0  # how long delivery waits for credit before it looks again (woken earlier)
# Close codes (RFC 6455): the end message says why; these say it to the WebSocket layer.
_NORMAL, _GOING_AWAY, _POLICY, _TOO_BIG, _SERVER_ERROR = 1000, 1001, 1008, 1009, 1011


@router.websocket("/instances/{instance}/records")
async def instance_socket(websocket: WebSocket, group: str, instance: str) -> None:
    """The instance's records pushed as credit allows, with commit, seek and produce (not in the
    OpenAPI document, which cannot describe a WebSocket: see the README's Streaming section)."""
    await Session(websocket, gateway_of(websocket.scope), group, instance).run()


class _Gone(Exception):
    """The client is gone, or took nothing for the send timeout."""


class Session:
    """One WebSocket connection to a consumer instance's stream (see the module docstring).

    Collaborators: the ``InstanceStream`` (polls, pauses, the cursor), ``ConsumerService`` for
    commits and seeks, the REST produce's machinery, the client's ``Credit``.
    """

    def __init__(self, websocket: WebSocket, gw: Gateway, group: str, instance: str) -> None:
        self.ws = websocket
        self.gw = gw
        self.group = group
        self.instance = instance
        self.limits = gw.streams.limits
        self.credit = Credit(self.limits.credit)
        # each with what it holds of the socket's budget (``run``), given back once it is answered
        self.commands: asyncio.Queue[tuple[wire.Commit | wire.Seek, Reserved]] = asyncio.Queue(_QUEUED)
        self.produces: asyncio.Queue[tuple[wire.Produce, bytes, object, Reserved]] = asyncio.Queue(_QUEUED)
        self.budget: ByteBudget  # of the messages read and not yet answered: while ``run`` runs
        quotas = gw.quotas
        self.produce_client = client_of(websocket, quotas) if quotas.produce else ""
        consume_client = client_of(websocket, quotas) if quotas.consume else ""
        self.stream = gw.streams.instance(
            group,
            instance,
            decide=functools.partial(gw.access.decision, caller_of(websocket.scope)),
            client=consume_client,
            credential=credential_of(websocket.scope),
        )
        self.decide = self.stream.decide  # for commits, seeks and produces too: while the credential holds
        self._sending = asyncio.Lock()
        self._closed = False
        self._needs = 0  # credit bytes the next record needs: alone it weighs more than is left
        self._told: dict[TopicPartition, int] = {}  # the cursor the client was last sent
        self._starved = False  # delivery waits for credit
        self._storing = False  # production stores a produce
        self._tasks: tuple[asyncio.Future[None], ...] = ()  # reception and production

    async def run(self) -> None:
        with ExitStack() as slot:
            try:
                cursor = parse_positions(self.ws.query_params.get("cursor", ""), what="cursor")
                slot.enter_context(self.gw.streams.slot(caller_of(self.ws.scope)))
                self.budget = slot.enter_context(self.gw.streams.budget(caller_of(self.ws.scope)))
                opening = await self.stream.open(cursor)
                slot.enter_context(self.gw.streams.watching(self.stream))
            except GatewayError as exc:  # refused as the poll would be: before the handshake
                await refuse_handshake(self.ws.scope, self.ws.send, exc)
                return
            offered = self.ws.scope.get("subprotocols") or ()
            await self.ws.accept(subprotocol=wire.SUBPROTOCOL if wire.SUBPROTOCOL in offered else None)
            await self._serve(opening)

    async def _serve(self, opening: list[Event]) -> None:
        limits = self.limits
        caps = {
            "credit_records": limits.credit.records,
            "credit_bytes": limits.credit.bytes,
            "message_bytes": limits.message_bytes,
            "batch_bytes": limits.batch_bytes,
        }
        self._tasks = (
            asyncio.ensure_future(self._guarded(self._receive())),
            asyncio.ensure_future(self._guarded(self._produce())),
        )
        try:
            await self._send(wire.hello(self.group, self.instance, self.stream.format, caps))
            await self._deliver(opening)
        except _Gone:
            log.info("stream of %r/%s: the client is gone or took nothing", self.group, self.instance)
        except Exception:
            log.exception("stream of %r/%s failed", self.group, self.instance)
            with contextlib.suppress(_Gone):
                await self._end(End("error", GatewayError()))
        finally:
            await self._settle()

    async def _settle(self) -> None:
        """Stop the session's tasks: reception at once, production once the produce it stores is
        stored and answered (a produce is never cut in two; none queued is started). So a
        produce the client had no answer to before the ``end`` was not stored."""
        self.stream.close()  # production starts no other produce
        receiving, producing = self._tasks
        receiving.cancel()
        if not self._storing:
            producing.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _guarded(self, task: Coroutine[Any, Any, None]) -> None:
        """Run a task of the session; whatever ends it ends the stream too."""
        try:
            await task
        except _Gone:
            pass
        except Exception:
            log.exception("stream of %r/%s: a task failed", self.group, self.instance)
        finally:
            self.stream.close()

    # --- delivery ----------------------------------------------------------------------

    async def _deliver(self, opening: list[Event]) -> None:
        stream, credit, limits = self.stream, self.credit, self.limits
        if not await self._tell(opening):  # the partitions, and where each starts
            return
        while not stream.closed:
            stream.wake.clear()
            while not self.commands.empty():
                command, held = self.commands.get_nowait()
                try:
                    await self._command(command)
                finally:
                    held.release()
            end = stream.ended()
            if end is not None:
                await self._end(end)
                return
            if credit.open and credit.bytes >= self._needs:
                events = await stream.step(
                    max_bytes=min(limits.batch_bytes, credit.bytes),
                    max_records=credit.records,
                    byte_limit=credit.bytes,
                )
            else:
                self._starved = True  # a grant wakes it now (not before: it would cut a poll short)
                try:
                    events = await stream.pause(_PAUSE_S)
                finally:
                    self._starved = False
            if not await self._tell(events):
                return

    async def _tell(self, events: list[Event]) -> bool:
        """Send the client what ``events`` say; False once one ended the stream."""
        for event in events:
            if isinstance(event, Records):
                count, size = event.count, event.weight()
                self.credit.spend(count, size)
                self._needs = 0
                try:
                    array = render_array(event)
                except GatewayError as exc:  # a record the format cannot show: the client must seek past it
                    await self._end(End("error", exc))
                    return False
                self.gw.metrics.count_consumed(event.polled)
                self._told = event.positions
                cursor = render_positions(event.positions)
                await self._send(wire.records(cursor, event.positions, size, array))
            elif isinstance(event, (Opened, Rebalance)):
                self._needs = 0
                partitions = tuple(sorted(event.positions)) if isinstance(event, Opened) else event.partitions
                self._told = event.positions
                cursor = render_positions(event.positions)
                await self._send(wire.rebalance(partitions, event.positions, cursor))
            elif isinstance(event, Blocked):
                await self._blocked(event)
            elif isinstance(event, End):
                await self._end(event)
                return False
        return True

    async def _blocked(self, event: Blocked) -> None:
        """The next record weighs more than the byte credit left: say so, and wait for more."""
        self._needs = event.size
        most = self.limits.credit.bytes
        remedy = (
            "grant more bytes"
            if event.size <= most
            else f"that is over the most credit allowed ({most} bytes): seek past it, or poll for it"
        )
        message = (
            f"The next record of {event.tp} (offset {event.offset}) holds {event.size} bytes, more than "
            f"the {self.credit.bytes} bytes of credit left; {remedy}."
        )
        await self._refuse(None, PayloadTooLarge(message))

    async def _end(self, end: End) -> None:
        """The last message, then the close: once the session's tasks are stopped (``_settle``)."""
        await self._settle()
        told = self._told  # where the client stood: the cursor to resume from
        await self._send(wire.end(end.reason, render_positions(told), told, end_body(end)))
        if end.reason == "shutdown":
            code = _GOING_AWAY
        elif end.reason == "deleted":
            code = _NORMAL
        else:
            code = _SERVER_ERROR if end.error is None or end.error.http_status >= 500 else _POLICY
        await self._close(code, end.reason)

    async def _command(self, command: wire.Commit | wire.Seek) -> None:
        """A commit or a seek, as its REST route does it (READ on the group first, as the route
        asks of every request); answered, or an ``error`` with its id."""
        consumers = self.gw.consumers
        try:
            who = await self.decide()
            who.check(ResourceType.GROUP, (self.group,), Operation.READ)
            if isinstance(command, wire.Commit):
                offsets = None
                if command.offsets is not None:
                    offsets = {TopicPartition(o.topic, o.partition): o.offset for o in command.offsets}
                    who.check(ResourceType.TOPIC, {tp.topic for tp in offsets}, Operation.READ)
                done = await consumers.commit(self.group, self.instance, offsets, who=who)
                await self._send(wire.committed(command.id, done))
                return
            named = [
                *(o.topic for o in command.offsets or ()),
                *(t.topic for t in command.timestamps or ()),
                *(p.topic for p in command.beginning or ()),
                *(p.topic for p in command.end or ()),
            ]
            if not named:
                raise InvalidPayload("Give 'offsets', 'timestamps', 'beginning' or 'end'.")
            who.check(ResourceType.TOPIC, named, Operation.DESCRIBE)
            group, name = self.group, self.instance
            if command.offsets:
                targets = {TopicPartition(o.topic, o.partition): o.offset for o in command.offsets}
                await consumers.seek(group, name, targets, who=who)
            if command.timestamps:
                times = {
                    TopicPartition(t.topic, t.partition): epoch_millis(t.timestamp, f"timestamps[{i}]")
                    for i, t in enumerate(command.timestamps)
                }
                await consumers.seek_to_timestamps(group, name, times, who=who)
            for edge, end in ((command.beginning, False), (command.end, True)):
                if edge:
                    tps = [TopicPartition(p.topic, p.partition) for p in edge]
                    await consumers.seek_to(group, name, tps, end=end, who=who)
            self._needs = 0
            stream = self.stream
            events = await stream.peek()  # where it stands now: the cursor a reconnect takes
            self._told = stream.positions
            await self._send(wire.seeked(command.id, render_positions(stream.positions), stream.positions))
            await self._tell([e for e in events if not isinstance(e, End)])
        except _Gone:
            raise
        except GatewayError as exc:
            await self._refuse(command.id, exc)
        except Exception:  # a bug: answered as its REST route would answer it (500), the stream goes on
            log.exception("stream of %r/%s: a %s failed", self.group, self.instance, command.type)
            await self._refuse(command.id, GatewayError())

    # --- reception ---------------------------------------------------------------------

    async def _receive(self) -> None:
        limit = self.limits.message_bytes
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                raise _Gone
            raw = message.get("bytes")
            if raw is None:
                raw = (message.get("text") or "").encode("utf-8", "surrogatepass")
            if len(raw) > limit:
                too_big = PayloadTooLarge(f"A message is at most {limit} bytes; this one is {len(raw)}.")
                await self._refuse(None, too_big)
                await self._close(_TOO_BIG, "message too big")
                raise _Gone
            # Its bytes are held before it is parsed, until it is answered; while the budget is
            # spent nothing more is read: the client's messages wait in its TCP connection.
            held = await self.budget.reserve(len(raw))
            await self._take(raw, held)

    async def _take(self, raw: bytes, held: Reserved) -> None:
        """Act on one message of the client, or answer why it cannot be; ``held`` is given back
        once it is answered (by the task it is queued for, if it is)."""
        data: object = None
        queued = False
        try:
            depth = self.gw.settings.max_json_depth
            if len(raw) < _PARSE_OFF_LOOP:
                check_depth(raw, depth, "A message")
            else:  # as long as parsing, at worst: off the loop too
                await asyncio.to_thread(check_depth, raw, depth, "A message")
            try:
                data = (
                    orjson.loads(raw)
                    if len(raw) < _PARSE_OFF_LOOP
                    else await asyncio.to_thread(orjson.loads, raw)
                )
            except orjson.JSONDecodeError as exc:
                raise InvalidPayload(f"A message must be a JSON object: {exc}") from None
            try:
                message = wire.CLIENT_MESSAGE.validate_python(data)
            except ValidationError as exc:
                raise InvalidPayload(describe_validation(exc)) from None
            if isinstance(message, wire.Credit):
                self.credit.grant(message.records, message.bytes)
                if self._starved:
                    self.stream.wake.set()
            elif isinstance(message, wire.Produce):
                await self.produces.put((message, raw, data, held))
                queued = True
            else:
                await self.commands.put((message, held))
                queued = True
                self.stream.wake.set()
        except _Gone:
            raise
        except GatewayError as exc:
            await self._refuse(wire.request_id(data), exc)
        except Exception:  # a bug: answered as a REST request would be (500), the stream goes on
            log.exception("stream of %r/%s: a message failed", self.group, self.instance)
            await self._refuse(wire.request_id(data), GatewayError())
        finally:
            if not queued:
                held.release()

    # --- production --------------------------------------------------------------------

    async def _produce(self) -> None:
        gw = self.gw
        while not self.stream.closed:
            self._storing = False
            message, raw, data, held = await self.produces.get()
            self._storing = True  # from here on the produce is finished, whatever else ends
            try:
                topic = check_topic(message.topic)
                who = await self.decide()
                who.check(ResourceType.TOPIC, (topic,), Operation.WRITE)
                fmt = message.format or self.stream.format
                parsed, schema_ids = await topics.records_of(raw, fmt, topic, gw, who, data)
                del raw, data
                body = await topics.store_records(
                    gw, topic, message.partition, parsed, schema_ids, client=self.produce_client, who=who
                )
                await self._send(wire.produced(message.id, body))
            except _Gone:
                raise
            except GatewayError as exc:
                await self._refuse(message.id, exc)
            except Exception:  # a bug: answered as the REST produce would be (500), the stream goes on
                log.exception("stream of %r/%s: a produce failed", self.group, self.instance)
                await self._refuse(message.id, GatewayError())
            finally:
                held.release()

    # --- the connection ----------------------------------------------------------------

    async def _refuse(self, request: Any, exc: GatewayError) -> None:
        """An ``error`` answering the client's message ``request`` (its id; None: about the stream)."""
        await self._send(wire.error(request, int(exc.error_code), exc.message))

    async def _send(self, data: bytes | tuple[bytes, ...]) -> None:
        """Send one message (its bytes, or its parts in order) once the client took enough of the
        last: ``_Gone`` if it is gone, or took nothing for the send timeout."""
        if TEXT_PARTS in self.ws.scope.get("extensions", {}):
            message = {"type": "websocket.send", "text_parts": (data,) if isinstance(data, bytes) else data}
        else:
            message = {
                "type": "websocket.send",
                "text": (data if isinstance(data, bytes) else b"".join(data)).decode(),
            }
        async with self._sending:
            if self._closed:
                raise _Gone
            try:
                async with asyncio.timeout(self.limits.send_timeout_ms / 1000):
                    await self.ws.send(message)
            except (TimeoutError, OSError, RuntimeError, WebSocketDisconnect) as exc:
                self._closed = True  # gone, stalled, or closed already (starlette's RuntimeError)
                raise _Gone from exc

    async def _close(self, code: int, reason: str) -> None:
        async with self._sending:
            if self._closed:
                return
            self._closed = True
            try:
                async with asyncio.timeout(self.limits.send_timeout_ms / 1000):
                    await self.ws.close(code, reason)
            except (TimeoutError, OSError, RuntimeError, WebSocketDisconnect):
                pass
