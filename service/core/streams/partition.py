"""One partition's stream: the stateless read from an offset on, pushed, with no consumer instance.

Collaborators: ``TopicService.read``, the consume ``Quotas``, ``Serde`` for the schema formats and
``stream.Stream`` (its context, wake-up and end).
"""

from __future__ import annotations

from service.errors import GatewayError, Throttled

from ..acl import Operation, ResourceType
from ..models import EmbeddedFormat, RecordColumns, TopicPartition
from ..quotas import Quotas
from ..schemas.serde import SCHEMA_TYPES, Serde, decode_in
from ..topics import TopicService
from .events import Event, Records
from .stream import STEP_WAIT_MS, Stream, StreamContext


class PartitionStream(Stream):
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

    async def recheck(self) -> None:
        """Raise if the stream may no longer read: ``Forbidden`` once its caller may not READ its
        topic; ``CredentialLapsed`` once its credential no longer holds."""
        (await self.decide()).check(ResourceType.TOPIC, (self.tp.topic,), Operation.READ)

    async def step(self, *, max_bytes: int, wait_ms: int = STEP_WAIT_MS) -> list[Event]:
        """One read from ``offset``: its records with the offset after them, or nothing after an
        idle wait, or after a read that failed with a 503 (``Stream._ride_out``). READ on the topic
        is checked every time, as the stateless read's route does."""
        tp, quotas, client = self.tp, self._quotas, self._ctx.client
        try:
            (await self.decide()).check(ResourceType.TOPIC, (tp.topic,), Operation.READ)
            if quotas.consume:
                await quotas.admit_consume(client, (tp.topic,))
            read = self._topics.read(
                tp,
                self.offset,
                max_bytes=max_bytes,
                max_wait_ms=self._within_lifetime(wait_ms),
                counted=False,
            )
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
            return await self._ride_out(exc)
        self._polled()
        if not records:
            self.offset = max(self.offset, part.log_start_offset)  # retention removed what was there
            return []
        self.offset = records[-1].offset + 1
        return [Records(self.format, [(tp, records)], {tp: self.offset})]

    async def _decode(self, records: RecordColumns) -> RecordColumns:
        """The leading records that decode; the error of the first if none does."""
        return (await decode_in(self._serde, self.format, self.tp, records)).leading()
