"""Push streams: a consumer instance's records, or one partition's, sent as they arrive.

A stream is a loop of the reads the pull API already has — ``ConsumerService.take`` (a poll of
the instance) and ``TopicService.read`` (the stateless read) — so whatever a poll does holds for
every batch a stream sends: the ACL checks of the poll's route and of the core (READ on the
group and on its topics), with the bindings of now rather than of the stream's start; the
consume quotas; rebalance generations; the instance's lease; auto-commit; decoding the schema
formats. What a stream adds:

- **Events beyond records**, in the order the client must learn them: where the stream starts
  (``Opened``: the positions of every partition the instance owns, before anything was sent), a
  change of the instance's partitions (``Rebalance``, with where each now starts), the records
  with the positions after them (``Records``), and why it ended (``End``: the gateway drains,
  the instance was deleted, an error). Those positions are the cursor a reconnect resumes from
  (``cursors``), so a batch lost in flight is read again and none is read twice.
- **Bounds**: at most ``max_open_streams`` at once on a replica (``StreamService.slot``, 503 and
  Retry-After beyond), apart from the long-polls' own bound, which stream polls do not take; and
  what a WebSocket holds of its client's messages not yet answered, per socket and per principal
  (``StreamService.budget``, ``credit.HeldBudgets``).
- **Waits that end early.** A stream's poll waits on the log until records arrive, the stream's
  ``wake`` is set (a command or credit from its client, the client gone) or the gateway drains.
  The fetch is dropped then, and done with before the poll returns, before any position moved,
  so ending early never loses a record, leaves no read behind, and a drain ends every stream
  within milliseconds.
- **Throttling that does not end it.** A poll a quota refuses (``Throttled``) makes the stream
  wait the Retry-After, keeping the instance alive, and go on: what a client of the pull API
  does when it retries.
- **A credential that must hold.** What authenticated the stream's client (``Credential``) is
  asked before every poll, commit, seek and produce, with the ACLs (``_Stream.decide``): once it
  no longer holds (a user removed, a token past its ``exp``) the stream ends (``error``, 40101),
  as a request with it would be refused.
- **A lifetime**, if ``lifetime_ms`` is set: past it the stream ends (``error``, 50301 with
  Retry-After 0), for deployments that want long-lived clients to authenticate again; no wait of
  the stream (a pause for credit or for a quota) lasts past it.

What every stream is made with — whose it is and the replica's bounds — is one ``StreamContext``,
which ``StreamService`` builds for each stream it opens.

The transports (``service.api.streams``: Server-Sent Events and the WebSocket) render the events
and own heartbeats, send timeouts and, for the WebSocket, the client's ``credit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

from service.errors import BackendUnavailable, ConsumerInstanceNotFound, GatewayError, Throttled

from .acl import Caller, Decision, Operation, ResourceType
from .consumers import Blocked, ConsumerService, Polled
from .credentials import Credential, CredentialLapsed
from .credit import ByteBudget, CreditLimits, HeldBudgets
from .fair import holder_of
from .models import EmbeddedFormat, Record, TopicPartition
from .quotas import Quotas
from .schemas.serde import SCHEMA_TYPES, Serde
from .topics import TopicService
from .waits import OpenWaits

log = logging.getLogger(__name__)

EndReason = Literal["shutdown", "deleted", "error"]
SHUTDOWN: Final = "shutdown"
DELETED: Final = "deleted"
ERROR: Final = "error"

# A stream's poll waits at most this long: a rebalance is reported within it.
STEP_WAIT_MS: Final = 1000
_DECODE_ON_LOOP: Final = 200  # records decoded on the event loop; more go to a worker thread

Decide = Callable[[], Awaitable[Decision]]  # what the stream's caller may do, by the bindings of now


Clock = Callable[[], float]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """A replica's bounds on streams: the ``max_open_streams`` and ``stream_*`` settings."""

    open: int = 1_000
    open_per_holder: int = 1_000  # of ``open``, one principal's (``fair.holder_of``)
    heartbeat_ms: int = 15_000
    lifetime_ms: int = 0  # 0: none
    send_timeout_ms: int = 30_000
    batch_bytes: int = 1024 * 1024
    message_bytes: int = 1024 * 1024
    credit: CreditLimits = field(default_factory=CreditLimits)
    held_bytes: int = 2 * 1024 * 1024  # of a WebSocket's messages read and not yet answered
    held_bytes_per_holder: int = 16 * 1024 * 1024  # of one principal's sockets together


@dataclass(frozen=True, slots=True)
class StreamContext:
    """What every stream is made with: whose it is (``decide``, what its caller may do by the
    bindings of now; ``client``, whom the consume quotas charge, "" without them; ``credential``,
    what authenticated it, which must still hold for anything it does) and what the
    replica bounds it with (its ``limits``, the gateway's ``draining`` event, which ends every
    stream, and the ``clock`` its lifetime and pauses are measured by)."""

    decide: Decide
    client: str
    limits: StreamLimits
    draining: asyncio.Event
    clock: Clock = time.monotonic
    credential: Credential | None = None  # None: authentication is off


# --- events ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Opened:
    """Where the stream starts: the position of every partition the instance owns."""

    positions: dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class Rebalance:
    """The instance's partitions changed: what it owns now, and where each starts."""

    partitions: tuple[TopicPartition, ...]
    positions: dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class Records:
    """A batch, and the positions after it (every owned partition's, for an instance); ``size``
    is what the records weigh, if the poll counted it already."""

    format: EmbeddedFormat
    polled: Polled
    positions: dict[TopicPartition, int]
    size: int | None = None

    @property
    def count(self) -> int:
        return sum(len(records) for _, records in self.polled)

    def weight(self) -> int:
        """What the records weigh as credit and quotas count them (``Record.size``)."""
        if self.size is not None:
            return self.size
        return sum(r.size for _, records in self.polled for r in records)


@dataclass(frozen=True, slots=True)
class End:
    """The stream is over: the gateway drains (``shutdown``), the instance is gone (``deleted``),
    or ``error`` ended it."""

    reason: EndReason
    error: GatewayError | None = None


Event = Opened | Rebalance | Records | Blocked | End


# --- the streams -----------------------------------------------------------------------


class _Stream:
    """What every stream has: its context, its wake-up, its end, and waits that a wake, the drain
    or the end of its lifetime cut short."""

    def __init__(self, context: StreamContext) -> None:
        # Set to end the current wait at once (a command or credit of the client, the client gone).
        self.wake = asyncio.Event()
        self.closed = False
        self._ctx = context
        lifetime = context.limits.lifetime_ms
        self._expires = context.clock() + lifetime / 1000 if lifetime else math.inf

    def close(self) -> None:
        """The client is gone: the current wait ends and nothing more is taken."""
        self.closed = True
        self.wake.set()

    async def decide(self) -> Decision:
        """What the stream's caller may do now, by the bindings of now, as a request would be
        decided; ``CredentialLapsed`` once the credential it was opened with no longer holds, so
        nothing a stream does (a poll, a commit, a seek, a produce) outlives its credential."""
        credential = self._ctx.credential
        if credential is not None and not await credential.still_valid():
            raise CredentialLapsed()
        return await self._ctx.decide()

    def ended(self) -> End | None:
        """Why the stream must end now, if it must: the gateway drains, or its lifetime is over."""
        if self._ctx.draining.is_set():
            return End(SHUTDOWN)
        if self._ctx.clock() >= self._expires:
            message = (
                f"The stream was open for the longest time a stream may be ({self._ctx.limits.lifetime_ms} "
                "ms); reconnect to go on from its last position."
            )
            return End(ERROR, BackendUnavailable(message, retry_after=0))
        return None

    def _until(self, seconds: float) -> float:
        """When a wait of ``seconds`` from now must end: then, or at the end of the stream's lifetime."""
        return min(self._ctx.clock() + seconds, self._expires)

    def _throttled_for(self, exc: Throttled) -> float:
        """How long to wait before polling again after a quota refused a poll: its Retry-After, but
        no longer than a heartbeat, so that the transport can show the client the stream lives."""
        return min(exc.retry_after or 1.0, self._ctx.limits.heartbeat_ms / 1000)

    async def _unless_woken(self, work: Awaitable[T]) -> T | None:
        """``work``'s result, or None if the stream is woken or the gateway drains first: ``work``
        is cancelled then, and done with before this returns (only for work that changes nothing,
        a read)."""
        doing = asyncio.ensure_future(work)
        try:
            await self._woken_or(doing)
            return doing.result() if doing.done() else None
        finally:
            if not doing.done():
                doing.cancel()
                try:
                    await doing
                except asyncio.CancelledError:
                    current = asyncio.current_task()
                    if current is not None and current.cancelling():
                        raise  # this stream's own task is cancelled as well

    async def _sleep(self, seconds: float) -> None:
        """``seconds``, or less if the stream is woken, the gateway drains or its lifetime ends."""
        seconds = self._until(seconds) - self._ctx.clock()
        if seconds > 0:
            await self._woken_or(timeout=seconds)

    async def _woken_or(self, *work: asyncio.Future[Any], timeout: float | None = None) -> None:
        """Until one of ``work`` is done, the stream is woken or the gateway drains (or ``timeout``)."""
        draining = self._ctx.draining
        if self.wake.is_set() or draining.is_set():
            return
        waiters = (asyncio.ensure_future(self.wake.wait()), asyncio.ensure_future(draining.wait()))
        try:
            await asyncio.wait((*work, *waiters), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()


class InstanceStream(_Stream):
    """One consumer instance's stream, a loop of its polls. Collaborator: ``ConsumerService``.

    ``partitions`` and ``positions`` are what the client was last told: the instance's partitions
    and, for each, the next offset it has not been sent (its cursor).
    """

    def __init__(self, consumers: ConsumerService, group: str, name: str, context: StreamContext) -> None:
        super().__init__(context)
        self.group = group
        self.name = name
        self.format: EmbeddedFormat = "binary"
        self.partitions: tuple[TopicPartition, ...] | None = None
        self.positions: dict[TopicPartition, int] = {}
        self._consumers = consumers
        self._lease_ms = 1000

    async def open(self, cursor: Mapping[TopicPartition, int]) -> list[Event]:
        """Seek the instance to ``cursor`` (the partitions of it the instance owns), learn its
        ``format`` and where it starts (``Opened``, the first events to tell). What a poll would
        be refused for is raised here, before anything is sent: the instance is not there or not
        the caller's (40403), the caller may not READ its group or its topics (40301), a backend
        is down."""
        config = await self._consumers.resume(self.group, self.name, cursor, who=await self.decide())
        self.format = config.format
        self._lease_ms = config.instance_timeout_ms
        events = await self.peek()
        for event in events:
            if isinstance(event, End):
                raise event.error or ConsumerInstanceNotFound()
        return events

    async def step(
        self,
        *,
        max_bytes: int,
        max_records: int | None = None,
        byte_limit: int | None = None,
        wait_ms: int = STEP_WAIT_MS,
    ) -> list[Event]:
        """One poll and what the client must be told of it, in order; nothing after an idle wait.

        ``max_records`` and ``byte_limit`` bound the batch (``ConsumerService.take``); a record
        alone over ``byte_limit`` is answered as ``Blocked``. The caller must be let READ the
        group, as the poll's route asks of every poll, and its topics (the core's check).
        """
        try:
            who = await self.decide()
            who.check(ResourceType.GROUP, (self.group,), Operation.READ)
            batch = await self._consumers.take(
                self.group,
                self.name,
                timeout_ms=min(wait_ms, self._lease_ms // 3),  # touched well within its lease
                max_bytes=max_bytes,
                max_records=max_records,
                byte_limit=byte_limit,
                wake=self.wake,
                client=self._ctx.client,
                who=who,
            )
        except Throttled as exc:
            return await self.pause(self._throttled_for(exc))
        except ConsumerInstanceNotFound:
            return [End(DELETED)]
        except GatewayError as exc:
            return [End(ERROR, exc)]
        self._lease_ms = batch.lease_ms
        events: list[Event] = []
        if batch.partitions != self.partitions:
            starts = dict(batch.before)
            events.append(Opened(starts) if self.partitions is None else Rebalance(batch.partitions, starts))
            self.partitions = batch.partitions
            self.positions = starts
        if batch.polled:
            self.positions = dict(batch.after)
            events.append(Records(batch.format, batch.polled, self.positions, batch.weight))
        elif max_records == 0:  # a peek: where the instance stands now (after a seek, say)
            self.positions = dict(batch.after)
        elif batch.blocked is not None:
            events.append(batch.blocked)
        return events

    async def peek(self) -> list[Event]:
        """Where the instance stands, taking nothing: ``positions`` are its positions now, and a
        ``Rebalance`` (``Opened`` at first) is returned if its partitions changed; its lease is
        renewed, as by a poll."""
        return await self.step(max_bytes=1, max_records=0, wait_ms=0)

    async def pause(self, seconds: float) -> list[Event]:
        """Wait up to ``seconds`` without reading (for a quota, or for the client's credit), less if
        woken, the gateway drains or the stream's lifetime ends. Meanwhile the instance is looked
        at every second or so (``peek``): its lease renewed as a poll would, and what changed
        returned at once (a rebalance, its end)."""
        deadline = self._until(seconds)
        draining = self._ctx.draining
        while not (self.wake.is_set() or draining.is_set()):
            left = deadline - self._ctx.clock()
            if left <= 0:
                break
            await self._sleep(min(left, STEP_WAIT_MS / 1000, self._lease_ms / 3000))
            if self.wake.is_set() or draining.is_set():
                break
            events = await self.peek()
            if events:
                return events
        return []


class PartitionStream(_Stream):
    """One partition's records from an offset on, with no consumer instance: the stateless read,
    pushed. Collaborators: ``TopicService``, the consume ``Quotas``, ``Serde`` for schema formats.
    ``offset`` is the next offset to send (the stream's cursor)."""

    def __init__(
        self,
        topics: TopicService,
        quotas: Quotas,
        serde: Serde | None,
        tp: TopicPartition,
        offset: int,
        fmt: EmbeddedFormat,
        context: StreamContext,
    ) -> None:
        super().__init__(context)
        self.tp = tp
        self.offset = offset
        self.format = fmt
        self._topics = topics
        self._quotas = quotas
        self._serde = serde

    async def step(self, *, max_bytes: int, wait_ms: int = STEP_WAIT_MS) -> list[Event]:
        """One read from ``offset``: its records with the offset after them, or nothing after an
        idle wait. READ on the topic is checked every time, as the stateless read's route does."""
        tp, quotas, client = self.tp, self._quotas, self._ctx.client
        try:
            (await self.decide()).check(ResourceType.TOPIC, (tp.topic,), Operation.READ)
            if quotas.consume:
                await quotas.admit_consume(client, (tp.topic,))
            read = self._topics.read(tp, self.offset, max_bytes=max_bytes, max_wait_ms=wait_ms, counted=False)
            part = await self._unless_woken(read)
            if part is None:  # the client is gone, or the gateway drains
                return []
            records = part.records
            if quotas.consume:
                await quotas.consumed(client, [(tp, records)])
            if records and self.format in SCHEMA_TYPES:
                records = await self._decode(records)
        except Throttled as exc:
            await self._sleep(self._throttled_for(exc))
            return []
        except GatewayError as exc:
            return [End(ERROR, exc)]
        if not records:
            self.offset = max(self.offset, part.log_start_offset)  # retention removed what was there
            return []
        self.offset = records[-1].offset + 1
        return [Records(self.format, [(tp, records)], {tp: self.offset})]

    async def _decode(self, records: list[Record]) -> list[Record]:
        """The leading records that decode; the error of the first if none does."""
        serde = self._serde
        if serde is None:
            raise BackendUnavailable(f"The {self.format} format needs a schema registry, and there is none.")
        await serde.prepare(records)
        where = f"{self.tp.topic!r} partition {self.tp.partition}"
        schema_type = SCHEMA_TYPES[self.format]
        if len(records) > _DECODE_ON_LOOP:
            decoded = await asyncio.to_thread(serde.decode, schema_type, records, where=where)
        else:
            decoded = serde.decode(schema_type, records, where=where)
        if decoded.error is not None and not decoded.records:
            raise decoded.error
        return decoded.records


class StreamService:
    """Opens streams and bounds how many are open on this replica.

    Collaborators: ``ConsumerService`` and ``TopicService`` (the reads), the consume ``Quotas``,
    ``Serde`` (schema formats) and the gateway's draining event, which ends every stream.
    """

    def __init__(
        self,
        consumers: ConsumerService,
        topics: TopicService,
        *,
        quotas: Quotas | None = None,
        serde: Serde | None = None,
        limits: StreamLimits | None = None,
        draining: asyncio.Event | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.limits = limits or StreamLimits()
        self._consumers = consumers
        self._topics = topics
        self._quotas = quotas or Quotas.off()
        self._serde = serde
        self._draining = draining or asyncio.Event()
        self._clock = clock
        self._open = OpenWaits(self.limits.open, "open streams", share=self.limits.open_per_holder)
        self._held = HeldBudgets(self.limits.held_bytes, self.limits.held_bytes_per_holder)
        self._none_open = asyncio.Event()  # set while no stream is open
        self._none_open.set()

    @property
    def open(self) -> int:
        """Streams open now on this replica."""
        return self._open.open

    async def drained(self, timeout_s: float) -> bool:
        """Wait until every stream ended (they end by themselves once the gateway drains, each
        with its final event), at most ``timeout_s``; whether they all did."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._none_open.wait()
        return not self._open.open

    @contextmanager
    def slot(self, caller: Caller | None = None) -> Iterator[None]:
        """A place among the open streams for ``caller`` while the block runs: ``BackendUnavailable``
        (503 with Retry-After) past ``max_open_streams`` or past the caller's share of them."""
        try:
            with self._open.enter(holder_of(caller) if caller is not None else ""):
                self._none_open.clear()
                yield
        finally:
            if not self._open.open:
                self._none_open.set()

    def budget(self, caller: Caller) -> AbstractContextManager[ByteBudget]:
        """The bytes a WebSocket of ``caller`` may hold of its messages not yet answered, while the
        block runs: its own ``stream_max_held_bytes`` and its principal's, shared by its sockets."""
        return self._held.budget(holder_of(caller))

    def held(self, caller: Caller) -> int:
        """The bytes of ``caller``'s principal's messages its sockets hold now, not yet answered."""
        return self._held.held(holder_of(caller))

    def instance(
        self, group: str, name: str, *, decide: Decide, client: str = "", credential: Credential | None = None
    ) -> InstanceStream:
        """The stream of consumer instance ``name`` of ``group``, for the caller ``decide`` decides,
        while ``credential`` holds."""
        return InstanceStream(self._consumers, group, name, self._context(decide, client, credential))

    def partition(
        self,
        tp: TopicPartition,
        offset: int,
        fmt: EmbeddedFormat,
        *,
        decide: Decide,
        client: str = "",
        credential: Credential | None = None,
    ) -> PartitionStream:
        """The stream of ``tp`` from ``offset`` on, in ``fmt``, for the caller ``decide`` decides,
        while ``credential`` holds."""
        context = self._context(decide, client, credential)
        return PartitionStream(self._topics, self._quotas, self._serde, tp, offset, fmt, context)

    def _context(self, decide: Decide, client: str, credential: Credential | None) -> StreamContext:
        return StreamContext(decide, client, self.limits, self._draining, self._clock, credential)
