"""The registry's topic, through the Log port: created on the first write, read into a ``RegistryState``.

One partition holds every record of the registry (``records``), in the order they were
written; reading them from the start gives every replica the same ``RegistryState``. The
topic is created with ``cleanup.policy=compact`` and no time or size retention where the log
takes it (a Kafka cluster), and with no retention alone where it does not (the embedded log,
which keeps every record). It is created by the first write only: a registry nobody wrote to
leaves no topic behind, and a read finds it empty.

``catch_up`` makes the state as fresh as the topic: one offsets call, and a fetch only if the
topic holds records not yet applied. Should the topic turn out shorter than what was applied
(it was deleted and created again: the broker has none of the records applied), the state is
rebuilt from the beginning; so is it when the topic holds, at the offset of the last record
applied, another record (it was deleted and created again, and written past that offset): a
fetch for new records starts there to see it. The state never goes back otherwise: an end offset
that reads low, or a fetch that returns nothing, leaves it as it is (the registry never serves
less than it has served), and the position moves only past records applied. A writer (under the
registry's lock) asks again, a few times, for what a fetch did not return below the end it read
and for the records it appended, so that it decides on the whole topic and sees its own records.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Final

from service.errors import InvalidTopicConfig, RegistryStoreError, RegistryTimeout, TopicExists, TopicNotFound

from ..models import NewRecord, TopicPartition
from ..ports import Log
from .state import Record, RegistryState

log = logging.getLogger(__name__)

# Topic configs: Confluent's (compacted, records kept forever), and the embedded log's (kept forever).
COMPACTED: Final = {"cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1"}
KEPT: Final = {"retention.ms": "-1", "retention.bytes": "-1"}
FETCH_BYTES: Final = 4 * 1024 * 1024
READ_BACK_PAUSES_S: Final = (0.01, 0.05, 0.1, 0.25, 0.5)  # between fetches of what was just appended


class RegistryTopic:
    """The records of the registry in one partition of the log, and the state they add up to.

    Collaborators: the ``Log`` port; ``RegistryState`` applies the records. Reads through this
    may run concurrently (one fetches, the others wait for it); appends are made by one writer
    at a time, which the registry's lock ensures.
    """

    def __init__(self, log_port: Log, topic: str) -> None:
        self._log = log_port
        self.topic = topic
        self._tp = TopicPartition(topic, 0)
        self.state = RegistryState()
        self._position = 0  # the offset of the next record to apply
        self._last: tuple[int, bytes | None, bytes | None] | None = None  # the last one applied
        self._exists = False  # seen to exist (then created or read)
        self._reading = asyncio.Lock()

    @property
    def position(self) -> int:
        """The offset of the next record to apply: every record below it is in the state."""
        return self._position

    async def catch_up(self, *, complete: bool = False) -> RegistryState:
        """The state with every record the topic holds now applied. ``complete`` (a writer,
        under the registry's lock): a fetch that comes back short of the end is asked again, a
        few times (``RegistryTimeout`` if the state still stops short)."""
        try:
            begin, end = await self._log.offsets(self._tp)
        except TopicNotFound:
            if self._exists or self._position:
                log.warning("the schema registry's topic %r is gone: its state is empty now", self.topic)
                self._reset(0)
                self._exists = False
            return self.state
        self._exists = True
        if self._position < end:
            await self._read_to(end, begin)
        elif self._position > end and await self._truncated():
            async with self._reading:
                if self._position > end:
                    log.warning("the schema registry's topic %r was truncated: reading it again", self.topic)
                    self._reset(begin)
            await self._read_to(end, begin)
        if complete:
            await self._read_through(end, begin)
        return self.state

    async def append(self, records: Sequence[Record]) -> int | None:
        """Append ``records`` (the caller holds the registry's lock) and apply them, with every
        record before them (``catch_up``'s ``complete`` read); the offset of the first one (None:
        no records). Another writer's records may have come before it: those below it the
        caller did not have in its state."""
        await self.ensure()
        offsets = await self._log.append(self._tp, [NewRecord(key, value) for key, value in records])
        if not offsets:
            return None
        await self._read_through(offsets[-1] + 1, 0)
        return offsets[0]

    async def _read_through(self, end: int, begin: int) -> None:
        """Read until every record below ``end`` is applied: a fetch that does not return them
        yet (nothing yet) is asked again after a pause, a few times."""
        for pause in (0.0, *READ_BACK_PAUSES_S):
            if self._position >= end:
                return
            if pause:
                await asyncio.sleep(pause)
            await self._read_to(end, begin)
        if self._position < end:
            raise RegistryTimeout(
                f"The registry's records up to offset {end - 1} were not read in time; retry."
            )

    async def ensure(self) -> None:
        """Create the topic unless it exists (one partition; refused if it has more)."""
        if self._exists:
            return
        try:
            info = await self._log.describe_topic(self.topic)
        except TopicNotFound:
            try:
                try:
                    await self._log.create_topic(self.topic, 1, -1, COMPACTED)
                except InvalidTopicConfig:  # a log without compaction (the embedded log)
                    await self._log.create_topic(self.topic, 1, -1, KEPT)
            except TopicExists:  # another replica created it meanwhile
                pass
            log.info("created the schema registry's topic %r", self.topic)
        else:
            if len(info.partitions) != 1:
                raise RegistryStoreError(
                    f"The schema registry's topic {self.topic!r} has {len(info.partitions)} partitions; "
                    "it must have exactly 1."
                )
        self._exists = True

    async def _read_to(self, end: int, begin: int) -> None:
        async with self._reading:
            self._position = max(self._position, begin)
            check = self._last if self._last is not None and self._last[0] >= begin else None
            while self._position < end:
                # The first fetch starts at the last record applied, to see it is still there: a
                # topic deleted and created again longer than what was applied holds another one.
                start = check[0] if check is not None else self._position
                data = await self._log.fetch({self._tp: start}, max_bytes=FETCH_BYTES, max_wait_ms=0)
                part = data.get(self._tp)
                if part is None:
                    return
                if check is not None:
                    first = part.records[0] if part.records else None
                    at, key, value = check
                    check = None
                    if first is not None and first.offset == at and (first.key, first.value) != (key, value):
                        log.warning(
                            "the schema registry's topic %r was created again: reading it again", self.topic
                        )
                        self._reset(begin)
                        continue
                if not part.records:
                    if part.log_start_offset > self._position:  # compacted or deleted below us
                        self._position = part.log_start_offset
                        continue
                    # Nothing here, or nothing yet: stay. Moving on past records a fetch did not
                    # return would leave them out of the state for good (a schema missed gets a
                    # second id); the next catch-up asks again.
                    return
                for record in part.records:
                    if record.offset < self._position:
                        continue
                    why = self.state.apply(record.key, record.value)
                    if why is not None:
                        log.warning("schema registry record at offset %d ignored: %s", record.offset, why)
                    self._position = record.offset + 1
                    self._last = (record.offset, record.key, record.value)

    async def _truncated(self) -> bool:
        """Whether the records applied are no longer in the topic (it was deleted and created
        again): the broker returns none from the last one applied and says its end is below it.
        An end offset that reads low alone (a broker's momentary or inexact answer, as some
        Kafka look-alikes give) is no reason to drop what was read."""
        data = await self._log.fetch({self._tp: self._position - 1}, max_bytes=1, max_wait_ms=0)
        part = data.get(self._tp)
        return part is not None and not part.records and part.high_watermark < self._position

    def _reset(self, position: int) -> None:
        self.state = RegistryState()
        self._position = position
        self._last = None
