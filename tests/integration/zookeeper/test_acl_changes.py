"""ACL bindings beyond the happy path: Kafka's change znodes, Kafka-written bindings, outages, purges.

``test_acls.py`` covers two replicas seeing each other's changes; here the same cache is
followed through what a shared ZooKeeper brings: a Kafka tool writing bindings and
announcing them its own way, a connection lost and regained, a session expired, old change
znodes purged.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

import pytest

from deploy.local.zookeeper_server import ZooKeeperServer
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.adapters.zookeeper.codec import (
    AclResource,
    CorruptZnode,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
    from_kafka_name,
)
from service.core.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from service.errors import BackendUnavailable, NewerFormat

from .conftest import CoordinatorFactory, chroot_url, eventually, raw_client
from .test_outages import expire_session

LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


def binding(
    principal: str,
    name: str,
    *,
    resource_type: ResourceType = TOPIC,
    pattern: PatternType = LITERAL,
    operation: Operation = Operation.READ,
) -> AclBinding:
    return AclBinding(principal, resource_type, name, pattern, operation, Permission.ALLOW)


def sees(coord: ZooKeeperCoordinator, *expected: AclBinding) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return sorted(await coord.acls(), key=repr) == sorted(expected, key=repr)

    return check


async def pair(url: str, make_coordinator: CoordinatorFactory) -> tuple[ZooKeeperCoordinator, ...]:
    a, b = make_coordinator(url, node_id="a"), make_coordinator(url, node_id="b")
    await a.start()
    await b.start()
    return a, b


# --- Kafka's formats ---------------------------------------------------------------------


async def test_changes_are_announced_as_kafka_announces_them(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    a, b = await pair(zk_url, make_coordinator)
    odd = binding("User:bob", "team/a", resource_type=GROUP, pattern=PREFIXED, operation=Operation.ALL)
    await a.add_acls([binding("User:alice", "orders"), odd])
    await eventually(sees(b, binding("User:alice", "orders"), odd), within_s=1.0)
    raw = raw_client(zk_url)
    try:
        [literal] = raw.get_children("/kafka-acl-changes")
        assert literal.startswith("acl_changes_") and raw.get(f"/kafka-acl-changes/{literal}")[0] == (
            b"TOPIC:orders"
        )
        [extended] = raw.get_children("/kafka-acl-extended-changes")
        assert json.loads(raw.get(f"/kafka-acl-extended-changes/{extended}")[0]) == {
            "version": 1,
            "resourceType": "GROUP",
            "name": "team/a",
            "patternType": "PREFIXED",
        }
        # A name ZooKeeper cannot take as one znode is percent-encoded, as group names are.
        assert raw.get_children("/kafka-acl-extended/prefixed/Group") == ["team%2Fa"]
    finally:
        raw.stop()
        raw.close()


async def test_bindings_a_kafka_tool_writes_show_and_its_unknown_entries_are_kept(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    a, b = await pair(zk_url, make_coordinator)
    raw = raw_client(zk_url)
    try:
        # As Kafka 1.x's kafka-acls wrote them: its own spellings, an operation brokergate does
        # not model, and the legacy "Type:name" change announcement.
        tokens = {
            "principal": "User:ops",
            "permissionType": "Allow",
            "operation": "CreateTokens",
            "host": "*",
        }
        reader = {"principal": "User:app", "permissionType": "Allow", "operation": "Read", "host": "10.0.0.7"}
        raw.create(
            "/kafka-acl/Group/legacy-app",
            json.dumps({"version": 1, "acls": [reader, tokens]}).encode(),
            makepath=True,
        )
        raw.create("/kafka-acl-changes/acl_changes_", b"Group:legacy-app", sequence=True, makepath=True)
        app = AclBinding(
            "User:app", GROUP, "legacy-app", LITERAL, Operation.READ, Permission.ALLOW, "10.0.0.7"
        )
        await eventually(sees(a, app), within_s=1.0)
        await eventually(sees(b, app), within_s=1.0)

        extra = binding("User:app", "legacy-app", resource_type=GROUP, operation=Operation.DESCRIBE)
        await b.add_acls([extra])
        assert json.loads(raw.get("/kafka-acl/Group/legacy-app")[0])["acls"] == [
            reader,
            {"principal": "User:app", "permissionType": "Allow", "operation": "Describe", "host": "*"},
            tokens,
        ]
        assert sorted(await b.remove_acls(AclFilter(principal="User:app")), key=repr) == sorted(
            [app, extra], key=repr
        )
        # What brokergate cannot model stays, so the znode does too.
        assert json.loads(raw.get("/kafka-acl/Group/legacy-app")[0]) == {"version": 1, "acls": [tokens]}
        await eventually(sees(a), within_s=1.0)
    finally:
        raw.stop()
        raw.close()


async def test_a_name_kafka_spells_verbatim_is_read_and_rewritten_where_kafka_keeps_it(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    coord = make_coordinator(zk_url, node_id="a")
    await coord.start()
    raw = raw_client(zk_url)
    try:
        entry = {"principal": "User:app", "permissionType": "Allow", "operation": "Read", "host": "*"}
        raw.create(
            "/kafka-acl/Group/50%off", json.dumps({"version": 1, "acls": [entry]}).encode(), makepath=True
        )
        raw.create("/kafka-acl-changes/acl_changes_", b"GROUP:50%off", sequence=True, makepath=True)
        app = binding("User:app", "50%off", resource_type=GROUP)
        await eventually(sees(coord, app), within_s=1.0)
        ops = binding("User:ops", "50%off", resource_type=GROUP)
        await coord.add_acls([ops])
        assert raw.get_children("/kafka-acl/Group") == ["50%off"]  # not a second znode, "50%25off"
        assert sorted(await coord.remove_acls(AclFilter(resource_name="50%off")), key=repr) == [app, ops]
        assert raw.get_children("/kafka-acl/Group") == []
    finally:
        raw.stop()
        raw.close()


def test_the_codec_speaks_kafkas_spellings() -> None:
    every = tuple(
        AclBinding(f"User:{op.value}", TOPIC, "t", LITERAL, op, permission, "*")
        for op in Operation
        for permission in Permission
    )
    resource = AclResource(TOPIC, LITERAL, "t")
    data = encode_acls(every)
    operations = {e["operation"] for e in json.loads(data)["acls"]}
    assert operations == {
        "All", "Read", "Write", "Create", "Delete", "Alter", "Describe",
        "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite",
    }  # fmt: skip
    assert decode_acls(data, resource, "test").bindings == every
    assert from_kafka_name("CLUSTER_ACTION", Operation) is Operation.CLUSTER_ACTION
    assert from_kafka_name("clusteraction", Operation) is Operation.CLUSTER_ACTION
    assert from_kafka_name("TransactionalId", ResourceType) is None
    assert decode_acls(b"", resource, "test").bindings == ()  # as Kafka reads an empty znode
    with pytest.raises(NewerFormat):  # a newer Kafka's layout: refused, not read as damage
        decode_acls(b'{"version": 2, "acls": []}', resource, "test")
    with pytest.raises(CorruptZnode):
        decode_acls(b'{"version": "2", "acls": []}', resource, "test")
    with pytest.raises(CorruptZnode):
        decode_acls(b"not json", resource, "test")

    odd = AclResource(GROUP, PREFIXED, "a:b/\ud800")
    assert decode_acl_change(encode_acl_change(odd), PREFIXED, "test") == odd
    literal = AclResource(TOPIC, LITERAL, "x:y")
    assert decode_acl_change(encode_acl_change(literal), LITERAL, "test") == literal
    assert decode_acl_change(b"Topic:x:y", LITERAL, "test") == literal  # Kafka 1.x
    assert decode_acl_change(b"TRANSACTIONAL_ID:tx", LITERAL, "test") is None  # not ours
    with pytest.raises(CorruptZnode):
        decode_acl_change(b"no-resource", LITERAL, "test")


# --- outages and purges ------------------------------------------------------------------


async def test_a_replica_keeps_following_changes_after_zookeeper_comes_back(
    own_zookeeper: ZooKeeperServer, make_coordinator: CoordinatorFactory
) -> None:
    a, b = await pair(chroot_url(own_zookeeper), make_coordinator)
    first = binding("User:alice", "orders")
    await a.add_acls([first])
    await eventually(sees(b, first), within_s=1.0)

    await asyncio.to_thread(own_zookeeper.restart)
    # The connection dropped, and kazoo dropped the watches with it; the cache still answers.
    assert list(await b.acls()) == [first]

    async def back() -> bool:
        await a.add_acls([second])
        return True

    second = binding("User:bob", "orders")
    await eventually(back, within_s=30.0)
    await eventually(sees(b, first, second), within_s=30.0)
    third = binding("User:carol", "orders")
    await a.add_acls([third])
    await eventually(sees(b, first, second, third), within_s=1.0)


async def test_a_new_session_reloads_everything(
    zookeeper: ZooKeeperServer, make_coordinator: CoordinatorFactory
) -> None:
    url = chroot_url(zookeeper)
    a, b = await pair(url, make_coordinator)
    await a.add_acls([binding("User:alice", "orders")])
    raw = raw_client(url)
    try:
        # Written with no announcement: only a full reload finds it.
        silent = {"principal": "User:eve", "permissionType": "Deny", "operation": "All", "host": "*"}
        raw.create("/kafka-acl/Topic/secret", json.dumps({"version": 1, "acls": [silent]}).encode())
    finally:
        raw.stop()
        raw.close()
    await expire_session(zookeeper, b)
    eve = AclBinding("User:eve", TOPIC, "secret", LITERAL, Operation.ALL, Permission.DENY)
    await eventually(sees(b, binding("User:alice", "orders"), eve), within_s=30.0)


async def test_purged_change_znodes_leave_the_bindings_and_later_changes_still_show(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    a, b = await pair(zk_url, make_coordinator)
    team = binding("User:alice", "team-a.", pattern=PREFIXED)
    await a.add_acls([binding("User:alice", "orders")])
    await a.add_acls([team])
    await eventually(sees(b, binding("User:alice", "orders"), team), within_s=1.0)

    assert await a._acls.purge_changes(time.time() * 1000 - 60_000) == 0  # none is a minute old
    assert await a._acls.purge_changes(time.time() * 1000 + 60_000) == 2
    raw = raw_client(zk_url)
    try:
        assert raw.get_children("/kafka-acl-changes") == raw.get_children("/kafka-acl-extended-changes") == []
    finally:
        raw.stop()
        raw.close()
    assert await a.remove_acls(AclFilter(resource_name="orders")) == [binding("User:alice", "orders")]
    await eventually(sees(b, team), within_s=1.0)
    assert list(await a.acls()) == [team]


async def test_a_damaged_acl_znode_is_named_and_never_loses_what_was_read(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    a = make_coordinator(zk_url, node_id="a")
    await a.start()
    orders = binding("User:alice", "orders")
    await a.add_acls([orders])
    raw = raw_client(zk_url)
    try:
        raw.set("/kafka-acl/Topic/orders", b"{damaged")
        raw.create("/kafka-acl-changes/acl_changes_", b"TOPIC:orders", sequence=True)
        valid = {"principal": "User:bob", "permissionType": "Allow", "operation": "Read", "host": "*"}
        raw.create("/kafka-acl/Topic/other", json.dumps({"version": 1, "acls": [valid]}).encode())
        raw.create("/kafka-acl-changes/acl_changes_", b"TOPIC:other", sequence=True)
    finally:
        raw.stop()
        raw.close()
    # Both announcements were processed; the binding read before the damage stays (were it a
    # DENY, forgetting it would allow what it denies).
    await eventually(sees(a, orders, binding("User:bob", "other")), within_s=1.0)
    # A replica that never read it refuses to start, naming the znode, rather than decide without it.
    b = make_coordinator(zk_url, node_id="b")
    with pytest.raises(CorruptZnode, match="kafka-acl/Topic/orders in ZooKeeper is not JSON"):
        await b.start()
    with pytest.raises(BackendUnavailable):
        await b.acls()
