"""The wired-up gateway: ports plus the core services built on them.

Built once per application by ``service.app.create_app``'s lifespan; routers
reach it through ``get_gateway``.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from .core.consumers import ConsumerService
from .core.groups import GroupManager
from .core.idempotency import IdempotencyGuard
from .core.partitioner import Partitioner
from .core.ports import Coordinator, Log, Sessions
from .core.producer import ProduceService
from .core.topics import TopicService
from .settings import Settings


@dataclass(slots=True)
class Gateway:
    settings: Settings
    log: Log
    coordinator: Coordinator
    sessions: Sessions
    topics: TopicService
    producer: ProduceService
    groups: GroupManager
    consumers: ConsumerService
    idempotency: IdempotencyGuard

    @classmethod
    def build(cls, settings: Settings, log: Log, coordinator: Coordinator, sessions: Sessions) -> Gateway:
        groups = GroupManager(log, coordinator)
        topics = TopicService(
            log,
            auto_create=settings.auto_create_topics_enable,
            default_partitions=settings.default_partitions,
            on_change=groups.refresh,
        )
        producer = ProduceService(log, topics, Partitioner())
        consumers = ConsumerService(log, coordinator, sessions, groups, topics)
        idempotency = IdempotencyGuard(
            sessions, window_ms=settings.idempotency_window_ms, wait_ms=settings.idempotency_wait_ms
        )
        return cls(settings, log, coordinator, sessions, topics, producer, groups, consumers, idempotency)


async def get_gateway(request: Request) -> Gateway:
    # async on purpose: FastAPI would run a plain function dependency in a worker thread.
    gateway: Gateway = request.app.state.gateway
    return gateway
