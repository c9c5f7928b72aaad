"""``TopicAdmin``: topic administration through ``aiokafka.admin.AIOKafkaAdminClient``.

Create, delete, grow topics and read their configs, each bounded by a
deadline and with the per-topic error codes of Kafka's responses translated
(``errors.for_code``): an existing topic is ``TopicExists``, a refused
partition count, replication factor or config is ``InvalidTopicConfig`` with
the broker's own message. The admin client sends create/delete/grow to the
controller, as Kafka requires.

Used by ``KafkaLog`` (admin operations) and ``TopicMetadata`` (configs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any, Final, TypeVar

from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from service.errors import BackendUnavailable

from .errors import for_code, translate

T = TypeVar("T")

DEFAULT_REPLICATION: Final = "default.replication.factor"


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
        self._default_replication: int | None = None

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

    async def configs(self, topic: str, *, timeout: float) -> dict[str, str]:
        """The topic's configs as the broker reports them (Kafka: every effective value)."""
        resource = ConfigResource(ConfigResourceType.TOPIC, topic)
        what = f"reading the configs of {topic!r}"
        responses = await self._call(what, timeout, self._client().describe_configs([resource]), topic=topic)
        return _config_entries(responses, what, topic)

    async def default_replication(self, broker_id: int, *, timeout: float) -> int | None:
        """The cluster's ``default.replication.factor`` (cached once known); None if the broker does
        not report it."""
        if self._default_replication is not None:
            return self._default_replication
        # All of the broker's configs, not just the one: asking by name crashes some brokers (Tansu 0.6).
        resource = ConfigResource(ConfigResourceType.BROKER, str(broker_id))
        what = "reading the broker's default replication factor"
        responses = await self._call(what, timeout, self._client().describe_configs([resource]))
        value = _config_entries(responses, what, None).get(DEFAULT_REPLICATION)
        if value is not None and value.strip().lstrip("-").isdigit():
            self._default_replication = int(value)
        return self._default_replication

    async def create(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
        *,
        timeout: float,
    ) -> None:
        """CreateTopics on the controller; ``replication_factor`` -1 lets the broker pick."""
        # NewTopic refuses -1 unless replicas are assigned by hand, though the wire format and
        # the brokers (KIP-464) accept it as "the broker's default": build with 1, then set it.
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


def _config_entries(responses: list[Any], what: str, topic: str | None) -> dict[str, str]:
    """Name -> value from DescribeConfigs responses (every version puts name, value first)."""
    configs: dict[str, str] = {}
    for response in responses:
        for resource in response.resources:
            code, message = resource[0], resource[1]
            if error := for_code(code, what, topic=topic, message=message):
                raise error
            for entry in resource[4]:
                name, value = entry[0], entry[1]
                if value is not None:  # sensitive values come back as null
                    configs[name] = str(value)
    return dict(sorted(configs.items()))
