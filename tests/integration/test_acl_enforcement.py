"""How ACL decisions behave beyond the route table: deny wins, prefixes, hosts, revocation during
reading, patterns, auto-creation, super users, and consumer instances that belong to their creator."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from service.core.acl import Operation, ResourceType
from service.security.users import add_user
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import BINARY, V2, b64, cluster_id, create_topic
from tests.integration.test_authorization import Acls

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
READ, WRITE, CREATE, DESCRIBE, ALL = (
    Operation.READ,
    Operation.WRITE,
    Operation.CREATE,
    Operation.DESCRIBE,
    Operation.ALL,
)
RECORDS = {"records": [{"value": b64("v")}]}


@pytest.fixture(scope="module")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("users") / "users"
    for name in ("alice", "bob", "admin"):
        add_user(path, name, f"{name}-pw")
    return path


async def _serve(tmp_path: Path, users_file: Path, **overrides: object) -> RunningGateway:
    gw = await start_gateway(
        tmp_path / "data",
        **{
            "auth": "basic",
            "users_file": users_file,
            "authorize": True,
            "super_users": "User:admin",
            **overrides,
        },
    )
    gw.client.auth = httpx.BasicAuth("admin", "admin-pw")
    return gw


@pytest.fixture
async def gateway(tmp_path: Path, users_file: Path) -> AsyncIterator[RunningGateway]:
    gw = await _serve(tmp_path, users_file)
    try:
        yield gw
    finally:
        await gw.client.aclose()
        await gw.stop()


@pytest.fixture
async def acls(gateway: RunningGateway) -> Acls:
    return Acls(gateway.client, await cluster_id(gateway.client))


@pytest.fixture
async def alice(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, auth=("alice", "alice-pw"), timeout=30) as client:
        yield client


@pytest.fixture
async def bob(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, auth=("bob", "bob-pw"), timeout=30) as client:
        yield client


async def _produce(client: httpx.AsyncClient, topic: str) -> httpx.Response:
    return await client.post(f"/topics/{topic}", json=RECORDS, headers={"Content-Type": BINARY})


def forbidden(r: httpx.Response, *words: str) -> None:
    assert r.status_code == 403, r.text
    body = r.json()
    assert body["error_code"] == 40301
    for word in words:
        assert word in body["message"], body["message"]


async def test_deny_wins_and_prefixes_match(gateway, acls, alice):
    for topic in ("team-a.orders", "team-a.secret", "team-b.orders"):
        await create_topic(gateway.client, topic)
    await acls.grant("User:alice", TOPIC, "team-a.", WRITE, pattern_type="PREFIXED")
    await acls.grant("User:alice", TOPIC, "team-a.secret", WRITE, permission="DENY")
    assert (await _produce(alice, "team-a.orders")).status_code == 200
    forbidden(await _produce(alice, "team-a.secret"), "User:alice", "WRITE", "team-a.secret")
    forbidden(await _produce(alice, "team-b.orders"))
    # A wildcard ALLOW does not undo the DENY either.
    await acls.grant("User:*", TOPIC, "*", ALL)
    forbidden(await _produce(alice, "team-a.secret"))
    assert (await _produce(alice, "team-b.orders")).status_code == 200


@pytest.mark.parametrize("fast_path", [True, False])
async def test_produce_is_decided_alike_on_both_produce_paths(tmp_path, users_file, fast_path):
    gw = await _serve(tmp_path, users_file, produce_fast_path=fast_path)
    try:
        await create_topic(gw.client, "t")
        async with httpx.AsyncClient(base_url=gw.url, auth=("alice", "alice-pw")) as alice:
            forbidden(await _produce(alice, "t"))
            forbidden(
                await alice.post("/topics/t/partitions/0", json=RECORDS, headers={"Content-Type": BINARY})
            )
            await Acls(gw.client, await cluster_id(gw.client)).grant("User:alice", TOPIC, "t", WRITE)
            assert (await _produce(alice, "t")).status_code == 200
        offsets = (await gw.client.get("/topics/t/partitions/0/offsets")).json()
        assert offsets["end_offset"] == 1  # only the allowed produce stored anything
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_binding_for_another_host_does_not_apply(gateway, acls, alice):
    await create_topic(gateway.client, "t")
    await acls.grant("User:alice", TOPIC, "t", WRITE, host="10.1.2.3")
    forbidden(await _produce(alice, "t"))
    await acls.grant("User:alice", TOPIC, "t", WRITE, host="127.0.0.1")
    assert (await _produce(alice, "t")).status_code == 200


async def test_taking_read_away_ends_a_reading_consumer_at_its_next_poll(gateway, acls, alice):
    await create_topic(gateway.client, "t")
    await acls.grant("User:alice", GROUP, "g", READ)
    await acls.grant("User:alice", TOPIC, "t", READ)
    await _produce(gateway.client, "t")
    base = "/consumers/g/instances/c"
    r = await alice.post(
        "/consumers/g", json={"name": "c", "auto.offset.reset": "earliest"}, headers={"Content-Type": V2}
    )
    assert r.status_code == 200, r.text
    r = await alice.post(f"{base}/subscription", json={"topics": ["t"]}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    r = await alice.get(f"{base}/records", params={"timeout": 2000}, headers={"Accept": BINARY})
    assert r.status_code == 200 and len(r.json()) == 1, r.text
    r = await gateway.client.delete(
        f"/v3/clusters/{await cluster_id(gateway.client)}/acls", params={"resource_type": "TOPIC"}
    )
    assert r.status_code == 200
    forbidden(
        await alice.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": BINARY}), "READ", "'t'"
    )


async def test_a_pattern_covers_only_the_topics_the_member_may_describe(gateway, acls, alice):
    for topic in ("metrics.a", "metrics.b"):
        await create_topic(gateway.client, topic)
    await acls.grant("User:alice", GROUP, "g", READ)
    await acls.grant("User:alice", TOPIC, "metrics.a", READ)
    base = "/consumers/g/instances/c"
    await alice.post("/consumers/g", json={"name": "c"}, headers={"Content-Type": V2})
    r = await alice.post(
        f"{base}/subscription", json={"topic_pattern": "metrics\\..*"}, headers={"Content-Type": V2}
    )
    assert r.status_code == 204, r.text
    r = await alice.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": BINARY})
    assert r.status_code == 200, r.text  # metrics.b is not hers to see, so not in her assignment
    assignment = (await alice.get(f"{base}/assignments")).json()["partitions"]
    assert assignment == [{"topic": "metrics.a", "partition": 0}]
    # Given DESCRIBE but not READ on the other, the group picks it up, and her poll is refused.
    await acls.grant("User:alice", TOPIC, "metrics.b", DESCRIBE)
    for _ in range(100):
        assignment = (await alice.get(f"{base}/assignments")).json()["partitions"]
        if len(assignment) == 2:
            break
        await asyncio.sleep(0.05)
    assert {p["topic"] for p in assignment} == {"metrics.a", "metrics.b"}
    forbidden(
        await alice.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": BINARY}), "metrics.b"
    )


async def test_auto_creating_a_topic_needs_create(gateway, acls, alice):
    await acls.grant("User:alice", TOPIC, "auto", WRITE)
    forbidden(await _produce(alice, "auto"), "CREATE", "'auto'")
    assert (await gateway.client.get("/topics/auto")).status_code == 404  # nothing was created
    await acls.grant("User:alice", TOPIC, "auto", CREATE)
    assert (await _produce(alice, "auto")).status_code == 200
    await acls.grant("User:alice", CLUSTER, "kafka-cluster", CREATE)  # or the cluster's CREATE
    await acls.grant("User:alice", TOPIC, "auto-", WRITE, pattern_type="PREFIXED")
    assert (await _produce(alice, "auto-2")).status_code == 200


async def test_an_instance_belongs_to_its_creator(gateway, acls, alice, bob):
    await create_topic(gateway.client, "t")
    for who in ("User:alice", "User:bob"):
        await acls.grant(who, GROUP, "g", ALL)
        await acls.grant(who, TOPIC, "t", ALL)
    r = await alice.post("/consumers/g", json={"name": "c"}, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text
    base = "/consumers/g/instances/c"
    partitions = {"partitions": [{"topic": "t", "partition": 0}]}
    for method, path, body in [
        ("GET", "/subscription", None),
        ("POST", "/subscription", {"topics": ["t"]}),
        ("POST", "/assignments", partitions),
        ("GET", "/assignments", None),
        ("GET", "/records", None),
        ("POST", "/offsets", None),
        ("GET", "/offsets", None),
        ("POST", "/positions/beginning", partitions),
        ("DELETE", "/subscription", None),
        ("DELETE", "", None),
    ]:
        r = await bob.request(method, base + path, json=body, headers={"Content-Type": V2, "Accept": BINARY})
        assert r.status_code == 404, f"{method} {path}: {r.status_code} {r.text}"
        assert r.json()["error_code"] == 40403
    # Bob may not take the name either, and the instance is still alice's.
    r = await bob.post("/consumers/g", json={"name": "c"}, headers={"Content-Type": V2})
    assert r.status_code == 409, r.text
    assert (await alice.get(base + "/subscription")).status_code == 200
    # A super user reaches it (to clean up after a team).
    assert (await gateway.client.delete(base)).status_code == 204
    assert (await alice.get(base + "/subscription")).status_code == 404


async def test_instances_belong_to_their_creator_with_authorization_off(tmp_path, users_file):
    gw = await start_gateway(tmp_path / "data", auth="basic", users_file=users_file)
    try:
        async with (
            httpx.AsyncClient(base_url=gw.url, auth=("alice", "alice-pw")) as alice,
            httpx.AsyncClient(base_url=gw.url, auth=("bob", "bob-pw")) as bob,
        ):
            assert (
                await alice.post("/consumers/g", json={"name": "c"}, headers={"Content-Type": V2})
            ).status_code == 200
            assert (await bob.delete("/consumers/g/instances/c")).status_code == 404
            assert (await alice.delete("/consumers/g/instances/c")).status_code == 204
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_without_authentication_every_caller_is_anonymous(tmp_path):
    gw = await start_gateway(tmp_path / "data", authorize=True)
    try:
        await gw.client.get("/topics")
        forbidden(await _produce(gw.client, "t"), "User:ANONYMOUS")
        # With no binding and no super user, the ACL API itself is closed too: SUPER_USERS is how
        # the first binding gets made, as in Kafka.
        forbidden(await gw.client.get(f"/v3/clusters/{await cluster_id(gw.client)}/acls"))
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_the_audit_trail_keeps_refusals_acl_changes_topic_changes_and_admin_deletes(
    tmp_path, users_file
):
    trail = tmp_path / "audit.log"
    gw = await _serve(tmp_path, users_file, audit_log=trail)
    try:
        cid = await cluster_id(gw.client)
        async with httpx.AsyncClient(base_url=gw.url, auth=("alice", "alice-pw")) as alice:
            await create_topic(gw.client, "t")
            forbidden(await _produce(alice, "t"))
            acls = Acls(gw.client, cid)
            await acls.grant("User:alice", GROUP, "g", READ)
            await alice.post("/consumers/g", json={"name": "c"}, headers={"Content-Type": V2})
            assert (await gw.client.delete("/consumers/g/instances/c")).status_code == 204
            await gw.client.patch(f"/v3/clusters/{cid}/topics/t", json={"partitions_count": 2})
            await gw.client.delete(f"/v3/clusters/{cid}/topics/t")
            await acls.revoke_all("User:alice")
    finally:
        await gw.client.aclose()
        await gw.stop()
    lines = [json.loads(line) for line in trail.read_text().splitlines()]
    events = [(x["event"], x["principal"], x["operation"], x["resource"], x["outcome"]) for x in lines]
    assert events == [
        ("topic.create", "User:admin", "CREATE", "TOPIC:t", "ALLOWED"),
        ("authorization", "User:alice", "WRITE", "TOPIC:t", "DENIED"),
        ("acl.create", "User:admin", "ALTER", "CLUSTER:kafka-cluster", "ALLOWED"),
        ("consumer.delete", "User:admin", "DELETE", "GROUP:g", "ALLOWED"),
        ("topic.alter", "User:admin", "ALTER", "TOPIC:t", "ALLOWED"),
        ("topic.delete", "User:admin", "DELETE", "TOPIC:t", "ALLOWED"),
        ("acl.delete", "User:admin", "ALTER", "CLUSTER:kafka-cluster", "ALLOWED"),
    ]
    assert all(x["address"] == "127.0.0.1" and x["time"].endswith("Z") for x in lines)
    assert lines[2]["binding"]["principal"] == "User:alice"
    assert lines[3]["instance"] == "c" and lines[3]["owner"] == "User:alice"
