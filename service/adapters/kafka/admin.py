"""``TopicAdmin``: topic administration through ``aiokafka.admin.AIOKafkaAdminClient``.

Create, delete and grow topics, each bounded by a
deadline and with the per-topic error codes of Kafka's responses translated
(``errors.for_code``): an existing topic is ``TopicExists``, a refused
partition count, replication factor or config is ``InvalidTopicConfig`` with
the broker's own message. The admin client sends create/delete/grow to the
controller, as Kafka requires.

Used by ``KafkaLog``. Configs are read by ``TopicMetadata``, through any broker that answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic

from service.errors import BackendUnavailable

from .errors import for_code, translate

T = TypeVar("T")


class TopicAdmin:
    """Topic admin requests with deadlines; one ``AIOKafkaAdminClient`` (its own connections,
    signed in with ``security``, the log's shared ``security.client_options``)."""

    def __init__(
        self,
        servers: list[str],
        *,
        client_id: str,
        request_timeout_ms: int,
        security: Mapping[str, Any] | None = None,
    ) -> None:
        self._servers = servers
        self._client_id = client_id
        self._request_timeout_ms = request_timeout_ms
        self._security = dict(security or {})
        self._admin: Any = None

    async def start(self) -> None:
        """Bootstrap the admin client; aiokafka's errors propagate (the caller words them)."""
        admin = AIOKafkaAdminClient(
            bootstrap_servers=self._servers,
            client_id=f"{self._client_id}-admin",
            request_timeout_ms=self._request_timeout_ms,
            **self._security,
        )
        try:
            await admin.start()
        except BaseException:
            await admin.close()
            raise
        self._admin = admin

    async def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            await admin.close()

    async def _call(self, what: str, timeout: float, call: Awaitable[T], *, topic: str | None = None) -> T:
        try:
            async with asyncio.timeout(timeout):
                return await call
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise translate(exc, what, topic=topic) from exc

    def _client(self) -> Any:
        if self._admin is None:
            raise BackendUnavailable("The Kafka log is not connected.")
        return self._admin

    async def create(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        *,
        timeout: float,
    ) -> None:
        """CreateTopics on the controller; ``replication_factor`` -1 (and no assignment) lets the
        controller apply its own ``default.replication.factor`` (KIP-464, Kafka 2.4 and later)."""
        # NewTopic refuses -1 unless replicas are assigned by hand, though the wire format and
        # the brokers accept it as "the default": build with 1, then set it.
        new = NewTopic(topic, partitions, 1, topic_configs={k: str(v) for k, v in configs.items()})
        new.replication_factor = replication_factor
        timeout_ms = max(int(timeout * 1000), 1)
        what = f"creating topic {topic!r}"
        response = await self._call(
            what, timeout, self._client().create_topics([new], timeout_ms=timeout_ms), topic=topic
        )
        for entry in response.topic_errors:
            name, code = entry[0], entry[1]
            message = entry[2] if len(entry) > 2 else None
            if name == topic and (error := for_code(code, what, topic=topic, message=message)):
                raise error

    async def delete(self, topic: str, *, timeout: float) -> None:
        timeout_ms = max(int(timeout * 1000), 1)
        what = f"deleting topic {topic!r}"
        response = await self._call(
            what, timeout, self._client().delete_topics([topic], timeout_ms=timeout_ms), topic=topic
        )
        for name, code, *_ in response.topic_error_codes:
            if name == topic and (error := for_code(code, what, topic=topic)):
                raise error

    async def grow(self, topic: str, total: int, *, timeout: float) -> None:
        """CreatePartitions: raise ``topic`` to ``total`` partitions."""
        timeout_ms = max(int(timeout * 1000), 1)
        what = f"adding partitions to {topic!r}"
        call = self._client().create_partitions({topic: NewPartitions(total)}, timeout_ms=timeout_ms)
        await self._call(what, timeout, call, topic=topic)
