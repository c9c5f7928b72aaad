"""``KafkaCommitted``: consumer groups and their committed offsets in a Kafka cluster's group coordinator.

A gateway on a Kafka log keeps its groups' committed offsets in Kafka's group
coordinator (``service.adapters.kafka.group_offsets``), beside those native
consumers commit to the same groups. This source reads them there with the
gateway's own client (``KafkaGroupOffsets``, signed in with the jobs'
credentials) on a private event loop, so the planner's synchronous code can
ask. It reads Kafka alone; ``committed.open_committed`` adds what the gateway's
coordinator kept from before the offsets moved to Kafka.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final, TypeVar

from service.adapters.kafka.group_offsets import KafkaGroupOffsets
from service.adapters.kafka.options import KafkaOptions
from service.adapters.kafka.security import KafkaSecurity
from service.core.models import TopicPartition

if TYPE_CHECKING:
    from .credentials import BackendCredentials

DEFAULT_TIMEOUT_MS: Final = 30_000
CLIENT_ID: Final = "brokergate-spark"

T = TypeVar("T")


class KafkaCommitted:
    """Kafka's consumer groups and their committed offsets (``kafka://host:port[,...]``).

    Connects at the first question; ``close()`` ends the connections.
    """

    def __init__(
        self, url: str, credentials: BackendCredentials | None = None, *, timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> None:
        security = credentials.kafka if credentials is not None else KafkaSecurity()
        options = KafkaOptions(client_id=CLIENT_ID, request_timeout_ms=timeout_ms, security=security)
        self._offsets = KafkaGroupOffsets(url, options)  # ValueError for a malformed URL
        self._runner: asyncio.Runner | None = None

    def _run(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run one call of the offsets client on the private loop, starting it first if need be
        (``call`` makes its coroutine then, so a client that cannot start leaves none behind)."""
        if self._runner is None:
            runner = asyncio.Runner()
            try:
                runner.run(self._offsets.start())  # bounded by the request timeout
            except BaseException:
                runner.close()
                raise
            self._runner = runner
        return self._runner.run(_awaited(call))

    def groups(self) -> list[str]:
        """Kafka's consumer groups: the gateway's and native consumers'."""
        return sorted(self._run(self._offsets.groups))

    def committed(self, group: str) -> dict[TopicPartition, int]:
        return self._run(lambda: self._offsets.committed(group))

    def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            try:
                runner.run(self._offsets.stop())
            finally:
                runner.close()


async def _awaited(call: Callable[[], Awaitable[T]]) -> T:
    return await call()
