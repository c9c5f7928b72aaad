"""Share-partition states in ZooKeeper: their znodes, and replicas writing them at once.

The port's contract (round trips, compare-and-set, all or nothing, limits) is
tested over both coordinators in ``tests/integration/test_coordinator_port.py``;
here is what only ZooKeeper has: the layout another tool sees, several
replicas (coordinator instances) on one deployment, znodes another client
wrote, and the gateway's ACL on what it creates.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id, Permissions

from service.adapters.zookeeper import ZooKeeperCoordinator
from service.adapters.zookeeper.security import DigestCredentials
from service.core.models import TopicPartition
from service.errors import BackendError, BackendUnavailable

from .conftest import CoordinatorFactory, raw_client

TP = TopicPartition
SHARE_GROUPS = "/brokergate/share-groups"


async def replicas(
    zk_url: str, make_coordinator: CoordinatorFactory, n: int = 2
) -> list[ZooKeeperCoordinator]:
    """``n`` replicas of one deployment."""
    started = [make_coordinator(zk_url, node_id=f"replica-{i}") for i in range(n)]
    await asyncio.gather(*(c.start() for c in started))
    return started


async def test_a_state_is_a_znode_whose_version_is_the_states(
    coord: ZooKeeperCoordinator, raw: KazooClient
) -> None:
    state = {"start": 3, "end": 5, "records": [[3, "ACQUIRED", 1, "m-1", 99, None]]}
    assert await coord.store_share_states("orders-sg", {TP("orders", 2): (state, -1)})
    data, stat = raw.get(f"{SHARE_GROUPS}/orders-sg/orders/2")
    assert (json.loads(data), stat.version) == ({**state, "format": 1}, 0)  # the layout's format besides
    assert await coord.share_states("orders-sg") == {TP("orders", 2): (state, 0)}
    assert await coord.store_share_states("orders-sg", {TP("orders", 2): ({**state, "end": 6}, 0)})
    assert raw.get(f"{SHARE_GROUPS}/orders-sg/orders/2")[1].version == 1
    # Names ZooKeeper refuses are encoded, one znode each.
    await coord.store_share_states("a/b", {TP("..", 0): ({}, -1)})
    assert raw.get_children(f"{SHARE_GROUPS}/a%2Fb") == ["%2E%2E"]
    assert await coord.share_groups() == ["a/b", "orders-sg"]


async def test_two_replicas_see_each_others_states_and_conflict(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    a, b = await replicas(zk_url, make_coordinator)
    assert await a.store_share_states("sg", {TP("t", 0): ({"by": "a"}, -1), TP("t", 1): ({"by": "a"}, -1)})
    read_by_a = await a.share_states("sg")
    seen = await b.share_states("sg")
    assert seen == read_by_a and {state["by"] for state, _ in seen.values()} == {"a"}
    # b writes from what it read; a, writing from what it read before, stores nothing.
    assert await b.store_share_states("sg", {tp: ({"by": "b"}, v) for tp, (_, v) in seen.items()})
    assert await a.store_share_states("sg", {TP("t", 0): ({"by": "a"}, read_by_a[TP("t", 0)][1])}) is False
    assert await a.share_states("sg") == await b.share_states("sg")
    assert {state["by"] for state, _ in (await a.share_states("sg")).values()} == {"b"}
    assert await a.share_groups() == await b.share_groups() == ["sg"]
    await b.delete_share_states("sg")
    assert await a.share_states("sg") == {}


async def test_replicas_writing_at_once_never_both_win(
    zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    coordinators = await replicas(zk_url, make_coordinator, 3)
    tps = [TP("t", 0), TP("t", 1), TP("u", 0)]
    versions = dict.fromkeys(tps, -1)
    for round_ in range(10):  # the first round creates the states, the others replace them
        writers = [(i, c) for i, c in enumerate(coordinators) for _ in range(2)]
        results = await asyncio.gather(
            *(
                c.store_share_states("sg", {tp: ({"by": i, "round": round_}, versions[tp]) for tp in tps})
                for i, c in writers
            )
        )
        assert sum(results) == 1
        stored = await coordinators[round_ % 3].share_states("sg")
        winner = writers[results.index(True)][0]
        assert {(s["by"], s["round"]) for s, _ in stored.values()} == {(winner, round_)}  # whole
        versions = {tp: v for tp, (_, v) in stored.items()}


async def test_a_version_at_the_end_of_zookeepers_counter_is_compared_too(
    coord: ZooKeeperCoordinator,
) -> None:
    """A state written from ZooKeeper's last version is deleted and created again (starting over
    rather than turning negative); that delete checks the version like any write."""
    assert await coord.store_share_states("sg", {TP("t", 0): ({"n": 0}, -1), TP("t", 1): ({"n": 0}, -1)})
    last = (1 << 31) - 1
    assert (
        await coord.store_share_states("sg", {TP("t", 0): ({"n": 1}, 0), TP("t", 1): ({"n": 1}, last)})
        is False
    )
    assert (
        await coord.store_share_states("sg", {TP("t", 0): ({"n": 1}, last), TP("t", 1): ({"n": 1}, 0)})
        is False
    )
    assert await coord.share_states("sg") == {TP("t", 0): ({"n": 0}, 0), TP("t", 1): ({"n": 0}, 0)}


async def test_a_creation_loses_to_a_state_created_first_and_stores_nothing(
    coord: ZooKeeperCoordinator, raw: KazooClient
) -> None:
    raw.create(f"{SHARE_GROUPS}/sg/t/0", b'{"by":"other"}', makepath=True)
    assert (
        await coord.store_share_states("sg", {TP("t", 0): ({"by": "me"}, -1), TP("t", 1): ({}, -1)}) is False
    )
    assert await coord.share_states("sg") == {TP("t", 0): ({"by": "other"}, 0)}
    assert raw.exists(f"{SHARE_GROUPS}/sg/t/1") is None


async def test_deletes_leave_no_empty_znodes(coord: ZooKeeperCoordinator, raw: KazooClient) -> None:
    await coord.store_share_states("sg", {TP("t", 0): ({}, -1), TP("t", 1): ({}, -1), TP("u", 0): ({}, -1)})
    await coord.delete_share_states("sg", [TP("u", 0), TP("t", 0)])
    assert raw.get_children(f"{SHARE_GROUPS}/sg") == ["t"]
    assert raw.get_children(f"{SHARE_GROUPS}/sg/t") == ["1"]
    await coord.delete_share_states("sg")
    assert raw.get_children(SHARE_GROUPS) == []
    # An empty group znode (a write that died after making its parents) holds no state.
    raw.ensure_path(f"{SHARE_GROUPS}/half/t")
    assert await coord.share_groups() == []
    assert await coord.store_share_states("half", {TP("t", 0): ({}, -1)})
    assert await coord.share_groups() == ["half"]


async def test_a_state_another_program_damaged_is_an_error(
    coord: ZooKeeperCoordinator, raw: KazooClient
) -> None:
    await coord.store_share_states("sg", {TP("t", 0): ({}, -1)})
    raw.set(f"{SHARE_GROUPS}/sg/t/0", b"not json")
    with pytest.raises(BackendError, match="partition t-0 of share group 'sg' is not JSON"):
        await coord.share_states("sg")
    raw.create(f"{SHARE_GROUPS}/sg/t/not-a-partition", b"{}")  # what is no partition is left alone
    raw.set(f"{SHARE_GROUPS}/sg/t/0", b"[]")
    with pytest.raises(BackendError, match="not a JSON object"):
        await coord.share_states("sg")


USER, PASSWORD = "brokergate", "zk-secret"
# ZooKeeper's digest id: the user and base64(sha1("user:password"))
GATEWAY_ONLY = ACL(Permissions.ALL, Id("digest", f"{USER}:aPhXwTE6MqBnt0oN2R3GStD/4rg="))
ANYONE_READS = ACL(Permissions.READ, Id("world", "anyone"))


async def test_states_are_the_gateways_to_change(zk_url: str, make_coordinator: CoordinatorFactory) -> None:
    coordinator = make_coordinator(zk_url, node_id="owner", credentials=DigestCredentials(USER, PASSWORD))
    await coordinator.start()
    await coordinator.store_share_states("sg", {TP("t", 0): ({"n": 1}, -1)})
    # As the gateway (ZooKeeper shows a digest id's hash only to that identity), then as anyone else.
    server, chroot = zk_url.removeprefix("zookeeper://").rsplit("/", 1)
    inspector = KazooClient(hosts=server, timeout=5.0, auth_data=[("digest", f"{USER}:{PASSWORD}")])
    inspector.start(timeout=10)
    stranger = raw_client(zk_url)
    try:
        for path in (SHARE_GROUPS, f"{SHARE_GROUPS}/sg", f"{SHARE_GROUPS}/sg/t", f"{SHARE_GROUPS}/sg/t/0"):
            assert inspector.get_acls(f"/{chroot}{path}")[0] == [GATEWAY_ONLY, ANYONE_READS], path
        assert json.loads(stranger.get(f"{SHARE_GROUPS}/sg/t/0")[0]) == {"n": 1, "format": 1}
        with pytest.raises(NoAuthError):
            stranger.set(f"{SHARE_GROUPS}/sg/t/0", b"{}")
        with pytest.raises(NoAuthError):
            stranger.create(f"{SHARE_GROUPS}/sg/t/1", b"{}")
        with pytest.raises(NoAuthError):
            stranger.delete(f"{SHARE_GROUPS}/sg/t/0")
    finally:
        for client in (inspector, stranger):
            client.stop()
            client.close()
    assert await coordinator.share_states("sg") == {TP("t", 0): ({"n": 1}, 0)}


async def test_a_reset_between_making_parents_and_writing_costs_a_retry(
    coord: ZooKeeperCoordinator, zk_url: str, make_coordinator: CoordinatorFactory
) -> None:
    """A create needs its parents, made before the transaction goes out; a reset of the group
    through another replica may delete them in between. The transaction fails, the parents are
    made again and the write lands; a reset that keeps coming in between makes it give up."""
    other = make_coordinator(zk_url, node_id="replica-b")
    await other.start()
    ensure_path = coord._zk.ensure_path
    resets = 0
    limit = 2

    async def ensure_then_reset(path: str, *, what: str) -> None:
        nonlocal resets
        await ensure_path(path, what=what)
        if resets < limit:
            resets += 1
            await other.delete_share_states("sg")

    coord._zk.ensure_path = ensure_then_reset  # type: ignore[method-assign]
    assert await coord.store_share_states("sg", {TP("t", 0): ({"n": 1}, -1)})
    assert resets == 2
    assert await other.share_states("sg") == {TP("t", 0): ({"n": 1}, 0)}

    limit = 1000
    with pytest.raises(BackendUnavailable, match="kept meeting deletes"):
        await coord.store_share_states("sg", {TP("u", 0): ({"n": 1}, -1)})
    assert await other.share_states("sg") == {}
