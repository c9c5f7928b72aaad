"""``KafkaSource``: a Kafka cluster read with aiokafka from synchronous code (the planner and Spark tasks).

Each source owns one ``AIOKafkaConsumer`` without a group (nothing is
committed to Kafka) on a private event loop (``asyncio.Runner``), so a task can
yield record chunks to Spark between fetches without reading the whole range
into memory first. Offsets come from ListOffsets (earliest: the log start;
latest: the high watermark; by time: ``offset_for_timestamp``); a range is read by assign + seek and ends when
the consumer's position reaches the range end, so offsets Kafka skips (control
records, compacted gaps) never stall it.

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
import time
from collections.abc import Iterable, Iterator
from typing import Any, Final

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as KafkaTP

from service.adapters.kafka.cluster import ClusterClient
from service.adapters.kafka.errors import is_connection_failure, start_failure
from service.adapters.kafka.options import parse_bootstrap
from service.adapters.kafka.security import KafkaSecurity, client_options
from service.core.models import Record, TopicPartition

from .log_source import CHUNK_RECORDS
from .offsets import Bounds, OffsetRange

DEFAULT_TIMEOUT_S: Final = 30.0
CLIENT_ID: Final = "brokergate-spark"


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

    def _run(self, coro: Any) -> Any:
        """Run one consumer call on the private loop, bounded by the timeout."""
        self._started()
        assert self._runner is not None
        return self._runner.run(asyncio.wait_for(coro, self._timeout_s))

    def _started(self) -> AIOKafkaConsumer:
        if self._consumer is not None:
            return self._consumer
        runner = asyncio.Runner()
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
            runner.close()
            raise start_failure(
                self._why_not(exc, signed_in),
                ",".join(self.servers),
                idempotence=False,  # a consumer: no producer id is asked for
                timeout_ms=int(self._timeout_s * 1000),
                security=self.security.describe(),
            ) from exc
        except BaseException:
            runner.close()
            raise
        self._runner = runner
        return self._consumer

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

    def read(self, rng: OffsetRange) -> Iterator[list[Record]]:
        if rng.size == 0:
            return
        consumer = self._started()
        ktp = KafkaTP(rng.topic, rng.partition)

        async def assign() -> None:  # aiokafka creates futures here: it must run on the loop
            consumer.assign([ktp])
            consumer.seek(ktp, rng.start)

        self._run(assign())
        stalled_since = time.monotonic()
        last_position = -1
        while True:
            position: int = self._run(consumer.position(ktp))
            if position >= rng.end:
                return
            if position != last_position:
                stalled_since, last_position = time.monotonic(), position
            batch = self._run(consumer.getmany(ktp, timeout_ms=1000, max_records=CHUNK_RECORDS))
            chunk = [
                Record(m.offset, m.timestamp, m.key, m.value, tuple(m.headers))
                for m in batch.get(ktp, [])
                if rng.start <= m.offset < rng.end
            ]
            if chunk:
                yield chunk
            elif time.monotonic() - stalled_since > self._timeout_s:
                raise TimeoutError(
                    f"Kafka returned nothing for {rng.topic}-{rng.partition} at offset {position} "
                    f"(reading up to {rng.end}) for {self._timeout_s:.0f} s"
                )

    def close(self) -> None:
        runner, consumer = self._runner, self._consumer
        self._runner, self._consumer = None, None
        if runner is None:
            return
        try:
            if consumer is not None:
                runner.run(consumer.stop())
        finally:
            runner.close()
