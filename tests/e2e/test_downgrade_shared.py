"""Going back a release with state that replicas share: ZooKeeper's znodes and Redis's keys.

Each store carries one format marker (``/brokergate/format``, ``{prefix}format``), written at
start by the newest release that started on it; a release that finds a newer one refuses to start
in one line. A record of a newer format that appears while a replica runs (another replica, of a
newer release, wrote it) is answered 503 for that request, retriable, never 500 nor "damaged".
The release before the markers reads what this one writes in both stores (docs/upgrading.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kazoo.client import KazooClient

from deploy.local.redis_server import RedisServer
from deploy.local.zookeeper_server import ZooKeeperServer
from service.errors import ErrorCode
from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.test_downgrade import (
    JSON_ACCEPT,
    TOPIC,
    _previous_gateway,
    _refusal,
    _start_until_exit,
    _write_data_dir,
    previous_release,
)
from tests.helpers import V2

__all__ = ["previous_release"]  # the fixture, shared with the data dir's tests


@pytest.fixture
def shared(zookeeper: ZooKeeperServer, redis_server: RedisServer) -> dict[str, str]:
    """Settings of a gateway on this test's own chroot in ZooKeeper and key prefix in Redis."""
    tag = uuid.uuid4().hex[:12]
    return {
        "BROKERGATE_COORDINATOR": f"{zookeeper.url}/t-{tag}",
        "BROKERGATE_SESSIONS": redis_server.url,
        "BROKERGATE_REDIS_KEY_PREFIX": f"bg-{tag}:",
    }


@pytest.fixture
def zk(zookeeper: ZooKeeperServer, shared: dict[str, str]) -> Iterator[KazooClient]:
    """A plain client in the test's chroot, as another program (or release) sees the znodes."""
    server, chroot = shared["BROKERGATE_COORDINATOR"].removeprefix("zookeeper://").split("/", 1)
    root = KazooClient(hosts=server, timeout=5.0)
    root.start(timeout=10)
    root.ensure_path(f"/{chroot}")  # as the gateway would, so that the client finds its root
    root.stop()
    root.close()
    client = KazooClient(hosts=f"{server}/{chroot}", timeout=5.0)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _bump(doc: bytes, field: str = "format") -> bytes:
    obj = json.loads(doc)
    obj[field] = obj.get(field, 1) + 1
    return json.dumps(obj).encode()


def _write(data: Path, shared: dict[str, str], *, share_group: bool = False) -> None:
    """What ``_write_data_dir`` writes, on ZooKeeper and Redis: its consumer instance (``c`` of
    group ``g``, assigned partition 0) stays in Redis after the gateway stops."""
    _write_data_dir(data, share_group=share_group, env=shared)


# --- a newer marker refuses the start ----------------------------------------------------------


def test_the_markers_hold_this_releases_format(
    tmp_path: Path, shared: dict[str, str], zk: KazooClient, redis_server: RedisServer
) -> None:
    _write(tmp_path / "data", shared)
    assert json.loads(zk.get("/brokergate/format")[0]) == {"format": 1}
    assert redis_server.client().get(shared["BROKERGATE_REDIS_KEY_PREFIX"] + "format") == b"1"


@pytest.mark.parametrize("form", ["ZooKeeper marker", "Redis marker", "ACL znode"])
def test_a_newer_shared_form_refuses_the_start_in_one_line(
    tmp_path: Path, shared: dict[str, str], zk: KazooClient, redis_server: RedisServer, form: str
) -> None:
    data = tmp_path / "data"
    _write(data, shared)
    redis = redis_server.client()
    marker = shared["BROKERGATE_REDIS_KEY_PREFIX"] + "format"
    if form == "ZooKeeper marker":
        zk.set("/brokergate/format", _bump(zk.get("/brokergate/format")[0]))
        where = "/brokergate/format"
    elif form == "Redis marker":
        redis.set(marker, b"2")
        where = marker
    else:  # Kafka's own number, "version" 1
        path = f"/kafka-acl/Topic/{TOPIC}"
        zk.set(path, _bump(zk.get(path)[0], "version"))
        where = path
    line = _refusal(_start_until_exit(data, env=shared))
    assert where in line
    assert "was written by a newer release (format 2; this release reads up to 1)" in line
    # Nothing was rewritten: the newer release finds its store as it left it.
    if form == "Redis marker":
        assert redis.get(marker) == b"2"
    else:
        assert json.loads(zk.get(where)[0])["version" if form == "ACL znode" else "format"] == 2


# --- a newer record met while serving: 503 for that request ------------------------------------


def _newer_record_answers_503(client: httpx.Client, request: httpx.Request) -> None:
    r = client.send(request)
    assert r.status_code == 503, r.text
    assert r.json()["error_code"] == ErrorCode.UNAVAILABLE
    assert "was written by a newer release (format 2; this release reads up to 1)" in r.json()["message"]
    assert "Retry-After" in r.headers


def test_a_newer_record_appearing_later_answers_503(
    tmp_path: Path, shared: dict[str, str], zk: KazooClient, redis_server: RedisServer
) -> None:
    data = tmp_path / "data"
    _write(data, shared, share_group=True)
    gateway = GatewayProcess(data, env=shared).start()
    try:
        with httpx.Client(base_url=gateway.url, timeout=20) as client:
            # A consumer instance in Redis (the one _write left), rewritten by a "newer release".
            redis = redis_server.client()
            key = shared["BROKERGATE_REDIS_KEY_PREFIX"] + "instance:g/c"
            body = redis.hget(key, "state")
            assert body is not None and json.loads(body)["format"] == 1
            redis.hset(key, "state", _bump(body))
            _newer_record_answers_503(
                client, client.build_request("GET", "/consumers/g/instances/c/assignments")
            )
            redis.hset(key, "state", body)
            r = client.get("/consumers/g/instances/c/assignments")
            assert r.status_code == 200, r.text

            # A group's member and its generation in ZooKeeper, met by the next member's join.
            subscription = {"topics": [TOPIC]}
            for name in ("s1", "s2", "s3"):
                body = {"name": name, "format": "json"}
                assert (
                    client.post("/consumers/subs", json=body, headers={"Content-Type": V2}).status_code == 200
                )
            r = client.post(
                "/consumers/subs/instances/s1/subscription", json=subscription, headers={"Content-Type": V2}
            )
            assert r.status_code == 204, r.text
            [member] = zk.get_children("/brokergate/groups/subs/members")
            for path, joining in (
                ("/brokergate/groups/subs/state", "s2"),
                (f"/brokergate/groups/subs/members/{member}", "s3"),
            ):
                stored = zk.get(path)[0]
                zk.set(path, _bump(stored))
                join = client.build_request(
                    "POST",
                    f"/consumers/subs/instances/{joining}/subscription",
                    json=subscription,
                    headers={"Content-Type": V2},
                )
                _newer_record_answers_503(client, join)
                zk.set(path, stored)

            # A share group's delivery state.
            path = f"/brokergate/share-groups/workers/{TOPIC}/0"
            stored = zk.get(path)[0]
            zk.set(path, _bump(stored))
            poll = client.build_request(
                "GET", "/share-groups/workers/consumers/w1/records", headers=JSON_ACCEPT
            )
            _newer_record_answers_503(client, poll)
            zk.set(path, stored)
            assert client.send(poll).status_code == 200
    finally:
        gateway.stop()


# --- the release before the markers ------------------------------------------------------------


def test_the_previous_release_reads_what_this_one_shared(
    tmp_path: Path, shared: dict[str, str], zk: KazooClient, previous_release: Path
) -> None:
    """9327361 reads this release's groups, committed offsets, ACLs, consumer instances and share
    states in ZooKeeper and Redis: the format fields are fields it ignores, the markers keys and
    znodes it never reads."""
    data = tmp_path / "data"
    _write(data, shared, share_group=True)
    gateway = _previous_gateway(data, previous_release, env=shared)
    try:
        with httpx.Client(base_url=gateway.url, timeout=20) as client:
            # The consumer instance this release left in Redis, and its group in ZooKeeper.
            base = "/consumers/g/instances/c"
            r = client.get(f"{base}/assignments")
            assert r.status_code == 200, r.text
            assert r.json()["partitions"] == [{"topic": TOPIC, "partition": 0}]
            wanted = {"partitions": [{"topic": TOPIC, "partition": 0}]}
            r = client.request("GET", f"{base}/offsets", json=wanted, headers={"Content-Type": V2})
            assert r.status_code == 200, r.text
            assert [o["offset"] for o in r.json()["offsets"]] == [4]
            cluster = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
            acls = client.get(f"/v3/clusters/{cluster}/acls").json()["data"]
            assert [(a["principal"], a["operation"]) for a in acls] == [("User:alice", "READ")]
            # The share group goes on where this release left it: offset 0 accepted, 1-4 to deliver.
            share = "/share-groups/workers/consumers"
            body = {"name": "w2", "format": "json", "share.auto.offset.reset": "earliest"}
            assert client.post(share, json=body, headers={"Content-Type": V2}).status_code == 200
            r = client.post(
                f"{share}/w2/subscription", json={"topics": [TOPIC]}, headers={"Content-Type": V2}
            )
            assert r.status_code == 204, r.text
            r = client.get(f"{share}/w2/records", headers=JSON_ACCEPT)
            assert r.status_code == 200, r.text
            assert 0 not in [rec["offset"] for rec in r.json()]
    finally:
        gateway.stop()
    # This release starts on it again: the previous one changed no marker.
    gateway = GatewayProcess(data, env=shared).start()
    try:
        assert httpx.get(f"{gateway.url}/consumers/g/instances/c/assignments").status_code == 200
    finally:
        gateway.stop()
    assert json.loads(zk.get("/brokergate/format")[0]) == {"format": 1}
