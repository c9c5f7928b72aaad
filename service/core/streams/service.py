"""Opening streams, and the replica's bounds on them: how many are open, what their sockets hold.

Collaborators: ``ConsumerService`` and ``TopicService`` (the reads the streams loop over), the
consume ``Quotas``, ``Serde``, ``waits.OpenWaits`` (the open streams' bound, fairly shared) and
``credit.HeldBudgets`` (the bytes a WebSocket holds of its client's messages) and
``watch.AccessWatch`` (whether the open streams may still read, asked for all at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from ..acl import Caller
from ..consumers import ConsumerService
from ..credentials import Credential
from ..credit import ByteBudget, HeldBudgets
from ..fair import holder_of
from ..models import EmbeddedFormat, TopicPartition
from ..quotas import Quotas
from ..schemas.serde import Serde
from ..topics import TopicService
from ..waits import OpenWaits
from .instance import InstanceStream
from .partition import PartitionStream
from .stream import Clock, Decide, Stream, StreamContext, StreamLimits
from .watch import AccessWatch


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
        authorizing: bool = True,
    ) -> None:
        self.limits = limits or StreamLimits()
        # Whether the ACLs are enforced: without them and without a credential, nothing can
        # revoke what a stream reads, and the watch has nothing to ask it.
        self._authorizing = authorizing
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
        self._watch = AccessWatch()

    @property
    def open(self) -> int:
        """Streams open now on this replica."""
        return self._open.open

    @property
    def watched(self) -> int:
        """Open streams the access watch asks (``watching``)."""
        return self._watch.watched

    async def drained(self, timeout_s: float) -> bool:
        """Wait until every stream ended (they end by themselves once the gateway drains, each
        with its final event), at most ``timeout_s``; whether they all did."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._none_open.wait()
        if not self._open.open:
            await self._watch.close()
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

    def watching(self, stream: Stream) -> AbstractContextManager[None]:
        """While the block runs, ``stream`` is asked with the replica's other open streams, every
        ``watch.RECHECK_S``, whether its credential and the ACLs still let it read; it ends once
        they do not (``Stream.refuse``). A stream with no credential, on a replica that enforces
        no ACLs, is not asked: nothing could refuse it."""
        if not self._authorizing and stream.credential is None:
            return contextlib.nullcontext()
        return self._watch.watching(stream)

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
