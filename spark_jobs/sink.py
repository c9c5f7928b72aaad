"""The ``brokergate`` sink: DataFrames written into topics through a gateway, exactly once.

    df.write.format("brokergate").option("gateway", "http://127.0.0.1:8082").option("topic", "out").save()
    df.writeStream.format("brokergate").option("gateway", url).option("topic", "out") \\
        .option("checkpointLocation", "./out-checkpoint").start()

Each task sends its rows (``sink_records``) as v2 produce requests of at most
``maxRecordsPerRequest`` records and about ``maxBytesPerRequest`` bytes, one after another, so a
partition's records keep the task's order. Every request carries an ``Idempotency-Key`` made of
where it stands: the write, the micro-batch, the task's partition and the request's number in the
task (``request_key``). A task Spark runs again (a failure, a lost executor), and a micro-batch a
restarted query runs again because its commit was never written (``kill -9`` of the driver), send
the same requests under the same keys, and the gateway answers the ones it stored with their first
response instead of storing them twice. So the topic holds each row once, as long as the query
gives a micro-batch's partitions the same rows in the same order when it runs again (Spark's own
sources and deterministic transformations do) and the retry comes within the gateway's
idempotency window (24 hours by default). A request whose key was used for other records fails the
task and says so, rather than write them twice or drop them.

A stream's write is named by its query's id, which its checkpoint keeps across restarts; a batch
write's by a random id drawn on the driver, or by ``writeId``, which makes running the whole job
again, with the same input, write nothing twice.

Transient failures (the gateway unreachable, 5xx, 429, a partition's retriable error) are retried
under the same key, with back-off, for up to ``deliveryTimeoutMs``; records a partition's error left
unwritten are sent again under a key of their own (``…/r<n>``), so a retry of the task replays that
too. Anything else (a record the gateway refuses, an ACL) fails the task with the gateway's words.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from service.client import ClientError, GatewayClient
from service.client.http import data_type, url_path

from .offsets import OptionError
from .sink_options import SinkOptions
from .sink_records import Columns, Outgoing, body

logger = logging.getLogger(__name__)

RETRIABLE_STATUS: Final = frozenset({0, 408, 429, 500, 502, 503, 504})
RETRIABLE_RECORD: Final = 50003  # a partition's error worth retrying (the backend's, retriable)
_BACKOFF_FIRST_S: Final = 0.1
_BACKOFF_MAX_S: Final = 5.0
# Spark's local properties naming a streaming query and its micro-batch, as Spark sets them.
_QUERY_ID: Final = "sql.streaming.queryId"
_BATCH_ID: Final = "streaming.sql.batchId"


class SinkError(RuntimeError):
    """A write the gateway refused, or that could not be delivered in time."""


@dataclass
class SinkCommit(WriterCommitMessage):
    """What one task did: records stored now, and records a retry found already stored."""

    partition: int
    records: int = 0
    replayed: int = 0
    requests: int = 0


def request_key(write_id: str, batch: int, partition: int, number: int) -> str:
    """The ``Idempotency-Key`` of a task's ``number``-th request (at most 255 characters)."""
    return f"spark/{write_id}/{batch}/{partition}/{number}"


@dataclass
class _TaskWrite:
    """One task's requests, cut, keyed and sent in order."""

    options: SinkOptions
    write_id: str
    batch: int
    partition: int
    client: GatewayClient
    done: SinkCommit = field(init=False)
    _number: int = 0
    _schema_ids: dict[str, dict[str, int]] = field(default_factory=dict)  # by topic, by side

    def __post_init__(self) -> None:
        self.done = SinkCommit(self.partition)

    def run(self, outgoing: Iterable[Outgoing]) -> SinkCommit:
        pending: dict[str, list[Any]] = {}  # by topic: [its records' texts, their bytes]
        max_records, max_bytes = self.options.max_records, self.options.max_bytes
        for topic, text in outgoing:
            held = pending.get(topic)
            if held is None:
                held = pending[topic] = [[], 0]
            records = held[0]
            records.append(text)
            held[1] += len(text) + 1
            if len(records) >= max_records or held[1] >= max_bytes:
                del pending[topic]
                self._send(topic, records)
        for topic, (records, _) in pending.items():
            self._send(topic, records)
        return self.done

    def _send(self, topic: str, records: list[str]) -> None:
        base = key = request_key(self.write_id, self.batch, self.partition, self._number)
        self._number += 1
        attempt = 0
        while records:
            answer, replayed = self._post(topic, records, key)
            failed = self._check(topic, records, answer)
            written = len(records) - len(failed)
            self.done.requests += 1
            if replayed:
                self.done.replayed += written
            else:
                self.done.records += written
            attempt += 1
            records, key = failed, f"{base}/r{attempt}"
            if records:
                time.sleep(_backoff(attempt))

    def _post(self, topic: str, records: list[str], key: str) -> tuple[dict[str, Any], bool]:
        content = body(records, self.options, self._schema_ids.get(topic, {}))
        headers = {"Content-Type": data_type(self.options.format), "Idempotency-Key": key}
        path = url_path("topics", topic)
        deadline = time.monotonic() + self.options.delivery_timeout_ms / 1000
        attempt = 0
        while True:
            try:
                response = self.client.send("POST", path, content=content, headers=headers)
            except ClientError as exc:
                attempt += 1
                if exc.status in RETRIABLE_STATUS and time.monotonic() + _backoff(attempt) < deadline:
                    time.sleep(_backoff(attempt))
                    continue
                raise SinkError(self._refused(topic, exc)) from None
            answer = response.json()
            return answer, response.headers.get("Idempotency-Replayed") == "true"

    def _check(self, topic: str, records: list[str], answer: dict[str, Any]) -> list[str]:
        """The records a retriable partition error left unwritten; ``SinkError`` for any other error."""
        ids = self._schema_ids.setdefault(topic, {})
        for side in ("key", "value"):
            if answer.get(f"{side}_schema_id") is not None:
                ids[side] = int(answer[f"{side}_schema_id"])
        failed: list[str] = []
        for record, offset in zip(records, answer["offsets"], strict=True):
            code = offset.get("error_code")
            if code is None:
                continue
            if code != RETRIABLE_RECORD:
                raise SinkError(f"{topic}: a record was not written: {offset.get('error')} (error {code})")
            failed.append(record)
        return failed

    def _refused(self, topic: str, exc: ClientError) -> str:
        where = f"writing to {topic} through {self.client.url}"
        if exc.status == 422 and "Idempotency-Key" in exc.message:
            return (
                f"{where}: micro-batch {self.batch}, task {self.partition} sends other records than "
                "when it ran before, so they cannot be told apart from those already written. The "
                "sink writes exactly once a query that gives each micro-batch's partitions the same "
                "rows again, with the same maxRecordsPerRequest and maxBytesPerRequest; start the "
                "query on a new checkpoint (or a batch write with a new writeId) to write these."
            )
        if exc.status == 0:
            return f"{where}: {exc.message} (gave up after deliveryTimeoutMs)"
        return f"{where}: the gateway answered {exc.status} (error {exc.error_code}): {exc.message}"


def _backoff(attempt: int) -> float:
    return float(min(_BACKOFF_MAX_S, _BACKOFF_FIRST_S * 2 ** (attempt - 1)))


def _write(
    options: SinkOptions, columns: Columns, write_id: str, batch: int, batches: Iterator[pa.RecordBatch]
) -> SinkCommit:
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    timeout_s = min(60.0, options.delivery_timeout_ms / 1000)
    with options.gateway.client(timeout_s) as client:
        task = _TaskWrite(options, write_id, batch, partition, client)
        return task.run(record for b in batches for record in columns.records(b))


def _summary(messages: Iterable[WriterCommitMessage | None]) -> tuple[int, int]:
    done = [m for m in messages if isinstance(m, SinkCommit)]
    return sum(m.records for m in done), sum(m.replayed for m in done)


class BrokergateWriter(DataSourceArrowWriter):
    """``df.write.format("brokergate")``: one write, named by ``writeId`` or an id drawn now."""

    def __init__(self, options: SinkOptions, columns: Columns) -> None:
        self.options, self.columns = options, columns
        # Drawn on the driver, then pickled into every task: a retried task sends the same keys.
        self.write_id = options.write_id or uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        return _write(self.options, self.columns, self.write_id, 0, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        written, replayed = _summary(messages)
        logger.info("write %s: %d records written, %d already there", self.write_id, written, replayed)


class BrokergateStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("brokergate")``: each micro-batch's requests keyed by the query's id
    (kept in its checkpoint) and the micro-batch's."""

    def __init__(self, options: SinkOptions, columns: Columns) -> None:
        self.options, self.columns = options, columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommit:
        context = TaskContext.get()
        query = context.getLocalProperty(_QUERY_ID) if context is not None else None
        batch = context.getLocalProperty(_BATCH_ID) if context is not None else None
        if query is None or batch is None:
            raise SinkError("a streaming write ran outside a streaming query (no query or batch id)")
        return _write(self.options, self.columns, query, int(batch), iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        written, replayed = _summary(messages)
        logger.info("micro-batch %d: %d records written, %d already there", batchId, written, replayed)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        written, replayed = _summary(messages)
        logger.warning(
            "micro-batch %d failed after writing %d records; running it again writes the rest",
            batchId,
            written + replayed,
        )


def batch_writer(options: Mapping[str, str], schema: StructType, *, overwrite: bool) -> BrokergateWriter:
    """``df.write``'s writer, its options and columns checked now. A topic is only ever appended
    to: ``overwrite`` mode is refused, as Spark's Kafka sink refuses it."""
    if overwrite:
        raise OptionError("mode overwrite: records are appended to a topic, never replaced; use append")
    parsed = SinkOptions.parse(options)
    return BrokergateWriter(parsed, Columns.check(schema, parsed))


def stream_writer(options: Mapping[str, str], schema: StructType) -> BrokergateStreamWriter:
    """``writeStream``'s writer, its options and columns checked now. In ``complete`` mode it
    writes the whole result each micro-batch, as Spark's Kafka sink does."""
    parsed = SinkOptions.parse(options, stream=True)
    return BrokergateStreamWriter(parsed, Columns.check(schema, parsed))
