"""What brokergate leaves in ZooKeeper, as other programs see it; names that ZooKeeper cannot take."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kazoo.client import KazooClient

from deploy.local.zookeeper_server import ZooKeeperServer
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.adapters.zookeeper.paths import decode_name, encode_name
from service.adapters.zookeeper.session import ZooKeeperURL
from service.core.models import GroupState, Member, Subscription, TopicPartition
from service.server.backends import BackendNotAvailable, build_coordinator
from service.settings import Settings

from .conftest import CoordinatorFactory, raw_client

TP = TopicPartition

# Characters ZooKeeper refuses in a znode name (org.apache.zookeeper.common.PathUtils), plus '/'.
_REFUSED = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} | {"/"}


def _zookeeper_accepts(name: str) -> bool:
    if name in ("", ".", "..") or any(ch in _REFUSED for ch in name):
        return False
    return all(not 0xD800 <= ord(ch) <= 0xF8FF and not 0xFFF0 <= ord(ch) for ch in name)


# --- the layout --------------------------------------------------------------------------


async def test_offsets_are_where_kafka_tools_read_them(coord: ZooKeeperCoordinator, raw: KazooClient) -> None:
    await coord.commit("orders-app", {TP("orders", 0): 42, TP("orders", 2): 7, TP("audit", 0): 0})
    assert sorted(raw.get_children("/consumers/orders-app/offsets")) == ["audit", "orders"]
    assert sorted(raw.get_children("/consumers/orders-app/offsets/orders")) == ["0", "2"]
    data, _ = raw.get("/consumers/orders-app/offsets/orders/0")
    assert data == b"42"
    assert raw.get("/consumers/orders-app/offsets/audit/0")[0] == b"0"


async def test_offsets_written_by_a_tool_are_read(coord: ZooKeeperCoordinator, raw: KazooClient) -> None:
    raw.create("/consumers/legacy/offsets/clicks/3", b"1234", makepath=True)
    raw.create("/consumers/legacy/offsets/clicks/not-a-partition", b"5", makepath=True)
    raw.create("/consumers/legacy/offsets/clicks/4", b"garbage", makepath=True)
    raw.create("/consumers/legacy/ids", b"", makepath=True)  # other things old consumers kept there
    assert await coord.committed("legacy") == {TP("clicks", 3): 1234}
    assert "legacy" in await coord.groups()
    # And brokergate overwrites a tool's znode in place.
    await coord.commit("legacy", {TP("clicks", 3): 1300})
    assert raw.get("/consumers/legacy/offsets/clicks/3")[0] == b"1300"


async def test_members_state_and_replicas_layout(coord: ZooKeeperCoordinator, raw: KazooClient) -> None:
    await coord.join("g", Member("c-1", Subscription(topics=("t",)), "range", 17, "User:alice"))
    await coord.publish(
        "g", GroupState(1, {"c-1": [TP("t", 0)]}, {TP("t", 0): 1}, {"t": 1}), expected_version=-1
    )
    member = json.loads(raw.get("/brokergate/groups/g/members/c-1")[0])
    assert member == {
        "format": 1,
        "member_id": "c-1",
        "subscription": {"topics": ["t"], "pattern": None},
        "strategy": "range",
        "joined_ms": 17,
        "principal": "User:alice",
    }
    data, stat = raw.get("/brokergate/groups/g/state")
    assert json.loads(data) == {
        "format": 1,
        "generation": 1,
        "assignment": {"c-1": [["t", 0]]},
        "owned_since": [["t", 0, 1]],
        "topics": {"t": 1},
    }
    assert stat.version == (await coord.state("g")).version == 0
    assert raw.get_children("/brokergate/nodes") == ["replica-a"]
    node, node_stat = raw.get("/brokergate/nodes/replica-a")
    assert json.loads(node)["node_id"] == "replica-a"
    assert node_stat.ephemeralOwner != 0
    [candidate] = raw.get_children("/brokergate/election")
    assert raw.get(f"/brokergate/election/{candidate}")[0] == b"replica-a"


async def test_without_chroot_the_layout_is_at_the_root(
    zookeeper: ZooKeeperServer, make_coordinator: CoordinatorFactory
) -> None:
    coord = make_coordinator(zookeeper.url, node_id="root-replica")
    await coord.start()
    await coord.commit("root-group", {TP("t", 0): 1})
    raw = raw_client(zookeeper.url)
    try:
        assert raw.get("/consumers/root-group/offsets/t/0")[0] == b"1"
        assert "root-replica" in raw.get_children("/brokergate/nodes")
    finally:
        raw.stop()
        raw.close()


# --- names -------------------------------------------------------------------------------

ODD_NAMES = [
    "../../escape",
    "/abs/path",
    "a\x00b",
    "tab\there",
    "ünïcødé 🚀",
    "\ud800lone-surrogate",
    "x" * 255,
    ".",
    "..",
    "...",
    "100%",
    "%2E",
    "zookeeper",
    "\u0085next-line",
    "\ue000private",
]


async def test_any_group_name_round_trips_and_stays_one_znode(
    coord: ZooKeeperCoordinator, raw: KazooClient
) -> None:
    for i, name in enumerate(ODD_NAMES):
        await coord.commit(name, {TP("t", i): i + 1})
        await coord.join(name, Member(".", Subscription(topics=("t",))))
    assert await coord.groups() == sorted(ODD_NAMES)
    for i, name in enumerate(ODD_NAMES):
        assert await coord.committed(name) == {TP("t", i): i + 1}
        assert list(await coord.members(name)) == ["."]
    # One znode per group, each a name ZooKeeper accepts, nothing outside the layout.
    for parent in ("/consumers", "/brokergate/groups"):
        children = raw.get_children(parent)
        assert len(children) == len(ODD_NAMES)
        assert all(_zookeeper_accepts(c) for c in children)
    assert sorted(raw.get_children("/")) == ["brokergate", "consumers"]  # (ACL paths: with the first binding)
    # Names ZooKeeper takes are stored verbatim, readable by people and tools.
    assert {"...", "zookeeper", "x" * 255} <= set(raw.get_children("/consumers"))


async def test_odd_topic_and_member_names(coord: ZooKeeperCoordinator) -> None:
    await coord.commit("g", {TP("..", 0): 1, TP("a/b", 1): 2, TP("%", 2): 3})
    assert await coord.committed("g") == {TP("..", 0): 1, TP("a/b", 1): 2, TP("%", 2): 3}
    for member in ("..", "a/b", "%41"):
        await coord.join("g", Member(member, Subscription(topics=("t",))))
    assert sorted(await coord.members("g")) == ["%41", "..", "a/b"]
    assert await coord.leave("g", "..") is True


@given(st.text(min_size=1, max_size=50))
def test_encoding_round_trips_into_valid_znode_names(name: str) -> None:
    encoded = encode_name(name)
    assert decode_name(encoded) == name
    assert _zookeeper_accepts(encoded)


def test_valid_names_are_kept_verbatim() -> None:
    for name in ["orders", "my.group-1_x", "ünïcødé", "with space", "...", "zookeeper"]:
        assert encode_name(name) == name
    assert encode_name(".") == "%2E"
    assert encode_name("a%b") == "a%25b"
    assert encode_name("a/b") == "a%2Fb"


# --- URLs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "servers", "chroot"),
    [
        ("zookeeper://zk1:2181", "zk1:2181", ""),
        ("zookeeper://zk1:2181,zk2:2182,zk3/", "zk1:2181,zk2:2182,zk3", ""),
        ("zookeeper://10.0.0.1:2181/kafka/prod/", "10.0.0.1:2181", "/kafka/prod"),
        ("zookeeper://[::1]:2181/x", "[::1]:2181", "/x"),
    ],
)
def test_url_parsing(url: str, servers: str, chroot: str) -> None:
    assert ZooKeeperURL.parse(url) == ZooKeeperURL(servers, chroot)


@pytest.mark.parametrize(
    "url",
    ["zookeeper://", "zookeeper://h:0", "zookeeper://h:99999", "zookeeper://a,,b", "zookeeper://h/./x"],
)
def test_bad_urls_are_refused_in_one_line(url: str) -> None:
    with pytest.raises(ValueError, match="coordinator URL"):
        ZooKeeperURL.parse(url)
    with pytest.raises(BackendNotAvailable, match="coordinator URL"):
        build_coordinator(Settings(coordinator=url))


def test_the_factory_builds_it_from_the_settings() -> None:
    settings = Settings(
        coordinator="zookeeper://127.0.0.1:2181/c",
        node_id="n-1",
        zookeeper_session_timeout_ms=3000,
    )
    coordinator = build_coordinator(settings)
    assert isinstance(coordinator, ZooKeeperCoordinator)
    assert coordinator.node_id == "n-1"
