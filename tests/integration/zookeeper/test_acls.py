"""ACL bindings in ZooKeeper: Kafka's classic layout, and every replica seeing a change within a second."""

from __future__ import annotations

import asyncio
import json

from service.core.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType

from .conftest import CoordinatorFactory, eventually, raw_client


def binding(principal: str, name: str, *, pattern: PatternType = PatternType.LITERAL) -> AclBinding:
    return AclBinding(principal, ResourceType.TOPIC, name, pattern, Operation.READ, Permission.ALLOW)


async def test_a_change_through_one_replica_shows_through_the_other(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    a, b = make_coordinator(zk_url, node_id="a"), make_coordinator(zk_url, node_id="b")
    await a.start()
    await b.start()
    alice = binding("User:alice", "orders")
    await a.add_acls([alice])

    async def b_sees_alice() -> bool:
        return list(await b.acls()) == [alice]

    await eventually(b_sees_alice, within_s=1.0)
    await b.remove_acls(AclFilter(principal="User:alice"))

    async def a_sees_none() -> bool:
        return list(await a.acls()) == []

    await eventually(a_sees_none, within_s=1.0)


async def test_replicas_adding_to_one_resource_at_once_both_land(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    a, b = make_coordinator(zk_url, node_id="a"), make_coordinator(zk_url, node_id="b")
    await a.start()
    await b.start()
    mine = [binding(f"User:a{i}", "shared") for i in range(10)]
    theirs = [binding(f"User:b{i}", "shared") for i in range(10)]
    await asyncio.gather(*(a.add_acls([x]) for x in mine), *(b.add_acls([x]) for x in theirs))

    async def both_see_all() -> bool:
        want = sorted(mine + theirs, key=repr)
        return sorted(await a.acls(), key=repr) == sorted(await b.acls(), key=repr) == want

    await eventually(both_see_all, within_s=1.0)


async def test_the_layout_is_kafkas(zk_url: str, make_coordinator: CoordinatorFactory) -> None:
    coord = make_coordinator(zk_url, node_id="a")
    await coord.start()
    await coord.add_acls(
        [
            binding("User:alice", "orders"),
            AclBinding(
                "User:bob", ResourceType.GROUP, "team/a", PatternType.PREFIXED, Operation.ALL, Permission.DENY
            ),
        ]
    )
    client = raw_client(zk_url)
    try:
        literal, _ = client.get("/kafka-acl/Topic/orders")
        assert json.loads(literal) == {
            "version": 1,
            "acls": [
                {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
            ],
        }
        prefixed, _ = client.get("/kafka-acl-extended/prefixed/Group/team%2Fa")
        assert json.loads(prefixed)["acls"][0]["operation"] == "All"
        assert any(c.startswith("acl_changes_") for c in client.get_children("/kafka-acl-changes"))
        await coord.remove_acls(AclFilter(resource_type=ResourceType.TOPIC))
        assert client.exists("/kafka-acl/Topic/orders") is None  # the last binding takes its znode
    finally:
        client.stop()
        client.close()
