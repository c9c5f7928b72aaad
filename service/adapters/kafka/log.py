"""``KafkaLog``: the ``Log`` port over a real Kafka cluster (aiokafka).

The façade: it validates input the way the embedded log does (topic names,
partition counts, record types) before anything is sent, keeps the
start/stop lifecycle, makes admin operations run to the end even if the
caller goes away, and guarantees that only ``service.errors`` leave it.
Replication, leaders, failover and retention are Kafka's.

Collaborators, one job each:
``ClusterClient`` (bounded requests over aiokafka's low-level client),
``TopicMetadata`` (topics, leaders and configs, cached briefly),
``TopicAdmin`` (create/delete/grow, via ``AIOKafkaAdminClient``),
``RecordAppender`` (the shared, bounded, idempotent producer),
``Fetcher`` + ``ReadAhead`` (stateless long-poll fetches),
``OffsetLookup`` (ListOffsets).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Final

from service.core.models import Broker, NewRecord, PartitionData, TopicInfo, TopicPartition
from service.core.rules import (
    check_partition_count,
    check_partition_growth,
    check_replication_factor,
    check_topic,
)
from service.errors import (
    BackendUnavailable,
    GatewayError,
    InvalidPayload,
    InvalidTopicConfig,
    PartitionNotFound,
    TopicNotFound,
)

from ..lifecycle import Lifecycle
from ..tasks import uncancellable
from .admin import TopicAdmin
from .cluster import ClusterClient
from .errors import one_line, start_failure, translate
from .fetcher import Fetcher
from .metadata import TopicMetadata
from .offsets import OffsetLookup
from .options import KafkaOptions, parse_bootstrap
from .producer import RecordAppender
from .readahead import ReadAhead
from .security import client_options

log = logging.getLogger(__name__)

READY_POLL_S: Final = 0.05  # how often an admin operation looks whether the cluster shows its effect
MAX_MESSAGE_BYTES: Final = "max.message.bytes"
CLEANUP_POLICY: Final = "cleanup.policy"
MIN_INSYNC_REPLICAS: Final = "min.insync.replicas"
DIAGNOSIS_S: Final = 1.0  # what a refused write may add to find out why it was refused


class KafkaLog(Lifecycle):
    """Topics and records in a Kafka cluster reached at ``servers`` (``kafka://h:p[,h:p...]``).

    ``start()`` connects (bounded by the request timeout) and fails with
    ``BackendUnavailable`` naming the servers when the cluster cannot be
    reached; ``stop()`` flushes the producer and is idempotent. Also usable as
    ``async with KafkaLog(url) as log:``. Not restartable: once stopped, it
    stays stopped (a new instance connects again).
    """

    restartable = False

    def __init__(self, servers: str | Sequence[str], options: KafkaOptions | None = None) -> None:
        self._servers = parse_bootstrap(servers) if isinstance(servers, str) else list(servers)
        if not self._servers:
            raise ValueError("KafkaLog needs at least one bootstrap server")
        self._options = options or KafkaOptions()
        o = self._options
        timeout = o.request_timeout
        # built once (TLS files loaded, token file read) and shared by every client below
        security = client_options(o.security)
        self._cluster = ClusterClient(
            self._servers,
            client_id=o.client_id,
            # a fetch may wait fetch_max_wait_ms at the broker: the socket must not give up first
            connection_timeout_ms=o.request_timeout_ms + o.fetch_max_wait_ms,
            security=security,
        )
        self._admin = TopicAdmin(
            self._servers, client_id=o.client_id, request_timeout_ms=o.request_timeout_ms, security=security
        )
        self._metadata = TopicMetadata(self._cluster, max_age_ms=o.metadata_max_age_ms, timeout=timeout)
        self._offsets = OffsetLookup(self._cluster, self._metadata, timeout=timeout)
        self._readahead = ReadAhead(o.readahead_bytes)
        self._fetcher = Fetcher(
            self._cluster,
            self._metadata,
            self._offsets,
            self._readahead,
            request_timeout=timeout,
            max_wait_slice_ms=o.fetch_max_wait_ms,
            fetch_bytes=o.fetch_bytes,
        )
        self._appender = RecordAppender(self._servers, o, security=security)
        super().__init__()  # the start/stop state
        self._cluster_id: str | None = None

    @property
    def servers(self) -> str:
        return ",".join(self._servers)

    @property
    def options(self) -> KafkaOptions:
        return self._options

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        """The cluster's own id (Metadata v2+), learnt at start.

        Before that (and for brokers too old to report one), an id derived from
        the bootstrap servers: a property must not fail, ``isinstance`` checks
        against the ``Log`` protocol read it.
        """
        return self._cluster_id or self._derived_cluster_id()

    async def _open(self) -> None:
        """Connect (bounded by the request timeout); ``BackendUnavailable`` naming the servers if not."""
        try:
            async with asyncio.timeout(self._options.request_timeout):
                await self._cluster.start()
                view = await self._metadata.cluster()
                await self._admin.start()
                await self._appender.start()
        except BaseException as exc:
            await self._close_clients()
            if not isinstance(exc, Exception):
                raise
            raise start_failure(
                exc,
                self.servers,
                idempotence=self._options.idempotence,
                timeout_ms=self._options.request_timeout_ms,
                security=self._options.security.describe(),
            ) from exc
        self._cluster_id = view.cluster_id or self._derived_cluster_id()
        log.info(
            "kafka log connected to %s: cluster %s, %d broker(s)",
            self.servers,
            self._cluster_id,
            len(view.brokers),
        )

    def _derived_cluster_id(self) -> str:
        """For brokers too old to report one (Metadata < v2): stable for the same servers."""
        return "kafka-" + hashlib.sha256(self.servers.encode()).hexdigest()[:16]

    async def _close(self) -> None:
        """Flush the producer (bounded), close every connection."""
        try:
            await self._close_clients()
        finally:
            self._readahead.clear()
            self._metadata.invalidate()

    async def _close_clients(self) -> None:
        for close in (self._fetcher.close, self._appender.stop, self._admin.close, self._cluster.close):
            try:
                await close()
            except Exception as exc:
                log.error("closing the kafka log: %s", one_line(exc))

    def _require_started(self) -> None:
        if self._state != "started":
            raise BackendUnavailable(f"The Kafka log is not running ({self._state}).")

    @asynccontextmanager
    async def _guard(self, what: str, topic: str | None = None) -> AsyncIterator[None]:
        """The boundary: whatever escapes a collaborator leaves as a ``GatewayError``."""
        self._require_started()
        try:
            yield
        except (GatewayError, asyncio.CancelledError):
            raise
        except Exception as exc:
            raise translate(exc, what, topic=topic) from exc

    # --- metadata -----------------------------------------------------------------------

    async def brokers(self) -> list[Broker]:
        async with self._guard("listing brokers"):
            return (await self._metadata.cluster()).brokers

    async def list_topics(self) -> list[str]:
        async with self._guard("listing topics"):
            return await self._metadata.topic_names()

    async def describe_topic(self, topic: str) -> TopicInfo:
        check_topic(topic)
        async with self._guard(f"describing topic {topic!r}", topic):
            return await self._metadata.describe(topic)

    async def create_topic(
        self, topic: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> TopicInfo:
        check_topic(topic)
        check_partition_count(partitions)
        check_replication_factor(replication_factor)
        for key, value in configs.items():
            if not isinstance(key, str) or not key or not isinstance(value, str):
                raise InvalidTopicConfig(
                    f"Invalid topic config {key!r}={value!r}: names and values are text."
                )
        async with self._guard(f"creating topic {topic!r}", topic):
            return await uncancellable(
                self._create_topic(topic, partitions, replication_factor, dict(configs))
            )

    def _deadline(self) -> float:
        """When an admin operation that starts now must be done (one request timeout, in all)."""
        return asyncio.get_running_loop().time() + self._options.request_timeout

    @staticmethod
    def _left(deadline: float) -> float:
        return max(deadline - asyncio.get_running_loop().time(), 0.001)

    async def _create_topic(
        self, topic: str, partitions: int, replication: int, configs: dict[str, str]
    ) -> TopicInfo:
        deadline = self._deadline()
        async with asyncio.timeout_at(deadline):
            # -1 is sent as it is: the controller applies its default.replication.factor, which is
            # the one that counts (a broker's own value is not, and Kafka 5.0 ignores it).
            try:
                await self._admin.create(
                    topic, partitions, replication, configs, timeout=self._left(deadline)
                )
            finally:
                self._metadata.invalidate(topic)
        return await self._until_ready(topic, lambda info: len(info.partitions) >= partitions, deadline)

    async def _until_ready(
        self, topic: str, ready: Callable[[TopicInfo], bool], deadline: float
    ) -> TopicInfo:
        """Describe ``topic`` until the cluster shows what was just done, or ``deadline`` passes.

        The controller has done it already; this only spares the caller a
        describe that does not show it yet (brokers learn of it a moment later).
        """
        info: TopicInfo | None = None
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    try:
                        info = await self._metadata.fresh(topic)
                        if ready(info) and all(p.leader >= 0 for p in info.partitions):
                            return info
                    except (TopicNotFound, BackendUnavailable):
                        pass  # not visible yet
                    await asyncio.sleep(READY_POLL_S)
        except TimeoutError:
            if info is not None:
                return info
            raise BackendUnavailable(f"Kafka did not show the change to {topic!r} in time.") from None

    async def delete_topic(self, topic: str) -> None:
        check_topic(topic)
        async with self._guard(f"deleting topic {topic!r}", topic):
            await uncancellable(self._delete_topic(topic))

    async def _delete_topic(self, topic: str) -> None:
        deadline = self._deadline()
        try:
            await self._admin.delete(topic, timeout=self._left(deadline))
        finally:
            self._metadata.invalidate(topic)
            self._readahead.drop_topic(topic)
            self._appender.forget_topic(topic)
        # Kafka deletes in the background; wait (bounded) so that a create right after works.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(deadline):
                while True:
                    try:
                        await self._metadata.fresh(topic)
                    except TopicNotFound:
                        return
                    except BackendUnavailable:
                        pass
                    await asyncio.sleep(READY_POLL_S)

    async def add_partitions(self, topic: str, total: int) -> TopicInfo:
        check_topic(topic)
        async with self._guard(f"adding partitions to {topic!r}", topic):
            return await uncancellable(self._add_partitions(topic, total))

    async def _add_partitions(self, topic: str, total: int) -> TopicInfo:
        deadline = self._deadline()
        async with asyncio.timeout_at(deadline):
            check_partition_growth(topic, len((await self._metadata.fresh(topic)).partitions), total)
            try:
                await self._admin.grow(topic, total, timeout=self._left(deadline))
            finally:
                self._metadata.invalidate(topic)
        return await self._until_ready(topic, lambda info: len(info.partitions) >= total, deadline)

    # --- records ------------------------------------------------------------------------

    async def append(self, tp: TopicPartition, records: Sequence[NewRecord]) -> Sequence[int]:
        """Append as few Kafka batches as possible; each record's offset, in order."""
        check_topic(tp.topic)
        async with self._guard(f"appending to {tp}", tp.topic):
            info = await self._metadata.describe(tp.topic)
            if not 0 <= tp.partition < len(info.partitions):
                raise PartitionNotFound(f"Partition {tp.partition} of topic {tp.topic!r} not found.")
            if not records:
                return []
            record_limit = _int_config(info.configs, MAX_MESSAGE_BYTES)
            if "compact" in info.configs.get(CLEANUP_POLICY, "") and any(r.key is None for r in records):
                raise InvalidPayload(f"Topic {tp.topic!r} is compacted: every record needs a key.")
            batch_limit = min(self._options.batch_bytes, record_limit or self._options.batch_bytes)
            try:
                return await self._appender.append(
                    tp, records, batch_limit=batch_limit, record_limit=record_limit
                )
            except (TopicNotFound, PartitionNotFound):
                self._metadata.invalidate(tp.topic)  # maybe deleted or grown behind our back
                raise
            except BackendUnavailable as exc:
                self._metadata.invalidate(tp.topic)  # maybe its leader moved
                raise await self._short_of_replicas(tp, exc) from exc

    async def _short_of_replicas(self, tp: TopicPartition, failure: BackendUnavailable) -> BackendUnavailable:
        """Why ``tp`` did not acknowledge in time, when it is that too few replicas are in sync.

        The producer retries NOT_ENOUGH_REPLICAS until the request timeout without saying so, and
        a client told only "not acknowledged in time" cannot tell a broker that is slow from a
        partition that refuses every write until a replica catches up. A fresh look at the
        partition (bounded) tells; if it cannot be had, ``failure`` stands.
        """
        try:
            async with asyncio.timeout(min(DIAGNOSIS_S, self._options.request_timeout)):
                info = await self._metadata.fresh(tp.topic)
        except (GatewayError, TimeoutError):
            return failure
        needed = _int_config(info.configs, MIN_INSYNC_REPLICAS)
        if needed is None or not 0 <= tp.partition < len(info.partitions):
            return failure
        in_sync = info.partitions[tp.partition].in_sync
        if len(in_sync) >= needed:
            return failure
        brokers = ", ".join(str(b) for b in in_sync) or "none"
        return BackendUnavailable(
            f"Not enough in-sync replicas for {tp}: {len(in_sync)} in sync (brokers: {brokers}), "
            f"min.insync.replicas is {needed}; Kafka refuses acks=all writes until more replicas "
            "catch up. The records were not acknowledged; they may still be written once they do.",
            retry_after=failure.retry_after,
        )

    async def fetch(
        self,
        positions: Mapping[TopicPartition, int],
        *,
        max_bytes: int,
        max_wait_ms: int,
        min_bytes: int = 1,
        max_records: int | None = None,
    ) -> dict[TopicPartition, PartitionData]:
        """Read from every position; long-poll until ``min_bytes`` arrive or ``max_wait_ms`` passes.

        Topic names are not checked here: a fetch reads only partitions the core
        has already resolved, and a name Kafka does not know comes back as not found.
        """
        async with self._guard("fetching records"):
            return await self._fetcher.fetch(
                positions,
                max_bytes=max_bytes,
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_records=max_records,
            )

    async def offsets(self, tp: TopicPartition) -> tuple[int, int]:
        check_topic(tp.topic)
        async with self._guard(f"listing offsets of {tp}", tp.topic):
            return await self._offsets.bounds(tp)

    async def offset_for_timestamp(self, tp: TopicPartition, timestamp_ms: int) -> int | None:
        check_topic(tp.topic)
        async with self._guard(f"looking up a timestamp in {tp}", tp.topic):
            return await self._offsets.for_timestamp(tp, timestamp_ms)


def _int_config(configs: Mapping[str, str], key: str) -> int | None:
    value = configs.get(key, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None
