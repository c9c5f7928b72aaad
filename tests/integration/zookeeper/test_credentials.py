"""The gateway's own ZooKeeper credentials: its znodes are its own, readable by others, changed by none.

Gateways with digest credentials run a group through ZooKeeper side by side; a plain kazoo
client without them (any other ZooKeeper user, a script, a misconfigured replica) can read
what they wrote, but every change to it is refused with ``NoAuthError``, and a replica with
other credentials is refused at start in one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id, Permissions

from deploy.local.kafka_broker import KafkaBroker
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.adapters.zookeeper.security import DigestCredentials
from service.core.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from service.errors import BackendError
from tests.conftest import RunningGateway, kafka_settings, start_gateway
from tests.helpers import (
    assignment,
    commit,
    consumer,
    create_topic,
    poll_until,
    produce,
    serve_until_exit,
    subscribe,
)

from .conftest import (
    CONNECT_TIMEOUT_MS,
    REQUEST_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    CoordinatorFactory,
    raw_client,
)

USER, PASSWORD = "brokergate", "zk-secret"
# ZooKeeper's digest id: the user and base64(sha1("user:password"))
GATEWAY_ONLY = ACL(Permissions.ALL, Id("digest", f"{USER}:aPhXwTE6MqBnt0oN2R3GStD/4rg="))
ANYONE_READS = ACL(Permissions.READ, Id("world", "anyone"))

GatewayFactory = Callable[..., Any]


@pytest.fixture
async def start(tmp_path: Path, zk_url: str, kafka_broker: KafkaBroker) -> AsyncIterator[GatewayFactory]:
    """Starts replicas of one deployment (this test's chroot, one Kafka-protocol broker as the
    shared log) with the credentials; stops them at the end."""
    running: list[RunningGateway] = []
    shared = kafka_settings(kafka_broker)  # one registry topic for all replicas

    async def make(node_id: str, **overrides: Any) -> RunningGateway:
        gw = await start_gateway(
            tmp_path / node_id,
            **shared,
            coordinator=zk_url,
            node_id=node_id,
            zookeeper_username=USER,
            zookeeper_password=PASSWORD,
            zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS,
            zookeeper_connect_timeout_ms=CONNECT_TIMEOUT_MS,
            zookeeper_request_timeout_ms=REQUEST_TIMEOUT_MS,
            **overrides,
        )
        running.append(gw)
        return gw

    yield make
    for gw in running:
        await gw.client.aclose()
        await gw.stop()


def _tree(client: KazooClient, path: str = "/") -> list[str]:
    """Every znode under ``path`` (the client's chroot), parents first."""
    found = []
    for child in sorted(client.get_children(path)):
        child_path = f"{path.rstrip('/')}/{child}"
        found.append(child_path)
        found.extend(_tree(client, child_path))
    return found


async def test_replicas_with_credentials_own_every_znode_they_create(
    start: GatewayFactory, zk_url: str, make_coordinator: CoordinatorFactory, name: str
) -> None:
    one, two = await start("gw-1"), await start("gw-2")
    billing = f"billing-{name}"  # on a Kafka log its committed offsets are Kafka's: a name of its own
    await create_topic(one.client, name, partitions=2)
    first = await consumer(one.client, billing, name="c1")
    second = await consumer(two.client, billing, name="c2")  # a member through the other replica
    await subscribe(one.client, first, name)
    await subscribe(two.client, second, name)
    owned = [await assignment(one.client, first), await assignment(two.client, second)]
    assert sorted(tp for tps in owned for tp in tps) == [(name, 0), (name, 1)]
    await produce(one.client, name, [{"value": "a"}], partition=0)
    await produce(one.client, name, [{"value": "b"}], partition=1)
    for client, base in ((one.client, first), (two.client, second)):
        assert len(await poll_until(client, base, 1)) == 1
        await commit(client, base)
    # ACL bindings in Kafka's layout, through a coordinator with the same credentials
    admin = make_coordinator(zk_url, node_id="admin", credentials=DigestCredentials(USER, PASSWORD))
    await admin.start()
    binding = AclBinding(
        "User:alice", ResourceType.TOPIC, name, PatternType.LITERAL, Operation.READ, Permission.ALLOW
    )
    await admin.add_acls([binding])

    # As the gateway (ZooKeeper shows a digest id's hash only to that identity): every znode
    # from the chroot down carries the gateway's ACL.
    server, chroot = zk_url.removeprefix("zookeeper://").rsplit("/", 1)
    inspector = KazooClient(hosts=server, timeout=5.0, auth_data=[("digest", f"{USER}:{PASSWORD}")])
    inspector.start(timeout=10)
    try:
        znodes = [f"/{chroot}", *_tree(inspector, f"/{chroot}")]
        wrong = {z: acl for z in znodes if (acl := inspector.get_acls(z)[0]) != [GATEWAY_ONLY, ANYONE_READS]}
    finally:
        inspector.stop()
        inspector.close()
    assert wrong == {}
    state = f"/brokergate/groups/{billing}/state"
    for expected in (
        "/brokergate/nodes/gw-1",
        "/brokergate/nodes/gw-2",
        "/brokergate/election",
        f"/brokergate/groups/{billing}/members/c1",
        state,
        f"/kafka-acl/Topic/{name}",
        "/kafka-acl-changes",
    ):
        assert f"/{chroot}{expected}" in znodes
    # the log is Kafka: the commits are in Kafka's group coordinator, none in ZooKeeper
    assert not [z for z in znodes if z.startswith(f"/{chroot}/consumers/{billing}/offsets")]

    stranger = raw_client(zk_url)  # no credentials, in the chroot
    try:
        # Anyone reads; nobody else changes, deletes or adds.
        held = stranger.get(state)[0]
        with pytest.raises(NoAuthError):
            stranger.set(state, b"{}")
        with pytest.raises(NoAuthError):
            stranger.delete(f"/kafka-acl/Topic/{name}")
        with pytest.raises(NoAuthError):
            stranger.delete(f"/brokergate/groups/{billing}/members/c1")
        with pytest.raises(NoAuthError):
            stranger.create(f"/brokergate/groups/{billing}/members/intruder", b"{}")
        assert stranger.get(state)[0] == held
    finally:
        stranger.stop()
        stranger.close()

    # and the replicas still do everything
    await produce(two.client, name, [{"value": "c"}], partition=0)
    base = first if owned[0] == [(name, 0)] else second
    client = one.client if base == first else two.client
    assert [r["value"] for r in await poll_until(client, base, 1)] == ["c"]
    assert await commit(client, base) == [{"topic": name, "partition": 0, "offset": 2}]


@pytest.mark.parametrize(
    "credentials", [DigestCredentials(USER, "wrong-password"), None], ids=["wrong", "none"]
)
async def test_a_replica_without_the_credentials_is_refused_at_start(
    zk_url: str, make_coordinator: CoordinatorFactory, credentials: DigestCredentials | None
) -> None:
    owner = make_coordinator(zk_url, node_id="owner", credentials=DigestCredentials(USER, PASSWORD))
    await owner.start()
    other: ZooKeeperCoordinator = make_coordinator(zk_url, node_id="other", credentials=credentials)
    with pytest.raises(BackendError) as caught:
        await other.start()
    message = str(caught.value)
    who = f"user {USER!r}" if credentials else "a client without a user"
    assert message.startswith(f"ZooKeeper refused register this replica: a znode's ACL does not allow {who}")
    assert "zookeeper_username and zookeeper_password" in message
    assert "wrong-password" not in message and "\n" not in message


async def test_without_world_read_only_the_gateway_reads(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    private = DigestCredentials(USER, PASSWORD, world_readable=False)
    await make_coordinator(zk_url, node_id="private", credentials=private).start()
    stranger = raw_client(zk_url)
    try:
        with pytest.raises(NoAuthError):
            stranger.get("/brokergate/nodes/private")
        with pytest.raises(NoAuthError):
            stranger.get_acls("/brokergate/nodes/private")  # ZooKeeper wants read rights for that too
        stranger.add_auth("digest", f"{USER}:{PASSWORD}")  # as the gateway
        assert stranger.get_acls("/brokergate/nodes/private")[0] == [GATEWAY_ONLY]
        assert stranger.get("/brokergate/nodes/private")[0]
    finally:
        stranger.stop()
        stranger.close()


async def test_serve_with_other_credentials_stops_in_one_line(
    zk_url: str, make_coordinator: CoordinatorFactory, tmp_path: Path
) -> None:
    await make_coordinator(zk_url, node_id="owner", credentials=DigestCredentials(USER, PASSWORD)).start()
    result = await asyncio.to_thread(
        serve_until_exit,
        tmp_path,
        {
            "BROKERGATE_COORDINATOR": zk_url,
            "BROKERGATE_ZOOKEEPER_USERNAME": USER,
            "BROKERGATE_ZOOKEEPER_PASSWORD": "not-the-password",
        },
    )
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr and "not-the-password" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert "brokergate: cannot start: ZooKeeper refused register this replica" in line
