"""Authorization: every route of the app, generated from its route list, against ``access.RULES``.

For each route the test grants a principal every operation its rule names but one, in turn, and
proves the route refuses (403/40301, nothing done); then grants them all and proves it answers
2xx. A route added to the app without a rule fails the app's start, and without a sample here
fails this test: no route can slip past. Listings are proven to show only what may be described.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from service.api.access import RULES, Need, UnruledRoute, check_rules
from service.core.acl import CLUSTER_NAME, Operation, ResourceType
from service.server.app import create_app
from service.settings import Settings
from tests.conftest import RunningGateway, running_gateway
from tests.helpers import BINARY, V2, b64

ALICE = ("alice", "alice-pw")
ADMIN = ("admin", "admin-pw")


@dataclass(frozen=True)
class Names:
    topic: str
    group: str
    instance: str
    new_topic: str  # a topic the request creates
    cluster: str

    @property
    def subject(self) -> str:
        """The schema subject of the topic's values (TopicNameStrategy)."""
        return f"{self.topic}-value"


@dataclass(frozen=True)
class Sample:
    """A request the route answers 2xx when allowed; ``setup`` is what must exist first:
    ``topic`` the topic; ``fresh`` also alice's consumer instance; ``assigned`` that instance
    assigned partition 0 of the topic; ``subscribed`` subscribed to the topic; ``schema`` schema
    1 registered as version 1 of the topic's value subject, which has a level and a mode of its own."""

    setup: str = "topic"
    body: Callable[[Names], Any] | None = None
    content_type: str = V2
    query: dict[str, str] = field(default_factory=dict)
    named_topic: Callable[[Names], str] = lambda n: n.topic


def _partitions(n: Names) -> dict[str, Any]:
    return {"partitions": [{"topic": n.topic, "partition": 0}]}


def _acknowledgements(n: Names) -> dict[str, Any]:
    return {"acknowledgements": [{"topic": n.topic, "partition": 0, "offsets": [0], "type": "renew"}]}


def _push_spec(n: Names) -> dict[str, Any]:
    return {"endpoint": "http://127.0.0.1:9/hook", "topics": [n.topic]}


_RECORDS = Sample(body=lambda n: {"records": [{"value": b64("v")}]}, content_type=BINARY)
_V3 = "application/json"
INSTANCE = "/consumers/{group}/instances/{instance}"
SHARE = "/share-groups/{group}/consumers"
V3 = "/v3/clusters/{cluster_id}"
PUSH = V3 + "/push-subscriptions/{name}"
SR = "/schema-registry"
_SR_TYPE = "application/vnd.schemaregistry.v1+json"
_STRING = '{"type": "string"}'
_SCHEMA = Sample(setup="schema", body=lambda n: {"schema": _STRING}, content_type=_SR_TYPE)
_REGISTERED = Sample(setup="schema")

SAMPLES: dict[str, Sample] = {
    "GET /openapi.json": Sample(),
    "GET /docs": Sample(),
    "GET /docs/oauth2-redirect": Sample(),
    "GET /redoc": Sample(),
    "GET /docs/{asset}": Sample(),
    "GET /healthz": Sample(),
    "GET /readyz": Sample(),
    "GET /": Sample(),
    "GET /ui": Sample(),
    "GET /ui/{asset}": Sample(),
    "GET /brokers": Sample(),
    "GET /metrics": Sample(),
    "GET /v3/clusters": Sample(),
    f"GET {V3}": Sample(),
    f"GET {V3}/brokers": Sample(),
    "GET /topics": Sample(),
    "GET /asyncapi.json": Sample(),
    f"GET {V3}/topics": Sample(),
    "GET /topics/{topic}": Sample(),
    f"GET {V3}/topics/{{topic}}": Sample(),
    "GET /topics/{topic}/partitions": Sample(),
    f"GET {V3}/topics/{{topic}}/partitions": Sample(),
    "GET /topics/{topic}/partitions/{partition}": Sample(),
    "GET /topics/{topic}/partitions/{partition}/offsets": Sample(),
    "GET /topics/{topic}/partitions/{partition}/records": Sample(query={"offset": "0"}),
    "POST /topics/{topic}": _RECORDS,
    "POST /topics/{topic}/partitions/{partition}": _RECORDS,
    f"POST {V3}/topics": Sample(
        body=lambda n: {"topic_name": n.new_topic, "partitions_count": 1},
        content_type=_V3,
        named_topic=lambda n: n.new_topic,
    ),
    f"PATCH {V3}/topics/{{topic}}": Sample(body=lambda n: {"partitions_count": 2}, content_type=_V3),
    f"DELETE {V3}/topics/{{topic}}": Sample(),
    "POST /consumers/{group}": Sample(body=lambda n: {"name": "another", "format": "binary"}),
    f"DELETE {INSTANCE}": Sample(setup="fresh"),
    f"POST {INSTANCE}/subscription": Sample(setup="fresh", body=lambda n: {"topics": [n.topic]}),
    f"GET {INSTANCE}/subscription": Sample(setup="fresh"),
    f"DELETE {INSTANCE}/subscription": Sample(setup="subscribed"),
    f"POST {INSTANCE}/assignments": Sample(setup="fresh", body=_partitions),
    f"GET {INSTANCE}/assignments": Sample(setup="assigned"),
    f"GET {INSTANCE}/records": Sample(setup="assigned", query={"timeout": "0"}),
    # a session that produces a record and is sent it (``_socket``)
    f"WS {INSTANCE}/records": Sample(setup="assigned"),
    f"POST {INSTANCE}/offsets": Sample(
        setup="assigned", body=lambda n: {"offsets": [{"topic": n.topic, "partition": 0, "offset": 0}]}
    ),
    f"GET {INSTANCE}/offsets": Sample(setup="assigned", body=_partitions),
    f"POST {INSTANCE}/positions": Sample(
        setup="assigned", body=lambda n: {"offsets": [{"topic": n.topic, "partition": 0, "offset": 0}]}
    ),
    f"POST {INSTANCE}/positions/beginning": Sample(setup="assigned", body=_partitions),
    f"POST {INSTANCE}/positions/end": Sample(setup="assigned", body=_partitions),
    f"POST {SHARE}": Sample(body=lambda n: {"name": "another", "format": "binary"}),
    f"DELETE {SHARE}/{{instance}}": Sample(setup="share"),
    f"POST {SHARE}/{{instance}}/subscription": Sample(setup="share", body=lambda n: {"topics": [n.topic]}),
    f"GET {SHARE}/{{instance}}/subscription": Sample(setup="share"),
    f"DELETE {SHARE}/{{instance}}/subscription": Sample(setup="share-subscribed"),
    f"GET {SHARE}/{{instance}}/records": Sample(setup="share-subscribed", query={"timeout": "0"}),
    f"POST {SHARE}/{{instance}}/records": Sample(
        setup="share-subscribed", query={"timeout": "0"}, body=_acknowledgements
    ),
    f"POST {SHARE}/{{instance}}/acknowledgements": Sample(setup="share-subscribed", body=_acknowledgements),
    f"GET {V3}/share-groups": Sample(setup="share-subscribed"),
    f"GET {V3}/share-groups/{{group}}": Sample(setup="share-subscribed"),
    f"POST {V3}/share-groups/{{group}}/reset": Sample(
        setup="share-read", body=lambda n: {"to": "earliest", "topics": [n.topic]}, content_type=_V3
    ),
    f"DELETE {V3}/share-groups/{{group}}": Sample(setup="share-read"),
    f"GET {V3}/push-subscriptions": Sample(setup="push"),
    f"PUT {PUSH}": Sample(body=lambda n: _push_spec(n), content_type=_V3),
    f"GET {PUSH}": Sample(setup="push"),
    f"DELETE {PUSH}": Sample(setup="push"),
    f"POST {PUSH}/pause": Sample(setup="push"),
    f"POST {PUSH}/resume": Sample(setup="push"),
    f"POST {PUSH}/rotate-secret": Sample(setup="push"),
    f"GET {V3}/consumer-groups": Sample(setup="subscribed"),
    f"GET {V3}/consumer-groups/{{group}}": Sample(setup="subscribed"),
    f"GET {V3}/consumer-groups/{{group}}/lags": Sample(setup="subscribed"),
    f"GET {V3}/consumer-groups/{{group}}/lag-summary": Sample(setup="subscribed"),
    f"GET {V3}/acls": Sample(),
    f"POST {V3}/acls": Sample(
        body=lambda n: {
            "resource_type": "TOPIC",
            "resource_name": "elsewhere",
            "pattern_type": "LITERAL",
            "principal": "User:carol",
            "host": "*",
            "operation": "READ",
            "permission": "ALLOW",
        },
        content_type=_V3,
    ),
    f"DELETE {V3}/acls": Sample(query={"resource_type": "TOPIC", "principal": "User:carol"}),
    f"GET {SR}/": Sample(),
    f"GET {SR}/schemas": _REGISTERED,
    f"GET {SR}/schemas/types": Sample(),
    f"GET {SR}/schemas/ids/{{id}}": _REGISTERED,
    f"GET {SR}/schemas/ids/{{id}}/schema": _REGISTERED,
    f"GET {SR}/schemas/ids/{{id}}/versions": _REGISTERED,
    f"GET {SR}/schemas/ids/{{id}}/subjects": _REGISTERED,
    f"GET {SR}/subjects": Sample(),
    f"GET {SR}/subjects/{{subject}}/versions": _REGISTERED,
    f"GET {SR}/subjects/{{subject}}/versions/{{version}}": _REGISTERED,
    f"GET {SR}/subjects/{{subject}}/versions/{{version}}/schema": _REGISTERED,
    f"GET {SR}/subjects/{{subject}}/versions/{{version}}/referencedby": _REGISTERED,
    f"POST {SR}/subjects/{{subject}}": _SCHEMA,
    f"POST {SR}/compatibility/subjects/{{subject}}/versions/{{version}}": _SCHEMA,
    f"POST {SR}/compatibility/subjects/{{subject}}/versions": _SCHEMA,
    f"GET {SR}/config": Sample(),
    f"GET {SR}/config/{{subject}}": _REGISTERED,
    f"GET {SR}/mode": Sample(),
    f"GET {SR}/mode/{{subject}}": _REGISTERED,
    f"GET {SR}/contexts": Sample(),
    f"GET {SR}/v1/metadata/id": Sample(),
    f"GET {SR}/v1/metadata/version": Sample(),
    f"GET {SR}/v1/metadata/deployment": Sample(),
    f"POST {SR}/subjects/{{subject}}/versions": _SCHEMA,
    f"DELETE {SR}/subjects/{{subject}}": _REGISTERED,
    f"DELETE {SR}/subjects/{{subject}}/versions/{{version}}": _REGISTERED,
    f"PUT {SR}/config/{{subject}}": Sample(
        setup="schema", body=lambda n: {"compatibility": "FULL"}, content_type=_SR_TYPE
    ),
    f"DELETE {SR}/config/{{subject}}": _REGISTERED,
    f"PUT {SR}/mode/{{subject}}": Sample(
        setup="schema", body=lambda n: {"mode": "READWRITE"}, content_type=_SR_TYPE
    ),
    f"DELETE {SR}/mode/{{subject}}": _REGISTERED,
    f"PUT {SR}/config": Sample(body=lambda n: {"compatibility": "FULL"}, content_type=_SR_TYPE),
    f"DELETE {SR}/config": Sample(),
    f"PUT {SR}/mode": Sample(body=lambda n: {"mode": "READWRITE"}, content_type=_SR_TYPE),
}


# What any authenticated principal may call with no binding at all: written out here, apart from
# the rule table, so a rule emptied by mistake fails below. Listings show only what may be seen.
OPEN_TO_ANY = {
    "GET /openapi.json",
    "GET /docs",
    "GET /docs/oauth2-redirect",
    "GET /redoc",
    "GET /docs/{asset}",
    "GET /healthz",
    "GET /readyz",
    "GET /",
    # the web console's files: what the console then asks of the API is ruled there
    "GET /ui",
    "GET /ui/{asset}",
    "GET /brokers",
    "GET /v3/clusters",
    f"GET {V3}",
    f"GET {V3}/brokers",
    "GET /topics",
    "GET /asyncapi.json",  # the topics the caller may describe, as channels
    f"GET {V3}/topics",
    f"GET {V3}/consumer-groups",
    f"GET {V3}/share-groups",
    f"GET {V3}/push-subscriptions",  # the caller's own only
    # the schema registry's reads and checks: schemas are read by every client that decodes
    f"GET {SR}/",
    f"GET {SR}/schemas",
    f"GET {SR}/schemas/types",
    f"GET {SR}/schemas/ids/{{id}}",
    f"GET {SR}/schemas/ids/{{id}}/schema",
    f"GET {SR}/schemas/ids/{{id}}/versions",
    f"GET {SR}/schemas/ids/{{id}}/subjects",
    f"GET {SR}/subjects",
    f"GET {SR}/subjects/{{subject}}/versions",
    f"GET {SR}/subjects/{{subject}}/versions/{{version}}",
    f"GET {SR}/subjects/{{subject}}/versions/{{version}}/schema",
    f"GET {SR}/subjects/{{subject}}/versions/{{version}}/referencedby",
    f"POST {SR}/subjects/{{subject}}",
    f"POST {SR}/compatibility/subjects/{{subject}}/versions/{{version}}",
    f"POST {SR}/compatibility/subjects/{{subject}}/versions",
    f"GET {SR}/config",
    f"GET {SR}/config/{{subject}}",
    f"GET {SR}/mode",
    f"GET {SR}/mode/{{subject}}",
    f"GET {SR}/contexts",
    f"GET {SR}/v1/metadata/id",
    f"GET {SR}/v1/metadata/version",
    f"GET {SR}/v1/metadata/deployment",
}


def _route_keys() -> list[str]:
    return [key for _, key in check_rules(create_app(Settings()).routes)]


ROUTES = _route_keys()
counter = itertools.count()


@asynccontextmanager
async def acl_gateway(tmp_path: Path, users_file: Path) -> AsyncIterator[RunningGateway]:
    """A gateway of HTTP Basic over ``users_file`` with ACLs on, ``admin`` its super user and the
    client's principal, no topic created but on purpose."""
    async with running_gateway(
        tmp_path / "data",
        auth="basic",
        users_file=users_file,
        authorize=True,
        super_users="User:admin",
        auto_create_topics_enable=False,
        push_allowed_destinations="http://127.0.0.1",  # nothing listens at the samples' endpoint
    ) as gw:
        gw.client.auth = httpx.BasicAuth(*ADMIN)
        yield gw


@pytest.fixture
async def gateway(tmp_path: Path, acl_users: Path) -> AsyncIterator[RunningGateway]:
    async with acl_gateway(tmp_path, acl_users) as gw:
        yield gw


class Acls:
    """Grants and revokes through the v3 API, as the super user."""

    def __init__(self, admin: httpx.AsyncClient, cluster: str) -> None:
        self.admin = admin
        self.url = f"/v3/clusters/{cluster}/acls"

    async def grant(
        self, principal: str, resource: ResourceType, name: str, operation: Operation, **extra: str
    ) -> None:
        body = {
            "resource_type": resource.value,
            "resource_name": name,
            "pattern_type": extra.get("pattern_type", "LITERAL"),
            "principal": principal,
            "host": extra.get("host", "*"),
            "operation": operation.value,
            "permission": extra.get("permission", "ALLOW"),
        }
        r = await self.admin.post(self.url, json=body)
        assert r.status_code == 201, r.text

    async def revoke_all(self, principal: str) -> None:
        for resource in ResourceType:
            r = await self.admin.delete(
                self.url, params={"resource_type": resource.value, "principal": principal}
            )
            assert r.status_code == 200, r.text


async def _names(admin: httpx.AsyncClient) -> Names:
    n = next(counter)
    cluster = (await admin.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    return Names(f"t{n}", f"g{n}", f"i{n}", f"new{n}", cluster)


def _resource_of(need: Need, names: Names, sample: Sample) -> tuple[ResourceType, str]:
    if need.resource is ResourceType.CLUSTER:
        return need.resource, CLUSTER_NAME
    if need.subject:  # the samples' subject is of the topic (TopicNameStrategy)
        return need.resource, names.topic
    if need.param == "name":  # a push subscription's, named as the group: its group is push.<group>
        return need.resource, need.prefix + names.group
    if need.param == "group":
        return need.resource, names.group
    if need.param == "topic":
        return need.resource, names.topic
    return need.resource, sample.named_topic(names)  # a topic the route learns of


async def _set_up(gw: RunningGateway, alice: httpx.AsyncClient, acls: Acls, names: Names, setup: str) -> None:
    r = await gw.client.post(f"/v3/clusters/{names.cluster}/topics", json={"topic_name": names.topic})
    assert r.status_code == 201, r.text
    if setup == "topic":
        return
    if setup == "schema":  # as the super user
        for method, path, body in (
            ("POST", f"/subjects/{names.subject}/versions", {"schema": _STRING}),
            ("PUT", f"/config/{names.subject}", {"compatibility": "BACKWARD"}),
            ("PUT", f"/mode/{names.subject}", {"mode": "READWRITE"}),
        ):
            r = await gw.client.request(method, SR + path, json=body)
            assert r.status_code == 200, r.text
        return
    await acls.grant("User:alice", ResourceType.GROUP, names.group, Operation.READ)
    await acls.grant("User:alice", ResourceType.TOPIC, names.topic, Operation.READ)
    if setup == "push":  # alice's push subscription, named as the group
        await acls.grant("User:alice", ResourceType.GROUP, f"push.{names.group}", Operation.READ)
        r = await alice.put(
            f"/v3/clusters/{names.cluster}/push-subscriptions/{names.group}", json=_push_spec(names)
        )
        assert r.status_code == 201, r.text
        await acls.revoke_all("User:alice")
        return
    if setup.startswith("share"):
        await _share_set_up(alice, names, setup)
        await acls.revoke_all("User:alice")
        return
    r = await alice.post(
        f"/consumers/{names.group}", json={"name": names.instance}, headers={"Content-Type": V2}
    )
    assert r.status_code == 200, r.text
    base = f"/consumers/{names.group}/instances/{names.instance}"
    if setup == "assigned":
        r = await alice.post(f"{base}/assignments", json=_partitions(names), headers={"Content-Type": V2})
        assert r.status_code == 204, r.text
    elif setup == "subscribed":
        r = await alice.post(
            f"{base}/subscription", json={"topics": [names.topic]}, headers={"Content-Type": V2}
        )
        assert r.status_code == 204, r.text
    await acls.revoke_all("User:alice")


async def _share_set_up(alice: httpx.AsyncClient, names: Names, setup: str) -> None:
    """``share``: alice's share consumer; ``share-subscribed``: subscribed to the topic;
    ``share-read``: that consumer read the topic and is gone (a group with state, no consumers)."""
    r = await alice.post(
        f"/share-groups/{names.group}/consumers",
        json={"name": names.instance, "share.auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200, r.text
    base = f"/share-groups/{names.group}/consumers/{names.instance}"
    if setup == "share":
        return
    r = await alice.post(f"{base}/subscription", json={"topics": [names.topic]}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    r = await alice.get(f"{base}/records", params={"timeout": "0"})
    assert r.status_code == 200, r.text
    if setup == "share-read":
        assert (await alice.delete(base)).status_code == 204


def _request(key: str, sample: Sample, names: Names) -> tuple[str, str, dict[str, Any]]:
    method, template = key.split(" ", 1)
    path = template.format(
        topic=quote(names.topic, safe=""),
        group=quote(names.group, safe=""),
        name=quote(names.group, safe=""),
        instance=quote(names.instance, safe=""),
        partition=0,
        cluster_id=names.cluster,
        subject=quote(names.subject, safe=""),
        version=1,
        id=1,
        asset="main.js",
    )
    kwargs: dict[str, Any] = {"params": sample.query}
    if sample.body is not None:
        kwargs["json"] = sample.body(names)
        kwargs["headers"] = {"Content-Type": sample.content_type}
    return method, path, kwargs


async def _call(alice: httpx.AsyncClient, method: str, path: str, kwargs: dict[str, Any]) -> httpx.Response:
    """The sample request; a WebSocket route's session (``_socket``) as if it were one."""
    if method == "WS":
        return await _socket(str(alice.base_url).replace("http", "ws", 1) + path)
    return await alice.request(method, path, **kwargs)


async def _socket(url: str) -> httpx.Response:
    """Alice's WebSocket stream of her instance: it produces a record to the instance's partition
    and waits to be sent it. Its outcome as an HTTP answer: a refused handshake as it is, an
    error or end message with its Confluent body (403 for 40301), 200 once the record came."""
    credentials = base64.b64encode(f"{ALICE[0]}:{ALICE[1]}".encode()).decode()
    try:
        async with websockets.connect(
            url, additional_headers={"Authorization": f"Basic {credentials}"}
        ) as ws:
            await ws.send(json.dumps({"type": "credit", "records": 10, "bytes": 1 << 20}))
            assigned = None
            async with asyncio.timeout(20):
                async for raw in ws:
                    message = json.loads(raw)
                    if message["type"] == "rebalance" and assigned is None:
                        assigned = message["partitions"][0]
                        produce = {"type": "produce", "id": "p", "format": "binary", **assigned}
                        await ws.send(json.dumps({**produce, "records": [{"value": b64("v")}]}))
                    elif message.get("error_code") is not None:
                        status = 403 if message["error_code"] == 40301 else 400
                        return httpx.Response(status, json={k: message[k] for k in ("error_code", "message")})
                    elif message["type"] == "records":
                        return httpx.Response(200, json=message["records"])
    except InvalidStatus as exc:
        return httpx.Response(exc.response.status_code, content=bytes(exc.response.body or b""))
    raise AssertionError(f"{url}: the session ended without an outcome")


def test_every_route_has_a_rule_and_a_sample() -> None:
    assert sorted(ROUTES) == sorted(RULES), "a rule for a route that no longer exists, or the reverse"
    assert sorted(ROUTES) == sorted(SAMPLES), "every route needs a sample request here"


def test_a_route_without_a_rule_stops_the_start() -> None:
    app = create_app(Settings())

    @app.get("/unruled")
    async def unruled() -> dict[str, str]:
        return {}

    with pytest.raises(UnruledRoute, match="GET /unruled"):
        check_rules(app.routes)


@pytest.mark.parametrize("key", ROUTES)
async def test_no_route_answers_2xx_without_every_operation_its_rule_names(
    gateway: RunningGateway, key: str
) -> None:
    rule, sample = RULES[key], SAMPLES[key]
    names = await _names(gateway.client)
    acls = Acls(gateway.client, names.cluster)
    async with httpx.AsyncClient(base_url=gateway.url, auth=httpx.BasicAuth(*ALICE), timeout=30) as alice:
        await _set_up(gateway, alice, acls, names, sample.setup)
        method, path, kwargs = _request(key, sample, names)
        needs = rule.needs + rule.named
        assert bool(needs) != (key in OPEN_TO_ANY), f"{key}: open to any principal or not?"
        for missing in needs:
            for need in needs:
                if need != missing:
                    await acls.grant("User:alice", *_resource_of(need, names, sample), need.operation)
            r = await _call(alice, method, path, kwargs)
            assert r.status_code == 403, f"{key} without {missing}: {r.status_code} {r.text}"
            assert r.json()["error_code"] == 40301
            await acls.revoke_all("User:alice")
        for need in needs:
            await acls.grant("User:alice", *_resource_of(need, names, sample), need.operation)
        r = await _call(alice, method, path, kwargs)
        assert 200 <= r.status_code < 300, f"{key} with {needs}: {r.status_code} {r.text}"
        if rule.shows is not None:
            # Shown only once it may be described: the topic (or the group) of the sample.
            shown = names.group if rule.shows is ResourceType.GROUP else names.topic
            assert f'"{shown}"' not in r.text, f"{key} shows {shown} it may not describe"
            await acls.grant("User:alice", rule.shows, shown, Operation.DESCRIBE)
            r = await alice.request(method, path, **kwargs)
            assert f'"{shown}"' in r.text, f"{key} hides {shown} it may describe"


async def test_a_subject_of_no_topic_needs_alter_on_the_cluster(gateway: RunningGateway) -> None:
    names = await _names(gateway.client)
    acls = Acls(gateway.client, names.cluster)
    async with httpx.AsyncClient(base_url=gateway.url, auth=httpx.BasicAuth(*ALICE), timeout=30) as alice:
        for subject in ("shop.Order", f"{names.topic}-values", "-value", "no topic-key"):
            url = f"{SR}/subjects/{quote(subject, safe='')}/versions"
            # WRITE on a topic named like the subject, or like its prefix, is not what it needs
            await acls.grant("User:alice", ResourceType.TOPIC, "shop.Order", Operation.WRITE)
            await acls.grant("User:alice", ResourceType.TOPIC, names.topic, Operation.WRITE)
            r = await alice.post(url, json={"schema": _STRING})
            assert r.status_code == 403 and r.json()["error_code"] == 40301, (subject, r.text)
            await acls.grant("User:alice", ResourceType.CLUSTER, CLUSTER_NAME, Operation.ALTER)
            r = await alice.post(url, json={"schema": _STRING})
            assert r.status_code != 403, (subject, r.text)
            await acls.revoke_all("User:alice")
        # a topic's key subject is the topic's
        await acls.grant("User:alice", ResourceType.TOPIC, names.topic, Operation.WRITE)
        r = await alice.post(f"{SR}/subjects/{names.topic}-key/versions", json={"schema": _STRING})
        assert r.status_code == 200, r.text
