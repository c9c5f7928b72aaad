"""``KafkaSource``: a Kafka cluster read with aiokafka from synchronous code (the planner and Spark tasks).

Each source runs its clients on a private event loop (``asyncio.Runner``), so a
task can yield record chunks to Spark between fetches without reading the whole
range into memory first. The planner's questions go to an ``AIOKafkaConsumer``
without a group (nothing is committed to Kafka): topics, partitions, and offsets
from ListOffsets (earliest: the log start; latest: the high watermark; by time:
``offset_for_timestamp``). A task's range is read as the gateway's Kafka log
reads: FetchRequests to the partition's leader through its ``ClusterClient``,
each response decoded straight into ``RecordColumns`` (``records.decode``: no
object per record, CRCs checked, control batches skipped), and the next fetch
starts past the last batch decoded, so offsets Kafka skips (transaction markers,
compacted gaps) never stall it. A range ends when that position reaches its end.

It signs in as the gateway does (``KafkaSecurity``, from ``credentials``): the
clients' TLS context and token provider are built where the source is opened,
in each task, never shipped. A broker that refuses it, or cannot be reached, is
one line naming the servers and the identity (the gateway's ``start_failure``);
aiokafka's consumer only logs why a bootstrap server refused it, so with
credentials in play the gateway's own ``ClusterClient`` asks once more, for the
reason (a refused password or certificate, not "unable to bootstrap").
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Iterable, Iterator
from typing import Any, Final

from aiokafka import AIOKafkaConsumer
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.structs import TopicPartition as KafkaTP

from service.adapters.kafka.cluster import ClusterClient
from service.adapters.kafka.errors import for_code, is_connection_failure, is_metadata_error, start_failure
from service.adapters.kafka.fetcher import OFFSET_OUT_OF_RANGE, READ_UNCOMMITTED
from service.adapters.kafka.metadata import TopicMetadata
from service.adapters.kafka.options import parse_bootstrap
from service.adapters.kafka.records import Decoded, decode
from service.adapters.kafka.security import KafkaSecurity, client_options
from service.core.models import RecordColumns, TopicPartition
from service.errors import BackendUnavailable

from .log_source import CHUNK_BYTES, CHUNK_RECORDS
from .offsets import Bounds, OffsetRange

DEFAULT_TIMEOUT_S: Final = 30.0
CLIENT_ID: Final = "brokergate-spark"
FETCH_WAIT_MS: Final = 100  # a range below the high watermark has its records: no long wait
RETRY_S: Final = 0.1  # after a leader moved or a broker did not answer, before asking again
METADATA_MAX_AGE_MS: Final = 60_000


class KafkaSource:
    """Topics, bounds and ranges of a Kafka cluster (``kafka://host:port[,host:port...]``)."""

    def __init__(
        self, url: str, *, security: KafkaSecurity | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.servers = parse_bootstrap(url)
        self.security = security or KafkaSecurity()
        self._timeout_s = timeout_s
        self._runner: asyncio.Runner | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._fetching: tuple[ClusterClient, TopicMetadata] | None = None

    def _run(self, coro: Any) -> Any:
        """Run one call on the private loop, bounded by the timeout."""
        return self._loop().run(asyncio.wait_for(coro, self._timeout_s))

    def _loop(self) -> asyncio.Runner:
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner

    def _started(self) -> AIOKafkaConsumer:
        if self._consumer is not None:
            return self._consumer
        runner = self._loop()
        signed_in = client_options(self.security)

        async def start() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.servers,
                client_id=CLIENT_ID,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",  # below the log start (retention): go to what is left
                isolation_level="read_uncommitted",
                request_timeout_ms=int(self._timeout_s * 1000),
                fetch_max_wait_ms=100,
                **signed_in,
            )
            try:
                await consumer.start()
            except BaseException:
                await consumer.stop()
                raise
            return consumer

        try:
            self._consumer = runner.run(asyncio.wait_for(start(), self._timeout_s))
        except Exception as exc:
            raise self._start_failure(exc, signed_in) from exc
        return self._consumer

    def _fetch_clients(self) -> tuple[ClusterClient, TopicMetadata]:
        """The low-level client and metadata a task's reads go through, started on first use."""
        if self._fetching is not None:
            return self._fetching
        signed_in = client_options(self.security)
        cluster = ClusterClient(
            self.servers,
            client_id=CLIENT_ID,
            connection_timeout_ms=int(self._timeout_s * 1000) + FETCH_WAIT_MS,
            security=signed_in,
        )
        try:
            self._run(cluster.start())
        except Exception as exc:
            self._run(cluster.close())
            raise self._start_failure(exc, signed_in) from exc
        self._fetching = (
            cluster,
            TopicMetadata(cluster, max_age_ms=METADATA_MAX_AGE_MS, timeout=self._timeout_s),
        )
        return self._fetching

    def _start_failure(self, failure: Exception, signed_in: dict[str, Any]) -> Exception:
        return start_failure(
            self._why_not(failure, signed_in),
            ",".join(self.servers),
            idempotence=False,  # a reader: no producer id is asked for
            timeout_ms=int(self._timeout_s * 1000),
            security=self.security.describe(),
        )

    def _why_not(self, failure: Exception, signed_in: dict[str, Any]) -> Exception:
        """Why the brokers refused the consumer's bootstrap, as the gateway's log words it: asked
        again by its ``ClusterClient`` when credentials are in play, else ``failure`` itself."""
        if not signed_in or not is_connection_failure(failure):
            return failure
        probe = ClusterClient(
            self.servers,
            client_id=CLIENT_ID,
            connection_timeout_ms=int(self._timeout_s * 1000),
            security=signed_in,
        )

        async def ask() -> Exception:
            try:
                await probe.start()
            except Exception as exc:
                return exc
            finally:
                await probe.close()
            return failure  # it answered this time: the first failure stands

        with asyncio.Runner() as runner:
            try:
                return runner.run(asyncio.wait_for(ask(), self._timeout_s))
            except TimeoutError:
                return failure

    def topics(self) -> list[str]:
        names: set[str] = self._run(self._started().topics())
        return sorted(t for t in names if not t.startswith("__"))

    def partition_count(self, topic: str) -> int:
        # Fresh metadata, asked for each time: the consumer's own cluster view is refreshed only
        # every few minutes, and aiokafka's ``topics()`` fetches a new view without keeping it, so
        # ``partitions_for_topic`` would miss a topic or partitions created since the source opened.
        cluster = self._run(self._started()._client.fetch_all_metadata())
        partitions = cluster.partitions_for_topic(topic)
        if not partitions:
            raise FileNotFoundError(f"topic {topic!r} does not exist in Kafka at {','.join(self.servers)}")
        return len(partitions)

    def bounds(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Bounds]:
        wanted = sorted(set(tps))
        if not wanted:
            return {}
        consumer = self._started()
        kafka_tps = [KafkaTP(tp.topic, tp.partition) for tp in wanted]
        starts = self._run(consumer.beginning_offsets(kafka_tps))
        ends = self._run(consumer.end_offsets(kafka_tps))
        return {tp: (int(starts[ktp]), int(ends[ktp])) for tp, ktp in zip(wanted, kafka_tps, strict=True)}

    def offset_for_timestamp(self, tp: TopicPartition, at_ms: int) -> int | None:
        ktp = KafkaTP(tp.topic, tp.partition)
        found = self._run(self._started().offsets_for_times({ktp: at_ms}))  # ListOffsets by time
        answer = found.get(ktp)
        return None if answer is None else int(answer.offset)

    def read(self, rng: OffsetRange) -> Iterator[RecordColumns]:
        if rng.size == 0:
            return
        cluster, metadata = self._fetch_clients()
        tp = rng.tp
        position = rng.start
        stalled_since = time.monotonic()
        while position < rng.end:
            why = ""
            try:
                decoded = self._run(self._fetch(cluster, metadata, tp, position))
            except BackendUnavailable as exc:  # a broker down, a leader moving: ask again
                decoded, why = Decoded(RecordColumns.empty(), position), str(exc)
            if decoded is None:  # refused: the position is outside the log now
                decoded = Decoded(RecordColumns.empty(), self._moved_to(tp, position, rng.end))
            records = decoded.records
            if len(records) and records.offsets[-1] >= rng.end:
                records = records[: bisect.bisect_left(records.offsets, rng.end)]
            for at in range(0, len(records), CHUNK_RECORDS):
                yield records[at : at + CHUNK_RECORDS]
            if decoded.next_offset > position:
                position, stalled_since = decoded.next_offset, time.monotonic()
                continue
            if time.monotonic() - stalled_since > self._timeout_s:
                raise TimeoutError(
                    f"Kafka returned nothing for {rng.topic}-{rng.partition} at offset {position} "
                    f"(reading up to {rng.end}) for {self._timeout_s:.0f} s" + (f": {why}" if why else "")
                )
            time.sleep(RETRY_S)

    async def _fetch(
        self, cluster: ClusterClient, metadata: TopicMetadata, tp: TopicPartition, position: int
    ) -> Decoded | None:
        """One FetchRequest at ``position`` to ``tp``'s leader, decoded; nothing decoded (the
        position as it was) when the leader moved; None when Kafka refused the position as
        outside the log (OFFSET_OUT_OF_RANGE)."""
        nothing = Decoded(RecordColumns.empty(), position)
        info = await metadata.partition(tp.topic, tp.partition)
        if info.leader < 0:
            metadata.invalidate(tp.topic)
            return nothing
        what = f"fetching {tp.topic}-{tp.partition} from broker {info.leader}"
        wanted = [(tp.topic, [(tp.partition, position, CHUNK_BYTES)])]
        request = FetchRequest(FETCH_WAIT_MS, 1, CHUNK_BYTES, READ_UNCOMMITTED, wanted)
        response = await cluster.send(info.leader, request, timeout=self._timeout_s, what=what)
        if error := for_code(getattr(response, "error_code", 0), what):
            raise error
        for topic, partitions in response.topics:
            for entry in partitions:
                if topic != tp.topic or entry[0] != tp.partition:
                    continue
                code = entry[1]
                if code == 0:
                    return decode(entry[-1], position)
                if code == OFFSET_OUT_OF_RANGE:
                    return None
                if is_metadata_error(code):
                    metadata.invalidate(tp.topic)
                    return nothing
                error = for_code(code, what, topic=tp.topic, partition=tp.partition)
                assert error is not None
                raise error
        return nothing

    def _moved_to(self, tp: TopicPartition, position: int, end: int) -> int:
        """Where a read refused at ``position`` goes on: the log start when retention removed
        the records there (the reader reports the loss, ``stream_source.checked``); an error when
        the log ends before the range (the topic was made again since planning)."""
        start, high_watermark = self.bounds([tp])[tp]
        if position < start:
            return start
        raise ValueError(
            f"{tp.topic}-{tp.partition} ends at offset {high_watermark} now, before the planned "
            f"range's end {end} (was the topic deleted and created again?)"
        )

    def close(self) -> None:
        runner, consumer, fetching = self._runner, self._consumer, self._fetching
        self._runner, self._consumer, self._fetching = None, None, None
        if runner is None:
            return
        try:
            if fetching is not None:
                runner.run(fetching[0].close())
            if consumer is not None:
                runner.run(consumer.stop())
        finally:
            runner.close()
