"""Two gateway replicas on one ZooKeeper decide alike: a binding granted or removed through one is
enforced by the other within a second."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest

from service.core.acl import Operation, ResourceType
from service.security.users import add_user
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import BINARY, b64, cluster_id, create_topic
from tests.integration.test_authorization import Acls

from .conftest import CONNECT_TIMEOUT_MS, REQUEST_TIMEOUT_MS, SESSION_TIMEOUT_MS, eventually


@pytest.fixture
async def replicas(tmp_path: Path, zk_url: str) -> AsyncIterator[list[RunningGateway]]:
    users = tmp_path / "users"
    add_user(users, "alice", "alice-pw")
    add_user(users, "admin", "admin-pw")
    async with AsyncExitStack() as stack:
        running = []
        for node in ("a", "b"):
            gw = await start_gateway(
                tmp_path / node,
                coordinator=zk_url,
                node_id=node,
                zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS,
                zookeeper_connect_timeout_ms=CONNECT_TIMEOUT_MS,
                zookeeper_request_timeout_ms=REQUEST_TIMEOUT_MS,
                auth="basic",
                users_file=users,
                authorize=True,
                super_users="User:admin",
            )
            stack.push_async_callback(gw.stop)
            stack.push_async_callback(gw.client.aclose)
            gw.client.auth = httpx.BasicAuth("admin", "admin-pw")
            await create_topic(gw.client, "orders")  # each replica has a log of its own here
            running.append(gw)
        yield running


async def test_granted_through_one_replica_enforced_through_the_other(replicas: list[RunningGateway]) -> None:
    a, b = replicas
    body = {"records": [{"value": b64("v")}]}
    async with httpx.AsyncClient(base_url=b.url, auth=("alice", "alice-pw")) as alice:

        async def produce_status() -> int:
            r = await alice.post("/topics/orders", json=body, headers={"Content-Type": BINARY})
            return r.status_code

        assert await produce_status() == 403
        await Acls(a.client, await cluster_id(a.client)).grant(
            "User:alice", ResourceType.TOPIC, "orders", Operation.WRITE
        )

        async def allowed() -> bool:
            return await produce_status() == 200

        await eventually(allowed, within_s=1.0)
        r = await a.client.delete(
            f"/v3/clusters/{await cluster_id(a.client)}/acls",
            params={"resource_type": "TOPIC", "principal": "User:alice"},
        )
        assert len(r.json()["data"]) == 1

        async def refused() -> bool:
            return await produce_status() == 403

        await eventually(refused, within_s=1.0)
