"""What one principal must not learn of another's: which consumer instances exist (one answer for
another's and a missing one, on every instance route and transport), what a body names before the
instance is found to be another's, and, on the open /readyz, the names of topics."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from service.api.access import check_rules
from service.core.acl import Operation, ResourceType
from service.security.users import add_user
from service.server.app import create_app
from service.settings import Settings
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import BINARY, V2, b64, create_topic

ALICE = ("alice", "alice-pw")
BOB = ("bob", "bob-pw")
ADMIN = ("admin", "admin-pw")
INSTANCE_ROUTES = [key for _, key in check_rules(create_app(Settings()).routes) if "{instance}" in key]
_PARTITIONS = {"partitions": [{"topic": "t", "partition": 0}]}
_OFFSETS = {"offsets": [{"topic": "t", "partition": 0, "offset": 0}]}
_ACKS = {"acknowledgements": [{"topic": "t", "partition": 0, "offsets": [0], "type": "accept"}]}
# A body each route reads, naming only what bob may read: the answer is decided by the instance alone.
BODIES: dict[str, dict[str, Any]] = {
    "POST /consumers/{group}/instances/{instance}/subscription": {"topics": ["t"]},
    "POST /consumers/{group}/instances/{instance}/assignments": _PARTITIONS,
    "POST /consumers/{group}/instances/{instance}/offsets": _OFFSETS,
    "GET /consumers/{group}/instances/{instance}/offsets": _PARTITIONS,
    "POST /consumers/{group}/instances/{instance}/positions": _OFFSETS,
    "POST /consumers/{group}/instances/{instance}/positions/beginning": _PARTITIONS,
    "POST /consumers/{group}/instances/{instance}/positions/end": _PARTITIONS,
    "POST /share-groups/{group}/consumers/{instance}/subscription": {"topics": ["t"]},
    "POST /share-groups/{group}/consumers/{instance}/records": _ACKS,
    "POST /share-groups/{group}/consumers/{instance}/acknowledgements": _ACKS,
}


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    users = tmp_path / "users"
    for name, password in (ALICE, BOB, ADMIN):
        add_user(users, name, password)
    running = await start_gateway(
        tmp_path / "data", auth="basic", users_file=users, authorize=True, super_users="User:admin"
    )
    running.client.auth = httpx.BasicAuth(*ADMIN)
    try:
        await _grant(running)
        yield running
    finally:
        await running.client.aclose()
        await running.stop()


async def _grant(gw: RunningGateway) -> None:
    """Alice and bob may use groups g and sg and read topic t; only alice may read topic secret."""
    admin = gw.client
    for topic in ("t", "secret"):
        await create_topic(admin, topic, 1)
    cluster = (await admin.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    grants = [(ResourceType.GROUP, group, Operation.ALL) for group in ("g", "sg")]
    grants.append((ResourceType.TOPIC, "t", Operation.ALL))
    for user in ("alice", "bob"):
        for resource, name, operation in grants:
            body = {
                "resource_type": resource.value,
                "resource_name": name,
                "pattern_type": "LITERAL",
                "principal": f"User:{user}",
                "host": "*",
                "operation": operation.value,
                "permission": "ALLOW",
            }
            r = await admin.post(f"/v3/clusters/{cluster}/acls", json=body)
            assert r.status_code == 201, r.text
    body["principal"], body["resource_type"], body["resource_name"] = "User:alice", "TOPIC", "secret"
    assert (await admin.post(f"/v3/clusters/{cluster}/acls", json=body)).status_code == 201


async def _alices_instances(gw: RunningGateway) -> None:
    """Alice's consumer instance i in group g, subscribed to t, and her share consumer i in sg."""
    async with httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth(*ALICE), timeout=30) as alice:
        r = await alice.post("/consumers/g", json={"name": "i"}, headers={"Content-Type": V2})
        assert r.status_code == 200, r.text
        r = await alice.post(
            "/consumers/g/instances/i/subscription", json={"topics": ["t"]}, headers={"Content-Type": V2}
        )
        assert r.status_code == 204, r.text
        r = await alice.post("/share-groups/sg/consumers", json={"name": "i"}, headers={"Content-Type": V2})
        assert r.status_code == 200, r.text


def _path(key: str, instance: str) -> tuple[str, str]:
    method, template = key.split(" ", 1)
    group = "sg" if template.startswith("/share-groups") else "g"
    return method, template.format(group=group, instance=instance)


async def _ws_answer(gw: RunningGateway, path: str) -> tuple[int, bytes]:
    url = gw.url.replace("http", "ws", 1) + path
    auth = httpx.BasicAuth(*BOB)._auth_header
    try:
        async with websockets.connect(url, additional_headers={"Authorization": auth}, open_timeout=10):
            pass
    except InvalidStatus as refused:
        return refused.response.status_code, bytes(refused.response.body or b"")
    raise AssertionError(f"{path}: bob's handshake was accepted")


def _not_found(group: str, instance: str) -> tuple[int, bytes]:
    """The one 404 for an instance the caller cannot reach: Confluent's sentence, then the group and
    the instance the caller named."""
    message = f"Consumer instance not found: group '{group}', instance '{instance}'."
    return 404, b'{"error_code":40403,"message":"' + message.encode() + b'"}'


async def _bobs_answers(gw: RunningGateway, instance: str) -> dict[str, list[tuple[int, bytes]]]:
    """What bob is answered on every instance route (and its SSE stream, its WebSocket) for ``instance``."""
    answers: dict[str, list[tuple[int, bytes]]] = {}
    async with httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth(*BOB), timeout=30) as bob:
        for key in INSTANCE_ROUTES:
            method, path = _path(key, instance)
            if method == "WS":
                answers[key] = [await _ws_answer(gw, path)]
                continue
            kwargs: dict[str, Any] = {"params": {"timeout": "0"}}
            if key in BODIES:
                kwargs |= {"json": BODIES[key], "headers": {"Content-Type": V2}}
            r = await bob.request(method, path, **kwargs)
            answers[key] = [(r.status_code, r.content)]
            if key.endswith("/records") and method == "GET":  # the SSE stream of the same route
                r = await bob.get(path, headers={"Accept": "text/event-stream"})
                answers[key].append((r.status_code, r.content))
    return answers


async def test_another_principals_instance_is_answered_as_a_missing_one_byte_for_byte(
    gw: RunningGateway,
) -> None:
    """Bob asking for alice's instance i gets, byte for byte, what he gets for i once alice has
    deleted it: the 404 naming the group and the instance he asked for, and nothing else."""
    await _alices_instances(gw)
    assert len(INSTANCE_ROUTES) >= 19
    alices = await _bobs_answers(gw, "i")
    async with httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth(*ALICE), timeout=30) as alice:
        # alice's instances are still there and still hers
        assert (await alice.get("/consumers/g/instances/i/subscription")).json() == {"topics": ["t"]}
        assert (await alice.delete("/consumers/g/instances/i")).status_code == 204
        assert (await alice.delete("/share-groups/sg/consumers/i")).status_code == 204
    assert await _bobs_answers(gw, "i") == alices
    for instance, answers in (("i", alices), ("zz", await _bobs_answers(gw, "zz"))):
        for key, answered in answers.items():
            group = "sg" if " /share-groups" in key else "g"
            assert set(answered) == {_not_found(group, instance)}, (key, answered)


# Bodies that are empty or name nothing to do: each instance route is sent each of them (and none),
# so a route that answers such a body without finding the instance shows, whatever its kind.
TRIVIAL_BODIES: list[dict[str, Any] | None] = [
    None,
    {},
    {"offsets": []},
    {"timestamps": []},
    {"offsets": [], "timestamps": []},
    {"partitions": []},
    {"topics": []},
    {"acknowledgements": []},
]


async def test_an_empty_or_trivial_body_gets_the_missing_instances_404_on_every_instance_route(
    gw: RunningGateway,
) -> None:
    """Confluent's proxy finds the instance before anything its body names: for a missing instance,
    and for another principal's, every instance route answers 40403, whatever the body, even one
    with nothing to do (``{"offsets": []}`` to /positions), never a 204 or 200."""
    await _alices_instances(gw)
    routes = [key for key in INSTANCE_ROUTES if not key.startswith("WS ")]  # handshakes: above
    assert len(routes) >= 18
    wrong = []
    async with httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth(*BOB), timeout=30) as bob:
        for key in routes:
            for body in TRIVIAL_BODIES:
                for instance in ("i", "zz"):  # alice's, and none
                    method, path = _path(key, instance)
                    kwargs: dict[str, Any] = {"params": {"timeout": "0"}}
                    if body is not None:
                        kwargs |= {"json": body, "headers": {"Content-Type": V2}}
                    r = await bob.request(method, path, **kwargs)
                    if (r.status_code, r.content) != _not_found(path.split("/")[2], instance):
                        wrong.append((key, body, instance, r.status_code, r.text[:80]))
    assert not wrong, "\n".join(map(str, wrong))
    # for its owner, a body with nothing to do is still done, changing nothing
    async with httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth(*ALICE), timeout=30) as alice:
        for route in ("positions", "subscription"):
            r = await alice.post(f"/consumers/g/instances/i/{route}", json={}, headers={"Content-Type": V2})
            assert r.status_code == 204, r.text
        r = await alice.post(
            "/consumers/g/instances/i/positions", json={"offsets": []}, headers={"Content-Type": V2}
        )
        assert r.status_code == 204, r.text
        assert (await alice.get("/consumers/g/instances/i/subscription")).json() == {"topics": ["t"]}


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/consumers/g/instances/{}/subscription", {"topics": ["secret"]}),
        ("/consumers/g/instances/{}/subscription", {"topic_pattern": "(unclosed"}),
        ("/consumers/g/instances/{}/assignments", {"partitions": [{"topic": "secret", "partition": 0}]}),
        ("/consumers/g/instances/{}/assignments", {"partitions": [{"topic": "t", "partition": 99}]}),
        (
            "/consumers/g/instances/{}/positions",
            {"offsets": [{"topic": "secret", "partition": 0, "offset": 0}]},
        ),
        ("/consumers/g/instances/{}/positions/end", {"partitions": [{"topic": "secret", "partition": 0}]}),
        ("/share-groups/sg/consumers/{}/subscription", {"topics": ["secret"]}),
        (
            "/share-groups/sg/consumers/{}/acknowledgements",
            {"acknowledgements": [{"topic": "secret", "partition": 0, "offsets": [0], "type": "accept"}]},
        ),
    ],
)
async def test_the_instance_is_decided_before_what_the_body_names(
    gw: RunningGateway, route: str, body: dict[str, Any]
) -> None:
    """Bob naming a topic he may not read (or a bad pattern, a missing partition) for alice's
    instance gets the documented 404, not a 403 that names the topic."""
    await _alices_instances(gw)
    async with httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth(*BOB), timeout=30) as bob:
        r = await bob.post(route.format("i"), json=body, headers={"Content-Type": V2})
        assert r.status_code == 404 and r.json()["error_code"] == 40403, r.text
        assert "secret" not in r.text
    async with httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth(*ALICE), timeout=30) as alice:
        r = await alice.get("/consumers/g/instances/i/subscription")
        assert r.json() == {"topics": ["t"]}  # untouched


async def test_readyz_names_unopened_topics_only_to_who_may_describe_the_cluster(tmp_path: Path) -> None:
    users = tmp_path / "users"
    for name, password in (BOB, ADMIN):
        add_user(users, name, password)
    settings: dict[str, Any] = {
        "auth": "basic",
        "users_file": users,
        "authorize": True,
        "super_users": "User:admin",
    }
    gw = await start_gateway(tmp_path / "gw", **settings)
    gw.client.auth = httpx.BasicAuth(*ADMIN)
    try:
        await create_topic(gw.client, "payroll-2027", 1)
        r = await gw.client.post(
            "/topics/payroll-2027", json={"records": [{"value": b64("x")}]}, headers={"Content-Type": BINARY}
        )
        assert r.status_code == 200, r.text
    finally:
        await gw.client.aclose()
        await gw.stop()
    partition = tmp_path / "gw" / "topics" / "payroll-2027" / "0"
    for f in partition.iterdir():
        f.unlink()
    partition.rmdir()
    partition.write_bytes(b"")  # a topic the log cannot open at start

    gw = await start_gateway(tmp_path / "gw", **settings)
    try:
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as anonymous:
            r = await anonymous.get("/readyz")
        assert r.status_code == 200 and "payroll" not in r.text, r.text
        assert r.json() == {"status": "ready", "unopened_topics_count": 1}
        r = await gw.client.get("/readyz", auth=BOB)  # authenticated, but no CLUSTER DESCRIBE
        assert r.status_code == 200 and "payroll" not in r.text, r.text
        r = await gw.client.get("/readyz", auth=ADMIN)
        assert list(r.json()["unopened_topics"]) == ["payroll-2027"], r.text
    finally:
        await gw.client.aclose()
        await gw.stop()
