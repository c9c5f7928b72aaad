"""``KafkaGroupOffsets``: consumer groups' committed offsets in Kafka's own group coordinator.

When the log is Kafka, a gateway group's committed offsets are the group's offsets in Kafka
(``__consumer_offsets``), so everything that reads Kafka's groups reads the gateway's:
``kafka-consumer-groups --describe``, lag exporters and autoscalers (Burrow, KEDA's Kafka
scaler), and a native consumer that joins the group later, which resumes where HTTP consumers
committed. The gateway commits as a *simple* group: OffsetCommit with generation -1 and no
member id, as Kafka's admin client and a consumer with manual assignment do. Kafka's group
coordinator takes such a commit while it holds no members of the group itself; while native
consumers are in the group (members Kafka knows), it refuses it (``UNKNOWN_MEMBER_ID``), and
the gateway answers ``IllegalState``: one group is coordinated by Kafka or by the gateway at a
time, never both.

Membership, generations and the commit fence stay with the gateway's ``Coordinator``
(``service.adapters.split_offsets`` puts the two together).

Each request goes to the group's coordinator broker (FindCoordinator, remembered per group until
a broker says it no longer is: ``NOT_COORDINATOR``, ``COORDINATOR_NOT_AVAILABLE``,
``COORDINATOR_LOAD_IN_PROGRESS`` make it look again and retry, within the request timeout).

Collaborators: ``ClusterClient`` (bounded requests, connections of its own), ``errors``.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

from aiokafka.protocol.admin import ListGroupsRequest
from aiokafka.protocol.commit import OffsetCommitRequest, OffsetFetchRequest
from aiokafka.protocol.coordination import FindCoordinatorRequest

from service.core.models import TopicPartition
from service.core.rules import valid_group, valid_offset_key
from service.errors import BackendUnavailable, GatewayError, IllegalState

from ..lifecycle import Lifecycle
from .cluster import ClusterClient
from .errors import for_code, start_failure
from .options import KafkaOptions, parse_bootstrap
from .security import client_options

GROUP_COORDINATOR: Final = 0  # FindCoordinator's key type for a consumer group
SIMPLE_GENERATION: Final = -1  # a commit from outside Kafka's group membership
NO_MEMBER: Final = ""
NO_OFFSET: Final = -1  # OffsetFetch's answer for a partition without a commit
DEFAULT_RETENTION: Final = -1  # the broker's offsets.retention.minutes
# Codes after which the group's coordinator is looked up again.
_MOVED: Final = frozenset({14, 15, 16})  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
# Codes that say Kafka holds members of the group (native consumers): it coordinates it now.
_KAFKA_MEMBERS: Final = frozenset(
    {22, 25, 27}
)  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS
# Kafka's consumer-group protocol types: "" for simple groups (the gateway's), "consumer" for
# groups native consumers joined; others (Connect's workers, say) keep no consumer offsets.
_CONSUMER_TYPES: Final = frozenset({"", "consumer"})
_RETRY_PAUSE_S: Final = 0.1
_LIST_TTL_S: Final = 2.0  # how long a listing of Kafka's groups is reused

T = TypeVar("T")


class KafkaGroupOffsets(Lifecycle):
    """Commits and reads committed offsets through Kafka's group coordinator.

    ``servers`` and ``options`` are the Kafka log's (``kafka://h:p[,h:p...]``): the same
    cluster, signed in alike, on connections of its own. Each call is bounded by the request
    timeout, retries included.
    """

    def __init__(self, servers: str | Sequence[str], options: KafkaOptions | None = None) -> None:
        listed = parse_bootstrap(servers) if isinstance(servers, str) else list(servers)
        if not listed:
            raise ValueError("KafkaGroupOffsets needs at least one bootstrap server")
        o = options or KafkaOptions()
        super().__init__()  # the start/stop state
        self._client = ClusterClient(
            listed,
            client_id=f"{o.client_id}-groups",
            connection_timeout_ms=o.request_timeout_ms,
            security=client_options(o.security),
        )
        self._timeout = o.request_timeout
        self._security = o.security.describe()
        self._coordinators: dict[str, int] = {}
        self._listed: tuple[float, frozenset[str]] | None = None

    async def _open(self) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                await self._client.start()
        except GatewayError:
            await self._client.close()
            raise
        except Exception as exc:
            await self._client.close()
            raise start_failure(
                exc,
                self._client.servers,
                idempotence=False,
                timeout_ms=int(self._timeout * 1000),
                security=self._security,
            ) from exc

    async def _close(self) -> None:
        await self._client.close()

    async def commit(self, group: str, entries: Sequence[tuple[TopicPartition, int]]) -> None:
        """OffsetCommit of ``entries`` for ``group`` (checked by the caller).

        Kafka writes the offsets of one request as one batch to the group's partition of
        ``__consumer_offsets``: all or none. A partition Kafka does not know (its topic deleted
        since the caller checked) is refused alone; that is ``PartitionNotFound`` here.
        """
        by_topic: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
        for tp, offset in entries:
            by_topic[tp.topic].append((tp.partition, offset, ""))
        request = OffsetCommitRequest(
            group, SIMPLE_GENERATION, NO_MEMBER, DEFAULT_RETENTION, list(by_topic.items())
        )
        what = f"committing offsets of group {group!r}"
        await self._ask(group, request, what, lambda response: _commit_answer(group, response, what))
        if self._listed is not None:  # Kafka lists the group from now on: so does this listing
            self._listed = (self._listed[0], self._listed[1] | {group})

    async def committed(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """OffsetFetch: the committed offsets of ``group`` (every one when ``partitions`` is None)."""
        if not valid_group(group):
            return {}
        wanted: list[tuple[str, list[int]]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in dict.fromkeys(partitions):
                if valid_offset_key(tp):
                    by_topic[tp.topic].append(tp.partition)
            if not by_topic:
                return {}
            wanted = list(by_topic.items())
        what = f"reading the committed offsets of group {group!r}"
        return await self._ask(
            group, OffsetFetchRequest(group, wanted), what, lambda r: _fetch_answer(r, what)
        )

    async def groups(self) -> frozenset[str]:
        """Kafka's consumer groups (the gateway's and native consumers'), listed at most every
        ``_LIST_TTL_S`` seconds: a leader's refresh asks for them often."""
        now = time.monotonic()
        if self._listed is not None and now - self._listed[0] < _LIST_TTL_S:
            return self._listed[1]
        what = "listing Kafka's consumer groups"
        request = ListGroupsRequest()

        async def on(node: int) -> list[Any]:
            response = await self._client.send(node, request, timeout=self._timeout, what=what)
            if error := for_code(response.error_code, what):
                raise error
            return list(response.groups)

        answers = await asyncio.gather(*(on(node) for node in self._client.broker_ids()))
        listed = frozenset(g for groups in answers for g, kind in groups if kind in _CONSUMER_TYPES)
        self._listed = (time.monotonic(), listed)
        return listed

    async def _ask(self, group: str, request: Any, what: str, answer: Callable[[Any], T]) -> T:
        """``answer`` of ``request`` sent to the group's coordinator; looked up again, and sent
        again, while the coordinator moves (``answer`` raises ``_Moved``) or a broker is gone."""
        self._require()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while True:
            try:
                node = await self._coordinator(group, what, deadline - loop.time())
                left = max(deadline - loop.time(), 0.001)
                return answer(await self._client.send(node, request, timeout=left, what=what))
            except _Moved:
                self._coordinators.pop(group, None)
                if loop.time() + _RETRY_PAUSE_S >= deadline:
                    raise BackendUnavailable(
                        f"Kafka's coordinator of group {group!r} kept moving while {what}; retry shortly."
                    ) from None
            except BackendUnavailable:
                self._coordinators.pop(group, None)  # a broker gone: its groups move
                if loop.time() + _RETRY_PAUSE_S >= deadline:
                    raise
            await asyncio.sleep(_RETRY_PAUSE_S)

    async def _coordinator(self, group: str, what: str, timeout: float) -> int:
        known = self._coordinators.get(group)
        if known is not None:
            return known
        if len(self._coordinators) > 10_000:  # a bound, not an LRU: forgetting costs one lookup
            self._coordinators.clear()
        request = FindCoordinatorRequest(group, GROUP_COORDINATOR)
        response = await self._client.send_any(request, timeout=max(timeout, 0.001), what=what)
        if response.error_code in _MOVED:
            raise BackendUnavailable(
                f"Kafka has no coordinator for group {group!r} right now while {what}; retry shortly."
            )
        if error := for_code(response.error_code, what):
            raise error
        self._coordinators[group] = response.coordinator_id
        return int(response.coordinator_id)

    def _require(self) -> None:
        if self._state != "started":
            raise BackendUnavailable("Kafka's group offsets are not connected.")


class _Moved(Exception):
    """The broker asked is not (or not yet) the group's coordinator: look it up again."""


def _commit_answer(group: str, response: Any, what: str) -> None:
    """Nothing, if OffsetCommit stored every offset; else what refused them."""
    refused = [
        (topic, partition, code)
        for topic, partitions in response.topics
        for partition, code in partitions
        if code
    ]
    if refused and all(code in _MOVED for _, _, code in refused):
        raise _Moved()
    for topic, partition, code in refused:
        if code in _KAFKA_MEMBERS:
            raise IllegalState(
                f"Kafka's group coordinator has members in group {group!r} (native Kafka consumers): "
                "while they are in the group it takes commits from them only. The offsets were not committed."
            )
        if error := for_code(code, what, topic=topic, partition=partition):
            raise error


def _fetch_answer(response: Any, what: str) -> dict[TopicPartition, int]:
    """The committed offsets in an OffsetFetch response (partitions without one left out)."""
    top = getattr(response, "error_code", 0)  # v2 and later
    if top in _MOVED:
        raise _Moved()
    if error := for_code(top, what):
        raise error
    found: dict[TopicPartition, int] = {}
    for topic, answers in response.topics:
        for partition, offset, _metadata, code in answers:
            if code in _MOVED:
                raise _Moved()
            if error := for_code(code, what, topic=topic, partition=partition):
                raise error
            if offset != NO_OFFSET:
                found[TopicPartition(topic, partition)] = offset
    return dict(sorted(found.items()))


__all__ = ["KafkaGroupOffsets"]
