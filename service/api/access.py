"""Who may call which route: ``RULES``, the operations Kafka would require, and ``Authorize``.

Every route of the app has one ``Rule`` here, keyed ``"METHOD /path/template"``, so that what a
route requires is read in one place, next to the others. A rule names:

- ``needs``: operations on the resources the path names (``{topic}``, ``{group}``) or on the
  cluster. ``Authorize`` checks them before the route runs, the produce fast path included.
  A need on a schema ``{subject}`` is on the topic TopicNameStrategy derives from it
  (``<topic>-key``, ``<topic>-value``: WRITE on the topic), and for any other subject ALTER on
  the cluster;
- ``named``: operations the route checks itself on the topics it learns of later: those its
  body names (subscribe: READ each topic listed), or, for a poll, those the instance is assigned
  when it fetches (the core checks them, so an ACL taken away ends the reading at once);
- ``shows``: a listing shows only the resources the caller may DESCRIBE, as Kafka's metadata
  and ``ListGroups`` do, instead of refusing the call.

A rule without needs is open to every authenticated principal (the cluster's id and brokers, as
Kafka's metadata gives them to every client; the schema registry's reads and compatibility
checks, as schemas are read by every client that decodes a record; the web console's files,
as the console only calls routes ruled here); ``/metrics`` and the
documentation are also open to anyone when their setting opens them (``Authenticate``'s open
paths). Three decisions of the core are not routes' and so not here: a pattern covers only topics
the member may DESCRIBE, a produce auto-creates a topic only for a principal that may CREATE it
(on the topic or the cluster), and a consumer instance is reached only by the principal that
created it (404 for anyone else).

A WebSocket route's key is ``"WS /path/template"``. ``Authorize`` checks its needs before the
handshake is accepted (a refusal is the handshake's 403, with Confluent's body); what it does
with each message the route checks as the REST route doing the same would (its ``named``).

A rule also says whether its route changes state (``Rule.changes_state``; by default, any method
but GET does): ``CrossSiteGuard`` refuses those from a page of another site, whatever the method.

``create_app`` refuses to start if a route has no rule (``UnruledRoute``), and
tests/integration/test_authorization.py proves, for every route of the app, that a principal
lacking any one of its rule's operations never gets a 2xx, and that one holding them all does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

import orjson
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute, Match, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.gateway import gateway_of
from service.core.acl import CLUSTER_NAME, Caller, Decision, Operation, ResourceType
from service.core.rules import PUSH_GROUP_PREFIX, topic_of_subject
from service.errors import Forbidden, GatewayError
from service.wire.formats import V2

from .auth import principal_of
from .replies import error_response

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
READ, WRITE, CREATE, DELETE = Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE
ALTER, DESCRIBE = Operation.ALTER, Operation.DESCRIBE


@dataclass(frozen=True, slots=True)
class Need:
    """``operation`` on a ``resource``: the one the path parameter ``param`` names, the topics a
    route learns of (``param`` None, in ``Rule.named``), or the cluster. With ``subject``,
    ``param`` names a schema subject: the need is on the topic it is of (``topic_of_subject``),
    and ALTER on the cluster for a subject of no topic."""

    resource: ResourceType
    operation: Operation
    param: str | None = None
    subject: bool = False
    prefix: str = ""  # put before the parameter's value: a push subscription's group is push.<name>

    def target(self, params: dict[str, str]) -> tuple[ResourceType, str, Operation]:
        """The resource and operation this need asks for, given a request's path parameters."""
        if self.param is None:
            return self.resource, CLUSTER_NAME, self.operation
        if not self.subject:
            return self.resource, self.prefix + params[self.param], self.operation
        topic = topic_of_subject(params[self.param])
        return (self.resource, topic, self.operation) if topic is not None else (CLUSTER, CLUSTER_NAME, ALTER)


@dataclass(frozen=True, slots=True)
class Rule:
    """What a route needs (see the module doc); ``changes_state``: whether calling it changes
    anything (a position, a lock, a stored thing), which ``CrossSiteGuard`` refuses from another
    site. None (most rules) says it by the method: a GET reads; any other method, and every
    WebSocket session, changes state. A GET that changes state must say so here."""

    needs: tuple[Need, ...] = ()
    named: tuple[Need, ...] = ()
    shows: ResourceType | None = None
    changes_state: bool | None = None

    def changes(self, key: str) -> bool:
        """Whether the route of ``RULES`` key ``key`` (this rule's) changes state."""
        return self.changes_state if self.changes_state is not None else not key.startswith("GET ")


def _on(resource: ResourceType, operation: Operation, param: str | None = None) -> Need:
    return Need(resource, operation, param if resource is not CLUSTER else None)


# A schema subject's writes: WRITE on its topic (``<topic>-key``/``-value``), else ALTER on the cluster.
SUBJECT_WRITE: Final = Need(TOPIC, WRITE, "subject", subject=True)
GROUP_READ: Final = _on(GROUP, READ, "group")
GROUP_DESCRIBE: Final = _on(GROUP, DESCRIBE, "group")
TOPIC_DESCRIBE: Final = _on(TOPIC, DESCRIBE, "topic")
INSTANCE: Final = "/consumers/{group}/instances/{instance}"
SHARE: Final = "/share-groups/{group}/consumers"
V3: Final = "/v3/clusters/{cluster_id}"
SR: Final = "/schema-registry"
PUSH: Final = f"{V3}/push-subscriptions/{{name}}"
PUSH_READ: Final = Need(GROUP, READ, "name", prefix=PUSH_GROUP_PREFIX)

RULES: Final[dict[str, Rule]] = {
    # documentation, health and the cluster's identity: any principal (see the module doc)
    "GET /openapi.json": Rule(),
    "GET /docs": Rule(),
    "GET /docs/oauth2-redirect": Rule(),
    "GET /redoc": Rule(),
    "GET /docs/{asset}": Rule(),  # the pages' scripts and style sheets
    "GET /healthz": Rule(),
    "GET /readyz": Rule(),
    "GET /": Rule(),
    # the web console's static files: the page only calls the API, whose rules decide the rest
    "GET /ui": Rule(),
    "GET /ui/{asset}": Rule(),
    "GET /brokers": Rule(),
    "GET /metrics": Rule(needs=(_on(CLUSTER, DESCRIBE),)),  # it names every topic and group
    "GET /v3/clusters": Rule(),
    f"GET {V3}": Rule(),
    f"GET {V3}/brokers": Rule(),
    # topics
    "GET /topics": Rule(shows=TOPIC),
    "GET /asyncapi.json": Rule(shows=TOPIC),  # the topics the caller may describe, as channels
    f"GET {V3}/topics": Rule(shows=TOPIC),
    "GET /topics/{topic}": Rule(needs=(TOPIC_DESCRIBE,)),
    f"GET {V3}/topics/{{topic}}": Rule(needs=(TOPIC_DESCRIBE,)),
    "GET /topics/{topic}/partitions": Rule(needs=(TOPIC_DESCRIBE,)),
    f"GET {V3}/topics/{{topic}}/partitions": Rule(needs=(TOPIC_DESCRIBE,)),
    "GET /topics/{topic}/partitions/{partition}": Rule(needs=(TOPIC_DESCRIBE,)),
    "GET /topics/{topic}/partitions/{partition}/offsets": Rule(needs=(TOPIC_DESCRIBE,)),
    "GET /topics/{topic}/partitions/{partition}/records": Rule(needs=(_on(TOPIC, READ, "topic"),)),
    "POST /topics/{topic}": Rule(needs=(_on(TOPIC, WRITE, "topic"),)),
    "POST /topics/{topic}/partitions/{partition}": Rule(needs=(_on(TOPIC, WRITE, "topic"),)),
    # CREATE on the topic its body names, or on the cluster (Kafka's CreateTopics)
    f"POST {V3}/topics": Rule(named=(_on(TOPIC, CREATE),)),
    f"PATCH {V3}/topics/{{topic}}": Rule(needs=(_on(TOPIC, ALTER, "topic"),)),
    f"DELETE {V3}/topics/{{topic}}": Rule(needs=(_on(TOPIC, DELETE, "topic"),)),
    # consumer instances: the group's JoinGroup/Heartbeat/OffsetCommit… operations
    "POST /consumers/{group}": Rule(needs=(GROUP_READ,)),
    f"DELETE {INSTANCE}": Rule(needs=(GROUP_READ,)),
    f"POST {INSTANCE}/subscription": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, READ),)),
    f"GET {INSTANCE}/subscription": Rule(needs=(GROUP_DESCRIBE,)),
    f"DELETE {INSTANCE}/subscription": Rule(needs=(GROUP_READ,)),
    f"POST {INSTANCE}/assignments": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, READ),)),
    f"GET {INSTANCE}/assignments": Rule(needs=(GROUP_DESCRIBE,)),
    # a poll advances the instance's position (and may commit it), over SSE too
    f"GET {INSTANCE}/records": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, READ),), changes_state=True),
    # the instance's WebSocket stream: its polls READ, its commits too; its produces WRITE
    f"WS {INSTANCE}/records": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, READ), _on(TOPIC, WRITE))),
    f"POST {INSTANCE}/offsets": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, READ),)),
    f"GET {INSTANCE}/offsets": Rule(needs=(GROUP_DESCRIBE,), named=(_on(TOPIC, DESCRIBE),)),
    f"POST {INSTANCE}/positions": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, DESCRIBE),)),
    f"POST {INSTANCE}/positions/beginning": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, DESCRIBE),)),
    f"POST {INSTANCE}/positions/end": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, DESCRIBE),)),
    # share consumers: Kafka's ShareGroupHeartbeat, ShareFetch and ShareAcknowledge need READ on
    # the group and on the topics
    f"POST {SHARE}": Rule(needs=(GROUP_READ,)),
    f"DELETE {SHARE}/{{instance}}": Rule(needs=(GROUP_READ,)),
    f"POST {SHARE}/{{instance}}/subscription": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, READ),)),
    f"GET {SHARE}/{{instance}}/subscription": Rule(needs=(GROUP_DESCRIBE,)),
    f"DELETE {SHARE}/{{instance}}/subscription": Rule(needs=(GROUP_READ,)),
    # an acquisition locks records and counts a delivery attempt
    f"GET {SHARE}/{{instance}}/records": Rule(
        needs=(GROUP_READ,), named=(_on(TOPIC, READ),), changes_state=True
    ),
    f"POST {SHARE}/{{instance}}/records": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, READ),)),
    f"POST {SHARE}/{{instance}}/acknowledgements": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, READ),)),
    # share groups, as an administrator sees them (DescribeShareGroups, AlterShareGroupOffsets,
    # DeleteShareGroups)
    f"GET {V3}/share-groups": Rule(shows=GROUP),
    f"GET {V3}/share-groups/{{group}}": Rule(needs=(GROUP_DESCRIBE,)),
    f"POST {V3}/share-groups/{{group}}/reset": Rule(needs=(GROUP_READ,), named=(_on(TOPIC, READ),)),
    f"DELETE {V3}/share-groups/{{group}}": Rule(needs=(_on(GROUP, DELETE, "group"),)),
    # push subscriptions: what reading through their share group (push.<name>) needs (and WRITE
    # on a dead-letter topic, checked by the service when one is named); each is found for its
    # owner (or a super user) only, so the listing needs nothing
    f"GET {V3}/push-subscriptions": Rule(),
    f"PUT {PUSH}": Rule(needs=(PUSH_READ,), named=(_on(TOPIC, READ),)),
    f"GET {PUSH}": Rule(needs=(Need(GROUP, DESCRIBE, "name", prefix=PUSH_GROUP_PREFIX),)),
    f"DELETE {PUSH}": Rule(needs=(PUSH_READ,)),
    f"POST {PUSH}/pause": Rule(needs=(PUSH_READ,)),
    f"POST {PUSH}/resume": Rule(needs=(PUSH_READ,)),
    f"POST {PUSH}/rotate-secret": Rule(needs=(PUSH_READ,)),
    # groups, as an administrator sees them
    f"GET {V3}/consumer-groups": Rule(shows=GROUP),
    f"GET {V3}/consumer-groups/{{group}}": Rule(needs=(GROUP_DESCRIBE,)),
    f"GET {V3}/consumer-groups/{{group}}/lags": Rule(needs=(GROUP_DESCRIBE,), shows=TOPIC),
    f"GET {V3}/consumer-groups/{{group}}/lag-summary": Rule(needs=(GROUP_DESCRIBE,), shows=TOPIC),
    # ACLs: Kafka's DescribeAcls, CreateAcls and DeleteAcls
    f"GET {V3}/acls": Rule(needs=(_on(CLUSTER, DESCRIBE),)),
    f"POST {V3}/acls": Rule(needs=(_on(CLUSTER, ALTER),)),
    f"DELETE {V3}/acls": Rule(needs=(_on(CLUSTER, ALTER),)),
    # the schema registry: reads and checks for any principal; a subject's writes, its topic's
    f"GET {SR}/": Rule(),
    f"GET {SR}/schemas": Rule(),
    f"GET {SR}/schemas/types": Rule(),
    f"GET {SR}/schemas/ids/{{id}}": Rule(),
    f"GET {SR}/schemas/ids/{{id}}/schema": Rule(),
    f"GET {SR}/schemas/ids/{{id}}/versions": Rule(),
    f"GET {SR}/schemas/ids/{{id}}/subjects": Rule(),
    f"GET {SR}/subjects": Rule(),
    f"GET {SR}/subjects/{{subject}}/versions": Rule(),
    f"GET {SR}/subjects/{{subject}}/versions/{{version}}": Rule(),
    f"GET {SR}/subjects/{{subject}}/versions/{{version}}/schema": Rule(),
    f"GET {SR}/subjects/{{subject}}/versions/{{version}}/referencedby": Rule(),
    f"POST {SR}/subjects/{{subject}}": Rule(),  # a lookup
    f"POST {SR}/compatibility/subjects/{{subject}}/versions/{{version}}": Rule(),
    f"POST {SR}/compatibility/subjects/{{subject}}/versions": Rule(),
    f"GET {SR}/config": Rule(),
    f"GET {SR}/config/{{subject}}": Rule(),
    f"GET {SR}/mode": Rule(),
    f"GET {SR}/mode/{{subject}}": Rule(),
    f"GET {SR}/contexts": Rule(),
    f"GET {SR}/v1/metadata/id": Rule(),
    f"GET {SR}/v1/metadata/version": Rule(),
    f"GET {SR}/v1/metadata/deployment": Rule(),
    f"POST {SR}/subjects/{{subject}}/versions": Rule(needs=(SUBJECT_WRITE,)),
    f"DELETE {SR}/subjects/{{subject}}": Rule(needs=(SUBJECT_WRITE,)),
    f"DELETE {SR}/subjects/{{subject}}/versions/{{version}}": Rule(needs=(SUBJECT_WRITE,)),
    f"PUT {SR}/config/{{subject}}": Rule(needs=(SUBJECT_WRITE,)),
    f"DELETE {SR}/config/{{subject}}": Rule(needs=(SUBJECT_WRITE,)),
    f"PUT {SR}/mode/{{subject}}": Rule(needs=(SUBJECT_WRITE,)),
    f"DELETE {SR}/mode/{{subject}}": Rule(needs=(SUBJECT_WRITE,)),
    f"PUT {SR}/config": Rule(needs=(_on(CLUSTER, ALTER),)),
    f"DELETE {SR}/config": Rule(needs=(_on(CLUSTER, ALTER),)),
    f"PUT {SR}/mode": Rule(needs=(_on(CLUSTER, ALTER),)),
}

_DECISION: Final = "brokergate.decision"


class UnruledRoute(RuntimeError):
    """A route of the app is not in ``RULES`` (the app refuses to start)."""


def route_keys(route: BaseRoute) -> list[str]:
    """The ``RULES`` keys of a route: one per method (HEAD goes with GET); ``WS`` for a WebSocket."""
    path = getattr(route, "path", "")
    if isinstance(route, WebSocketRoute):
        return [f"WS {path}"]
    methods = sorted(getattr(route, "methods", None) or ()) or ["GET"]
    return [f"{method} {path}" for method in methods if method != "HEAD"]


def check_rules(routes: Sequence[BaseRoute]) -> list[tuple[BaseRoute, str]]:
    """Every route with each of its ``RULES`` keys, in the app's order; ``UnruledRoute`` if one has none."""
    ruled = [(route, key) for route in routes for key in route_keys(route)]
    missing = [key for _, key in ruled if key not in RULES]
    if missing:
        raise UnruledRoute(f"no access rule for {', '.join(missing)}: add it to service/api/access.py")
    return ruled


def caller_of(scope: Scope) -> Caller:
    client = scope.get("client")
    return Caller(principal_of(scope), client[0] if client else None)


async def decision_of(request: HTTPConnection) -> Decision:
    """What the caller of ``request`` (or of a WebSocket) may do (made once per request)."""
    scope = request.scope
    decision: Decision | None = scope.get(_DECISION)
    if decision is None:
        decision = await gateway_of(scope).access.decision(caller_of(scope))
        scope[_DECISION] = decision
    return decision


async def check_topics(request: HTTPConnection, topics: Iterable[str], operation: Operation) -> Decision:
    """``Forbidden`` unless the caller may ``operation`` every topic of ``topics``."""
    decision = await decision_of(request)
    decision.check(TOPIC, topics, operation)
    return decision


async def visible(request: HTTPConnection, resource: ResourceType, names: Iterable[str]) -> list[str]:
    """The names of ``names`` the caller may DESCRIBE, in order."""
    decision = await decision_of(request)
    return [n for n in names if decision.may(resource, n, DESCRIBE)]


@asynccontextmanager
async def answer_404_first(
    request: HTTPConnection, check_owner: Callable[..., Awaitable[None]], group: str, instance: str
) -> AsyncIterator[None]:
    """Run an instance route's block so that, if it fails, a request for a missing instance or for
    another principal's gets the 404 of a missing instance, not the error its body caused.

    Anything in the block may fail first (a body that does not parse, a topic the caller may not
    read, a bad pattern, a missing partition); ``check_owner`` then raises the 404 if the instance
    is not the caller's. Only a request that failed pays for that look: for one that did not, the
    core decided the instance, and whose it is, before it changed anything. So every way through
    the block that succeeds reaches the instance through the core, one with nothing to do too
    (``ConsumerService.renew``); tests/integration/test_leaks.py sends every instance route empty
    and trivial bodies to prove it."""
    try:
        yield
    except GatewayError:
        await check_owner(group, instance, who=await decision_of(request))
        raise


@dataclass(frozen=True, slots=True)
class Ruled:
    """A route of the app with its ``RULES`` key and rule."""

    route: BaseRoute
    key: str
    rule: Rule


class RouteTable:
    """The app's routes with their rules, found for a request as routing will find its route: what
    the guards in front of routing (``Authorize``, ``CrossSiteGuard``) decide from. Built by
    ``check_rules``, so an app with a route without a rule does not start."""

    def __init__(self, routes: Sequence[BaseRoute]) -> None:
        # Routes by their first path segment: a request is matched against a handful, not all.
        self._by_head: dict[str, list[Ruled]] = {}
        for route, key in check_rules(routes):
            self._by_head.setdefault(_head(getattr(route, "path", "") or "/"), []).append(
                Ruled(route, key, RULES[key])
            )

    def find(self, scope: Scope) -> tuple[Ruled, dict[str, str]] | None:
        """The route ``scope`` is for, with its path parameters; None if no route takes it (404, 405)."""
        if scope["type"] == "websocket":
            method = "WS"
        else:
            method = "GET" if scope["method"] == "HEAD" else scope["method"]
        for ruled in self._by_head.get(_head(scope["path"]), ()):
            if not ruled.key.startswith(method + " "):
                continue
            match, child = ruled.route.matches(scope)
            if match is Match.FULL:
                return ruled, child["path_params"]
        return None


class Authorize:
    """Checks the path's needs of the route a request is for, before the route (or the produce fast
    path) runs: 403 with Confluent's body (40301) if the caller lacks one; for a WebSocket, before
    its handshake is accepted (``refuse_handshake``). A request no route takes goes on, to be
    answered 404 or 405."""

    def __init__(self, app: ASGIApp, *, routes: RouteTable, open_paths: Collection[str]) -> None:
        self.app = app
        self.open = frozenset(open_paths)
        self._routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in self.open:
            await self.app(scope, receive, send)
            return
        found = self._routes.find(scope)
        if found is not None and found[0].rule.needs:
            decision = await gateway_of(scope).access.decision(caller_of(scope))
            scope[_DECISION] = decision
            try:
                _check_path(decision, found[0].rule.needs, found[1])
            except Forbidden as exc:
                if scope["type"] == "websocket":
                    await refuse_handshake(scope, send, exc)
                else:
                    await error_response(403, exc.error_code, exc.message)(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def refuse_handshake(scope: Scope, send: Send, error: GatewayError) -> None:
    """Refuse a WebSocket handshake with ``error``: its status and Confluent's body, with Retry-After
    when it has one, where the server can answer a handshake with a response (ASGI's WebSocket
    denial response, which uvicorn offers); a bare 403 (a close before accepting) where it cannot."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008, "reason": error.message[:120]})
        return
    body = orjson.dumps({"error_code": int(error.error_code), "message": error.message})
    headers = [(b"content-type", V2.encode()), (b"content-length", str(len(body)).encode())]
    if error.retry_after is not None:
        headers.append((b"retry-after", str(max(1, round(error.retry_after))).encode()))
    await send({"type": "websocket.http.response.start", "status": error.http_status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})


def _check_path(decision: Decision, needs: Iterable[Need], params: dict[str, str]) -> None:
    for need in needs:
        resource, name, operation = need.target(params)
        decision.check(resource, (name,), operation)


def _head(path: str) -> str:
    return path.split("/", 2)[1]
