"""One push subscription delivered from this replica: acquire, send, settle, retry, dead-letter.

The deliverer is a member of the subscription's share group (``PushSubscription.group``), as a
share consumer is, with the subscription's own share limits (``lock_ms`` from the deadline, the
delivery limit from ``max_attempts``). While it runs it keeps one acquisition waiting for
records whenever it holds fewer than it may, sends up to ``max_in_flight`` requests at once
(``holding`` decides which records go together and which wait for others), and settles what came
back: a 2xx accepts the request's records; a retry waits out its back-off while the records stay
held (renewed every third of their lock); a record out of attempts, or refused by a 4xx, is
copied to the dead-letter topic with headers saying why, then rejected::

    push.subscription     the subscription
    push.status           the last HTTP status (absent if none came)
    push.error            the last outcome in words
    push.attempts         requests that carried it
    push.first_attempt    when the first and the last were sent (ms since the epoch)
    push.last_attempt

(beside the share group's ``dlq.*`` headers: ``shares.dead_letters``). Settlements are stored in
the background, those that came back meanwhile together. When it stops it waits for its requests
(at most one deadline), stores their settlements and lets the rest go: another replica may take
them at once. Should this replica die instead, the records it held come back when their locks
expire, and are sent again: at most what was in flight is delivered twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, Final

from service.errors import ConversionError, GatewayError

from ..acl import Access, Caller, Operation, ResourceType
from ..models import EmbeddedFormat, Header, Polled, RecordColumns, TopicPartition
from ..patterns import matches
from ..schemas.serde import SCHEMA_TYPES, Serde, decode_in
from ..shares.acks import Acknowledgement
from ..shares.dead_letters import DeadLetters
from ..shares.delivered import Delivered
from ..shares.delivery import AckType, Exhausted
from ..shares.service import ShareGroups
from ..topics import TopicService
from . import requests
from .destinations import DestinationRefused, Destinations
from .holding import Held, Holding, by_partition, first_and_last
from .ports import Outcome, PushRequest, PushSender
from .requests import Verdict
from .spec import PushSubscription
from .stats import PushStats

log = logging.getLogger(__name__)

Render = Callable[[EmbeddedFormat, Polled], bytes]

_REFRESH_S: Final = 5.0  # how often the topics (a pattern's, new partitions) are looked at again
_ACQUIRE_WAIT_MS: Final = 1000
_BACKEND_RETRY_S: Final = 1.0  # after a backend failed an acquisition or a dead-letter write: the wait
HEADER_PREFIX: Final = "push."
_ORDER: Final = attrgetter("order")


class Deliverer:
    """Delivers one subscription while ``run`` runs (see the module docstring)."""

    def __init__(
        self,
        sub: PushSubscription,
        *,
        shares: ShareGroups,
        topics: TopicService,
        sender: PushSender,
        destinations: Destinations,
        render: Render,
        serde: Serde | None,
        dead_letters: DeadLetters | None,
        stats: PushStats,
        access: Access | None = None,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[], float] = lambda: random.uniform(0.5, 1.0),
    ) -> None:
        self.sub = sub
        self._spec = sub.spec
        self._shares = shares
        self._topics = topics
        self._sender = sender
        self._destinations = destinations
        self._render = render
        self._serde = serde
        self._dead_letters = dead_letters
        self.stats = stats
        self._access = access
        self._clock = clock
        self._jitter = jitter
        self._member = f"push-{uuid.uuid4().hex[:12]}"
        self._holding = Holding(sub.spec)
        self._acks: list[Acknowledgement] = []
        # Requests answered whose settlements are not stored yet: they hold their slot until they
        # are, so what a crash can deliver twice is bounded by max_in_flight requests.
        self._unstored = 0
        self._tps: list[TopicPartition] = []
        self._room = max(2, 2 * self._spec.max_in_flight * self._spec.max_records)
        self._quiet_until = 0.0  # monotonic: no acquisition before it
        self._burying: list[Held] = []  # given up, their dead-letter copies not written yet
        self._bury_at = 0.0  # monotonic: when those copies are tried again

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop`` is set, then wait for the requests in flight and let the rest go."""
        sends: dict[asyncio.Task[Outcome], list[Held]] = {}
        acquiring: asyncio.Task[Any] | None = None
        settling: asyncio.Task[None] | None = None
        stopping = asyncio.ensure_future(stop.wait())
        refresh_at = renew_at = 0.0
        try:
            while not stop.is_set():
                now = time.monotonic()
                if now >= refresh_at:
                    await self._refresh()
                    refresh_at = now + _REFRESH_S
                if now >= renew_at:
                    await self._renew()
                    await self._sweep()
                    renew_at = now + self._spec.lock_ms / 3000
                if self._burying and now >= self._bury_at:
                    burying, self._burying = self._burying, []
                    await self._give_up(burying)
                await self._dispatch(sends)
                if (
                    acquiring is None
                    and self._tps
                    and len(self._holding) < self._room
                    and now >= self._quiet_until
                ):
                    # the settlements waiting go with it, in one store, unless a store of them runs
                    acquiring = asyncio.ensure_future(self._acquire(settling is None))
                if settling is None and self._acks:
                    settling = asyncio.ensure_future(self._settle())
                waits: set[asyncio.Future[Any]] = {stopping, *sends}
                waits.update(t for t in (acquiring, settling) if t is not None)
                free = len(sends) + self._unstored < self._spec.max_in_flight
                await asyncio.wait(
                    waits, timeout=self._idle_s(renew_at, refresh_at, free), return_when="FIRST_COMPLETED"
                )
                for task in [t for t in sends if t.done()]:
                    await self._settled(sends.pop(task), _outcome(task))
                if acquiring is not None and acquiring.done():
                    self._acquired(acquiring)
                    acquiring = None
                if settling is not None and settling.done():
                    _report(settling, "storing settlements")
                    settling = None
        finally:
            stopping.cancel()
            await self._let_go(sends, acquiring, settling)

    # --- the steps ----------------------------------------------------------------------------

    async def _refresh(self) -> None:
        """Look at the topics and the backlog again; a backend failing now (a broker gone) keeps
        what was known until the next look, rather than stopping the delivery."""
        try:
            self._tps = await self._partitions()
            reports = await self._shares.describe(self.sub.group)
            self.stats.backlog = sum(r.lag for r in reports)
        except GatewayError as exc:
            log.warning("push %s: topics not looked at again (next time): %s", self.sub.name, exc)

    async def _partitions(self) -> list[TopicPartition]:
        spec = self._spec
        if spec.topic_pattern is not None:
            names = [t for t in await self._topics.names() if matches(spec.topic_pattern, t)]
        else:
            names = list(spec.topics)
        if self._access is not None:  # the owner's rights now: a grant revoked stops the delivery
            may = await self._access.decision(Caller(self.sub.owner))
            if not may.may(ResourceType.GROUP, self.sub.group, Operation.READ):
                log.warning("push %s: its owner may no longer read its group", self.sub.name)
                return []
            names = [n for n in names if may.may(ResourceType.TOPIC, n, Operation.READ)]
        tps: list[TopicPartition] = []
        for name in names:
            try:
                count = await self._topics.partition_count(name)
            except GatewayError as exc:  # a topic deleted, or not created yet: nothing to deliver of it
                log.debug("push %s: topic %s: %s", self.sub.name, name, exc)
                continue
            tps += [TopicPartition(name, n) for n in range(count)]
        return tps

    async def _acquire(self, settle: bool) -> tuple[list[Delivered], list[tuple[TopicPartition, Exhausted]]]:
        """Records to hold, and (``settle``) the settlements waiting stored in the same write; a
        poll with settlements answers at once, one without waits a while for records."""
        acks, slots = self._take_acks() if settle else ([], 0)
        try:
            delivered, exhausted, _ = await self._shares.poll(
                self.sub.group,
                self._member,
                self._tps,
                max_records=max(1, self._room - len(self._holding)),
                max_bytes=max(self._spec.max_bytes, 1024 * 1024),
                wait_ms=0 if acks else _ACQUIRE_WAIT_MS,
                start_at=self._spec.start,
                acks=acks,
            )
        except BaseException:
            self._acks = acks + self._acks  # stored with the next write (one already stored is refused)
            raise
        self._unstored -= slots
        return delivered, exhausted

    def _take_acks(self) -> tuple[list[Acknowledgement], int]:
        """The settlements waiting, and the requests' slots they hold, taken for one store."""
        acks, self._acks = self._acks, []
        return acks, (self._unstored if acks else 0)

    def _acquired(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled() or task.exception() is not None:
            _report(task, "acquiring records")
            self._quiet_until = time.monotonic() + _BACKEND_RETRY_S  # not again at once
            return
        delivered, exhausted = task.result()
        self._holding.add(delivered, self.now_ms())
        self.stats.dead_lettered += len(exhausted)  # their locks ran out too often: the group archived them
        self.stats.held = len(self._holding)

    async def _dispatch(self, sends: dict[asyncio.Task[Outcome], list[Held]]) -> None:
        while len(sends) + self._unstored < self._spec.max_in_flight:
            batch = self._holding.next_batch(self.now_ms())
            if not batch:
                break
            batch.sort(key=_ORDER)
            batch, content = await self._content(batch)
            if content is None:
                continue
            sends[asyncio.ensure_future(self._send(batch, content))] = batch
        self.stats.in_flight = len(sends)

    async def _content(self, batch: list[Held]) -> tuple[list[Held], bytes | None]:
        """The batch and its records rendered; a record that cannot be shown in the format is
        dead-lettered at once (it never will be) and the rest rendered without it."""
        bad: list[Held] = []
        content: bytes | None = None
        while batch:
            try:
                content = await self._rendered(batch)
                break
            except ConversionError as exc:
                culprit = await self._first_unshowable(batch)
                culprit.error = f"cannot be shown as {self._spec.format}: {exc.message}"
                bad.append(culprit)
                batch = [h for h in batch if h is not culprit]
            except GatewayError as exc:  # no registry now: try again later
                self._retry(batch, Outcome(None, exc.message))
                batch = []
        await self._give_up(bad)
        return batch, content

    async def _rendered(self, items: Sequence[Held]) -> bytes:
        """``items`` as the records array of a request body; ``ConversionError`` if one cannot be shown."""
        fmt = self._spec.format
        polled: Polled = [
            (tp, RecordColumns.of([h.record for h in run]).with_deliveries([h.deliveries for h in run]))
            for tp, run in by_partition(items).items()
        ]
        if fmt in SCHEMA_TYPES:
            polled = [(tp, (await decode_in(self._serde, fmt, tp, rs)).leading()) for tp, rs in polled]
        return self._render(fmt, polled)

    async def _first_unshowable(self, batch: list[Held]) -> Held:
        for held in batch:
            try:
                await self._rendered([held])
            except ConversionError:
                return held
        return batch[0]

    async def _send(self, batch: list[Held], content: bytes) -> Outcome:
        sub = self.sub
        first, last = first_and_last(batch)
        delivery = requests.delivery_id(sub, first, last)
        body = requests.body(sub, delivery, content)
        attempt = max(h.attempts for h in batch) + 1
        now = self.now_ms()
        for held in batch:
            held.first_ms = held.first_ms or now
            held.last_ms = now
        try:
            target = self._destinations.check_url(self._spec.endpoint)
        except DestinationRefused as exc:
            return Outcome(None, exc.message)
        headers = requests.headers(sub, delivery, body, first, len(batch), attempt, now)
        self.stats.requests += 1
        return await self._sender.send(
            PushRequest(target, body, headers, self._spec.ack_deadline_ms), self._destinations
        )

    async def _settled(self, batch: list[Held], outcome: Outcome) -> None:
        """Settle, retry or dead-letter ``batch`` by what its request met."""
        summary = outcome.summary
        for held in batch:
            held.attempts += 1
            held.status, held.error = outcome.status, summary
        self.stats.last_status = outcome.status
        verdict = requests.verdict(outcome.status)
        if verdict is Verdict.SETTLE:
            self._settle_later(batch, AckType.ACCEPT)
            self.stats.settled(len(batch), time.monotonic())
            return
        self.stats.failures += 1
        self.stats.last_error, self.stats.last_error_ms = outcome.summary, self.now_ms()
        if verdict is Verdict.DEAD_LETTER:
            await self._give_up(batch)
            return
        spent = [h for h in batch if h.attempts >= self._spec.max_attempts]
        await self._give_up(spent)
        self._retry([h for h in batch if h.attempts < self._spec.max_attempts], outcome)

    def _retry(self, batch: Sequence[Held], outcome: Outcome) -> None:
        for held in batch:
            wait = requests.backoff_ms(self._spec, held.attempts, outcome.retry_after_ms, self._jitter())
            held.due_ms = self.now_ms() + wait
        self._holding.back(batch)

    async def _give_up(self, items: Sequence[Held]) -> None:
        """Copy ``items`` to the dead-letter topic (if there is one), then reject them. A copy that
        cannot be written now (the log is failing) is written again a while later, its records
        still held: they are never sent to the endpoint again, which refused them for good."""
        if not items:
            return
        if self._dead_letters is not None:
            for tp, run in by_partition(items).items():
                copies = [(h.record, Exhausted(h.record.offset, h.deliveries, h.error)) for h in run]
                try:
                    await self._dead_letters.write(
                        self.sub.group, tp, copies, {h.record.offset: self._why(h) for h in run}
                    )
                except GatewayError as exc:
                    log.warning(
                        "push %s: dead-letter copies not written (tried again): %s", self.sub.name, exc
                    )
                    self._burying += run
                    self._bury_at = time.monotonic() + _BACKEND_RETRY_S
                    items = [h for h in items if h.tp != tp]
        self.stats.dead_lettered += len(items)
        self._settle_later(items, AckType.REJECT)

    def _why(self, held: Held) -> list[Header]:
        out: list[Header] = [(HEADER_PREFIX + "subscription", self.sub.name.encode())]
        if held.status is not None:
            out.append((HEADER_PREFIX + "status", str(held.status).encode()))
        if held.error is not None:
            out.append((HEADER_PREFIX + "error", held.error.encode("utf-8", "replace")))
        out.append((HEADER_PREFIX + "attempts", str(held.attempts).encode()))
        if held.first_ms is not None and held.last_ms is not None:
            out.append((HEADER_PREFIX + "first_attempt", str(held.first_ms).encode()))
            out.append((HEADER_PREFIX + "last_attempt", str(held.last_ms).encode()))
        return out

    def _settle_later(self, items: Sequence[Held], kind: AckType) -> None:
        """Stop holding ``items`` and queue their settlement (one request's slot) for the next store."""
        if not items:
            return
        self._acks += [
            Acknowledgement(tp, tuple(h.record.offset for h in run), kind)
            for tp, run in by_partition(items).items()
        ]
        self._unstored += 1
        self._holding.remove(items)
        self.stats.held = len(self._holding)

    async def _settle(self) -> None:
        """Store the settlements queued; should the store fail, they wait for the next one."""
        acks, slots = self._take_acks()
        try:
            await self._shares.acknowledge(self.sub.group, self._member, acks)
        except GatewayError:
            self._acks = acks + self._acks
            await asyncio.sleep(0.5)  # not again at once: the coordinator is failing
            raise
        self._unstored -= slots

    async def _sweep(self) -> None:
        """Write the dead-letter copies a crashed writer left unwritten (if the backends let it now)."""
        try:
            await self._shares.sweep([self.sub.group])
        except GatewayError as exc:
            log.warning("push %s: dead-letter copies not swept (next time): %s", self.sub.name, exc)

    async def _renew(self) -> None:
        """Renew the locks of everything held, so that none goes elsewhere while it waits here."""
        held = self._holding.by_partition()
        if not held:
            return
        acks = [Acknowledgement(tp, tuple(offsets), AckType.RENEW) for tp, offsets in held.items()]
        try:
            refusals, _ = await self._shares.acknowledge(self.sub.group, self._member, acks)
        except GatewayError as exc:
            log.warning("push %s: locks not renewed: %s", self.sub.name, exc)
            return
        lost = {(tp, o) for tp, offsets in refusals.items() for o in offsets}
        if lost:  # their locks ran out (this replica stalled): they are someone else's now
            log.warning("push %s: %d held records were lost to lock expiry", self.sub.name, len(lost))
            self._holding.remove([h for h in self._holding if h.coordinate in lost and not h.sending])

    def _idle_s(self, renew_at: float, refresh_at: float, free: bool) -> float:
        """How long the loop may wait for nothing but its tasks: until the next renewal or look at
        the topics, the end of a quiet spell, or (with a request's slot free) a record's back-off."""
        due = self._holding.next_due() if free else None
        now = time.monotonic()
        until = min(renew_at, refresh_at) - now
        if self._quiet_until > now:
            until = min(until, self._quiet_until - now)
        if self._burying:
            until = min(until, self._bury_at - now)
        if due is not None:
            until = min(until, (due - self.now_ms()) / 1000)
        return max(until, 0.001)

    async def _let_go(
        self,
        sends: dict[asyncio.Task[Outcome], list[Held]],
        acquiring: asyncio.Task[Any] | None,
        settling: asyncio.Task[None] | None,
    ) -> None:
        """Wait for the requests in flight (one deadline at most), store every settlement, and
        release what is still held to the group."""
        if sends:
            done, pending = await asyncio.wait(sends, timeout=self._spec.ack_deadline_ms / 1000 + 1)
            for task in done:
                await self._settled(sends[task], _outcome(task))
            for task in pending:
                task.cancel()
        if acquiring is not None:  # what it acquires is released with the rest below
            with contextlib.suppress(Exception):
                await acquiring
        if settling is not None:
            with contextlib.suppress(Exception):
                await settling
        burying, self._burying = self._burying, []
        await self._give_up(burying)  # once more: what is still not written is let go with the rest
        try:
            if self._acks:
                await self._settle()
            await self._shares.leave(self.sub.group, self._member)
        except GatewayError as exc:  # what is not released comes back when its lock expires
            log.warning("push %s: held records not released (back at lock expiry): %s", self.sub.name, exc)
        self.stats.in_flight = self.stats.held = 0


def _report(task: asyncio.Task[Any], doing: str) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.warning("push: %s failed: %s", doing, exc)


def _outcome(task: asyncio.Task[Outcome]) -> Outcome:
    """What a finished send met; a send that failed in the gateway itself is an outcome to retry."""
    exc = None if task.cancelled() else task.exception()
    if task.cancelled() or exc is not None:
        log.error("push: a request failed in the gateway", exc_info=exc)
        return Outcome(None, "the gateway failed to send the request")
    return task.result()
