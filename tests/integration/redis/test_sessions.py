"""Redis sessions: what only they have (key prefixes, a stop that keeps the data).

The port's contract, the same for every adapter, runs in
``tests/integration/test_sessions_port.py``.
"""

from __future__ import annotations

import pytest

from deploy.local.redis_server import RedisServer
from service.adapters.redis import RedisSessions
from service.errors import ConsumerInstanceNotFound
from tests.helpers import instance


async def test_lifecycle_is_idempotent(redis_server: RedisServer, prefix: str) -> None:
    async with RedisSessions(redis_server.url, key_prefix=prefix) as s:
        await s.start()  # a second start changes nothing
        await s.create(instance())
        await s.stop()
        await s.stop()
    # Stopped is not deleted: a new adapter on the same deployment finds the instance.
    async with RedisSessions(redis_server.url, key_prefix=prefix) as again:
        assert (await again.load("g", "c")).name == "c"


async def test_prefixes_separate_deployments(sessions: RedisSessions, redis_server: RedisServer) -> None:
    await sessions.create(instance())
    async with RedisSessions(redis_server.url, key_prefix="another-deployment:") as other:
        assert await other.instances() == []
        with pytest.raises(ConsumerInstanceNotFound):
            await other.load("g", "c")
