"""``RecordAppender``: the one shared, bounded Kafka producer of the process.

``append`` turns one call's records into Kafka record batches with aiokafka's
batch API (``create_batch``/``append``/``send_batch``): one batch for the whole
call, more only when a batch is full (``kafka_batch_bytes``, or the topic's
``max.message.bytes`` when smaller). The batches of a call are queued in order,
so its records keep their order and ascending offsets; another producer's
batch may land between two of them, which is why offsets are reported per
record (base offset of each batch + index) rather than as a range.

Calls to one partition share batches when they meet (``_Lane``): aiokafka
sends one request per broker at a time and one batch per partition in it, so
a batch queued behind another would wait for that round trip anyway. While a
partition has a batch in aiokafka's hands, the records of the calls that
arrive are appended to the next batch, which is handed over as soon as the
first is acknowledged: four concurrent 100-record calls cost two broker round
trips instead of four. Each call still gets its own records' offsets.

Memory is bounded by a ``ByteBudget`` of ``kafka_buffer_bytes``: a call takes
the bytes of its records before building batches and gets them back as each
batch is acknowledged or fails, not when the caller stops waiting, so batches
still retrying while a broker is away keep counting. A call that cannot get
room, or whose batches are not acknowledged, within ``kafka_request_timeout_ms``
answers ``BackendUnavailable`` (its records may still be written later: Kafka
produce is at-least-once across a timeout).

With idempotence on, a batch that fails for good leaves a gap in the
producer's sequence numbers which the broker would refuse from then on for
that partition (OutOfOrderSequence); the appender then replaces the producer
(new producer id) in the background.

A producer is closed with aiokafka's own ``stop()``, which first delivers every
batch it holds; an idempotent producer retries those until Kafka takes or
refuses them, so a close can last as long as an outage. A replaced producer
closes in the background meanwhile (its callers were answered when their own
timeout passed); ``stop()`` answers every caller still waiting 503 at once and
gives the close one request timeout, after which it stops waiting for it.

Collaborators: ``ByteBudget``, ``errors``; aiokafka's ``AIOKafkaProducer``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Final

from aiokafka import AIOKafkaProducer
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from service.core.models import NewRecord, TopicPartition
from service.core.rules import INT64_MAX
from service.errors import (
    BackendError,
    BackendUnavailable,
    GatewayError,
    InvalidPayload,
    PartitionNotFound,
    PayloadTooLarge,
)

from ..tasks import retrieve
from .budget import ByteBudget
from .errors import is_broken_producer, is_retriable, one_line, translate
from .options import KafkaOptions

log = logging.getLogger(__name__)

_BYTES = (bytes, bytearray, memoryview)


def record_size(record: NewRecord, index: int) -> int:
    """Upper bound of ``record`` alone in a batch (batch header included); checks its types.

    Raises ``InvalidPayload`` for what Kafka's record format cannot carry.
    """
    key, value, headers, ts = record.key, record.value, record.headers, record.timestamp
    if key is not None and not isinstance(key, _BYTES):
        raise InvalidPayload(f"records[{index}]: key must be bytes or null")
    if value is not None and not isinstance(value, _BYTES):
        raise InvalidPayload(f"records[{index}]: value must be bytes or null")
    if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int) or not 0 <= ts <= INT64_MAX):
        raise InvalidPayload(f"records[{index}]: timestamp must be milliseconds since epoch")
    for name, data in headers:
        if not isinstance(name, str) or (data is not None and not isinstance(data, _BYTES)):
            raise InvalidPayload(f"records[{index}]: a header is a (name, bytes or null) pair")
    try:
        return int(DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, list(headers)))
    except UnicodeEncodeError as exc:
        raise InvalidPayload(f"records[{index}]: header name is not valid UTF-8 text") from exc


# A record alone in a batch: the batch header (61 B), aiokafka's record overhead bound (21 B), and
# the header-count varint (1 B); key and value add their length plus a varint of at most 5 bytes.
_PLAIN_OVERHEAD: Final = 61 + 21 + 1


def record_sizes(records: Sequence[NewRecord]) -> list[int]:
    """``record_size`` of every record; plain records (bytes, no headers or timestamp) cheaply.

    The plain bound is never below aiokafka's own estimate, so batches and the
    byte budget stay within their limits.
    """
    sizes: list[int] = []
    append = sizes.append
    for i, record in enumerate(records):
        key, value = record.key, record.value
        if (
            record.headers
            or record.timestamp is not None
            or (key is not None and type(key) is not bytes)
            or (value is not None and type(value) is not bytes)
        ):
            append(record_size(record, i))
        else:
            append(
                _PLAIN_OVERHEAD
                + (1 if key is None else 5 + len(key))
                + (1 if value is None else 5 + len(value))
            )
    return sizes


class _Batch:
    """A batch being filled or on its way: its records' count and estimated bytes, and
    ``result``, the base offset Kafka gave it (or why it failed)."""

    __slots__ = ("builder", "count", "result", "size")

    def __init__(self, builder: Any) -> None:
        self.builder = builder
        self.count = 0
        self.size = 0
        self.result: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.result.add_done_callback(retrieve)  # every waiter may have given up

    def add(self, record: NewRecord, size: int) -> bool:
        """Append ``record``; False when aiokafka counts the batch as full."""
        meta = self.builder.append(
            key=record.key, value=record.value, timestamp=record.timestamp, headers=list(record.headers)
        )
        if meta is None:
            return False
        self.count += 1
        self.size += size
        return True


class _Lane:
    """One partition's batches: at most one in aiokafka's hands, the next ones filling meanwhile."""

    __slots__ = ("busy", "queued")

    def __init__(self) -> None:
        self.busy = False
        self.queued: deque[_Batch] = deque()


class RecordAppender:
    """One ``AIOKafkaProducer`` (acks=all, idempotent unless turned off) behind a byte budget.

    ``security`` is the log's shared ``security.client_options``: the producer, and each one
    that replaces it, signs in as the log's other clients do.
    """

    def __init__(
        self, servers: list[str], options: KafkaOptions, *, security: Mapping[str, Any] | None = None
    ) -> None:
        self._servers = servers
        self._options = options
        self._security = dict(security or {})
        self._budget = ByteBudget(options.buffer_bytes)
        self._producer: Any = None
        self._topics: set[str] = set()  # topics the producer has sent to: it tracks their metadata
        self._tasks: set[asyncio.Task[None]] = set()  # producer replacements in progress
        self._replacing = False
        self._lanes: dict[TopicPartition, _Lane] = {}
        self._submits: set[asyncio.Task[None]] = set()  # batches being handed to aiokafka and acked
        self._closings: set[asyncio.Task[None]] = set()  # producers closing (replaced, or at stop)
        self._closing = False

    @property
    def budget(self) -> ByteBudget:
        return self._budget

    def _new_producer(self) -> Any:
        o = self._options
        return AIOKafkaProducer(
            bootstrap_servers=self._servers,
            client_id=f"{o.client_id}-producer",
            acks="all",
            enable_idempotence=o.idempotence,
            linger_ms=o.linger_ms,
            max_batch_size=o.batch_bytes,
            compression_type=o.aiokafka_compression,
            request_timeout_ms=o.request_timeout_ms,
            **self._security,
        )

    async def start(self) -> None:
        """Start the producer (InitProducerId when idempotent); aiokafka's errors propagate."""
        producer = self._new_producer()
        try:
            await producer.start()
        except BaseException:
            await _quietly_stop(producer, self._options.request_timeout)
            raise
        self._producer = producer

    async def stop(self) -> None:
        """Let what is queued be acknowledged for up to the request timeout, answer every caller
        still waiting ``BackendUnavailable``, then close the producers (bounded as well)."""
        timeout = self._options.request_timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._submits and (left := deadline - loop.time()) > 0:
            await asyncio.wait(set(self._submits), timeout=left)  # each may hand over the next
        self._closing = True
        for task in list(self._submits):
            task.cancel()  # their callers: 503, the records may still be written
        await asyncio.gather(*self._submits, return_exceptions=True)
        for lane in self._lanes.values():
            for batch in lane.queued:
                if not batch.result.done():
                    batch.result.set_exception(
                        BackendUnavailable("The gateway is stopping; the records were not sent to Kafka.")
                    )
        self._lanes.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        producer, self._producer = self._producer, None
        if producer is not None:
            self._retire(producer)
        if not self._closings:
            return
        _, unclosed = await asyncio.wait(set(self._closings), timeout=timeout)
        if unclosed:
            # aiokafka's stop() is still delivering what Kafka has not acknowledged; there is no
            # public way to make it give up, and waiting for a broker that may not come back
            # would hold the gateway's stop. Its callers were answered 503 already.
            log.warning(
                "Kafka did not acknowledge every batch within %d ms of the stop; their requests "
                "were answered 503 and the records may still be written",
                self._options.request_timeout_ms,
            )
            for task in unclosed:
                task.cancel()
            await asyncio.gather(*unclosed, return_exceptions=True)

    def _retire(self, producer: Any) -> None:
        """Close ``producer`` in the background: aiokafka's ``stop()`` delivers what it holds first."""
        task = asyncio.get_running_loop().create_task(_close(producer))
        self._closings.add(task)
        task.add_done_callback(self._closings.discard)

    def forget_topic(self, topic: str) -> None:
        """Stop tracking a deleted topic's metadata: aiokafka's producer asks for it with
        auto-creation on, which would bring the topic back on brokers that allow that."""
        if topic in self._topics and self._producer is not None:
            self._topics.discard(topic)
            self._producer.client.set_topics(sorted(self._topics))

    async def append(
        self, tp: TopicPartition, records: Sequence[NewRecord], *, batch_limit: int, record_limit: int | None
    ) -> list[int]:
        """Send ``records`` to ``tp`` and return each one's offset once Kafka acknowledged them all.

        ``batch_limit`` caps a batch's bytes; ``record_limit`` (the topic's
        ``max.message.bytes``, if known) refuses a record that no batch could carry.
        """
        producer = self._producer
        if producer is None:
            raise BackendUnavailable("The Kafka producer is not running.")
        sizes = record_sizes(records)
        if record_limit is not None:
            for i, size in enumerate(sizes):
                if size > record_limit:
                    raise PayloadTooLarge(
                        f"records[{i}] needs {size} bytes in a Kafka batch; topic {tp.topic!r} "
                        f"accepts at most {record_limit} (max.message.bytes)."
                    )
        timeout = self._options.request_timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            granted = await self._budget.acquire(sum(sizes), timeout)
        except TimeoutError:
            raise BackendUnavailable(
                f"The Kafka producer's buffer ({self._budget.capacity} bytes) stayed full for "
                f"{self._options.request_timeout_ms} ms; Kafka is slow or unavailable."
            ) from None
        lane = self._lanes.get(tp)
        if lane is None:
            lane = self._lanes[tp] = _Lane()
        slots = self._fill(lane, producer, records, sizes, batch_limit)
        results = [batch.result for batch, _, _ in slots]  # one per batch: slots never repeat one
        _release_when_done(self._budget, granted, results)
        if not lane.busy:
            self._hand_over(tp, lane)
        # asyncio.wait, not gather under a timeout: giving up must not cancel the results, which
        # other calls sharing the batches wait for too.
        _, pending = await asyncio.wait(results, timeout=max(deadline - loop.time(), 0))
        for result in results:  # a batch refused for good says more than one still pending
            if result.done() and (failure := result.exception()) is not None:
                raise self._translated(failure, tp, f"appending to {tp}") from failure
        if pending:
            raise BackendUnavailable(
                f"Kafka did not acknowledge the records for {tp} within "
                f"{self._options.request_timeout_ms} ms; they may still be written."
            )
        offsets: list[int] = []
        for batch, first, count in slots:
            base = batch.result.result() + first
            offsets.extend(range(base, base + count))
        return offsets

    def _fill(
        self, lane: _Lane, producer: Any, records: Sequence[NewRecord], sizes: list[int], limit: int
    ) -> list[tuple[_Batch, int, int]]:
        """Append ``records`` to the lane's last waiting batch and new ones after it.

        Returns where they went: (batch, index of the first, how many) per batch.
        """
        batch = lane.queued[-1] if lane.queued else None
        slots: list[tuple[_Batch, int, int]] = []
        first = batch.count if batch is not None else 0  # where this call's records start in it
        for record, size in zip(records, sizes, strict=True):
            # our own cap (the topic's may be smaller), then aiokafka's count of a full batch
            if batch is None or (batch.count and batch.size + size > limit) or not batch.add(record, size):
                if batch is not None and batch.count > first:
                    slots.append((batch, first, batch.count - first))
                batch = _Batch(producer.create_batch())
                lane.queued.append(batch)
                if not batch.add(record, size):
                    raise PayloadTooLarge("A record does not fit in an empty Kafka batch.")
                first = 0
        if batch is not None and batch.count > first:
            slots.append((batch, first, batch.count - first))
        return slots

    def _hand_over(self, tp: TopicPartition, lane: _Lane) -> None:
        """Give the lane's next batch to aiokafka, or retire the lane when none waits."""
        if not lane.queued or self._closing:
            lane.busy = False
            if self._lanes.get(tp) is lane and not lane.queued:
                del self._lanes[tp]
            return
        lane.busy = True
        task = asyncio.get_running_loop().create_task(self._submit(tp, lane, lane.queued.popleft()))
        self._submits.add(task)
        task.add_done_callback(self._submits.discard)

    async def _submit(self, tp: TopicPartition, lane: _Lane, batch: _Batch) -> None:
        """Queue ``batch`` in aiokafka and settle its result when Kafka answers; then the next."""
        producer = self._producer
        handed_over = False  # aiokafka has the batch: a failure now is its verdict on it
        try:
            if producer is None:
                raise BackendUnavailable("The Kafka producer is not running.")
            deadline = asyncio.get_running_loop().time() + self._options.request_timeout
            queued = await self._send(producer, tp, batch, deadline)
            handed_over = True
            acked = await queued
            if acked.offset is None or acked.offset < 0:
                raise BackendError(f"Kafka acknowledged the records for {tp} without their offsets.")
            batch.result.set_result(acked.offset)
        except Exception as exc:
            self._after_failure(producer, exc, handed_over=handed_over)
            if not batch.result.done():
                batch.result.set_exception(exc)
        except BaseException:  # cancelled by stop()
            if not batch.result.done():
                batch.result.set_exception(
                    BackendUnavailable(
                        "The gateway is stopping before Kafka acknowledged the records; they may "
                        "still be written."
                    )
                )
            raise
        finally:
            self._hand_over(tp, lane)

    async def _send(self, producer: Any, tp: TopicPartition, batch: _Batch, deadline: float) -> Any:
        """Queue one batch; returns the future of its acknowledgement."""
        async with asyncio.timeout_at(deadline):
            # The producer keeps its own metadata; a partition added a moment ago may be
            # missing there (send_batch would then fail an assertion), so refresh it first.
            known = await producer.partitions_for(tp.topic)
            if tp.partition not in known:
                await producer.client.force_metadata_update()
                known = await producer.partitions_for(tp.topic)
                if tp.partition not in known:
                    raise PartitionNotFound(f"Partition {tp.partition} of topic {tp.topic!r} not found.")
            self._topics.add(tp.topic)
            return await producer.send_batch(batch.builder, tp.topic, partition=tp.partition)

    def _translated(self, exc: BaseException, tp: TopicPartition, what: str) -> GatewayError:
        if isinstance(exc, TimeoutError):
            return BackendUnavailable(
                f"Kafka did not take the records for {tp} within {self._options.request_timeout_ms} ms."
            )
        if isinstance(exc, AssertionError):  # aiokafka's check of the partition against its metadata
            return PartitionNotFound(f"Partition {tp.partition} of topic {tp.topic!r} not found.")
        if is_broken_producer(exc):  # refused, not written; the producer is being replaced
            return BackendUnavailable(
                f"Kafka refused the records for {tp} ({type(exc).__name__}): an earlier failure broke "
                "the producer's sequence; a new producer is starting, retry."
            )
        return translate(exc, what, topic=tp.topic, partition=tp.partition)

    def _after_failure(self, producer: Any, exc: BaseException, *, handed_over: bool) -> None:
        """Replace the producer when a failure may have broken its sequence numbers or killed it.

        With idempotence, any batch aiokafka gave up on (``handed_over``) qualifies: it retries
        every retriable error for ever, except a batch whose partition has no leader past the
        request timeout, which it fails with the sequence numbers it took, so the broker would
        refuse every later batch to the partition (OutOfOrderSequence). Otherwise any failure
        that is neither ours nor retriable: a cheap, rare reconnect beats telling the cases apart
        through aiokafka's internals.
        """
        if isinstance(exc, GatewayError | AssertionError):
            return
        gave_up = handed_over and self._options.idempotence
        if not gave_up and (isinstance(exc, TimeoutError) or is_retriable(exc)):
            return
        if self._replacing or producer is not self._producer:
            return
        log.warning("replacing the Kafka producer after %s: %s", type(exc).__name__, exc)
        self._replacing = True
        task = asyncio.get_running_loop().create_task(self._replace(producer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _replace(self, old: Any) -> None:
        try:
            new = self._new_producer()
            try:
                async with asyncio.timeout(self._options.request_timeout):
                    await new.start()
            except Exception as exc:
                log.error("a new Kafka producer did not start (%s); keeping the old one", exc)
                await _quietly_stop(new, self._options.request_timeout)
                return
            self._producer = new
            self._topics.clear()
        finally:
            self._replacing = False
        self._retire(old)


def _release_when_done(budget: ByteBudget, amount: int, results: list[asyncio.Future[int]]) -> None:
    """Return ``amount`` to ``budget`` once every one of ``results`` (all distinct) is settled."""
    left = len(results)

    def settled(_: asyncio.Future[int]) -> None:
        nonlocal left
        left -= 1
        if left == 0:
            budget.release(amount)

    for result in results:
        result.add_done_callback(settled)


async def _close(producer: Any) -> None:
    """aiokafka's ``stop()``: every batch it holds delivered or refused by Kafka, then closed."""
    try:
        await producer.stop()
    except Exception as exc:
        log.warning("closing a Kafka producer: %s", one_line(exc))


async def _quietly_stop(producer: Any, timeout: float) -> None:
    """Close a producer that did not start (it holds no batch), bounded by ``timeout``."""
    try:
        async with asyncio.timeout(timeout):
            await producer.stop()
    except Exception as exc:
        log.warning("closing a Kafka producer that did not start: %s", one_line(exc))
