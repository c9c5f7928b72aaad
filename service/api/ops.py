"""Root, brokers, health, readiness and metrics.

``/readyz`` is open whatever the authentication (a load balancer's probe has no credentials), so
what it says beyond ready or not is for the callers who may know it: the names of topics the
log could not open, and of partitions that stopped taking writes, go only to an authenticated
caller who may DESCRIBE the cluster (anyone, with authentication off); the others learn how many
there are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api_schemas import v2
from api_schemas.v2 import ErrorBody
from service.api.gateway import Gateway, get_gateway
from service.core.acl import CLUSTER_NAME, Operation, ResourceType
from service.errors import GatewayError

from .accept import ACCEPTS_V2_READING_ANY, check_accept
from .access import decision_of
from .auth import ANONYMOUS, principal_of
from .bodies import check_control_type
from .pages import front_page, prefers_html
from .replies import V3, JSONBody, error_response
from .replies import v2 as v2_response
from .replies import v3 as v3_response
from .responses import ERRORS, NOT_ACCEPTABLE

router = APIRouter(tags=["ops"], default_response_class=JSONBody)
GW = Annotated[Gateway, Depends(get_gateway)]
RETRY_AFTER_S = 1.0  # /readyz's Retry-After when the backend's error names none


@router.get(
    "/",
    operation_id="root",
    responses={
        200: {
            "description": "An empty object, as Confluent's; to a browser (an Accept that weighs "
            "text/html above JSON), a page linking the console, the docs and this document.",
            "content": {"text/html": {"schema": {"type": "string"}}},
        },
        **NOT_ACCEPTABLE,
        415: ERRORS[415],
    },
)
async def root(request: Request, gw: GW) -> Response:
    check_control_type(request)
    accept = request.headers.get("accept")
    if prefers_html(accept):
        return front_page(request, console=gw.settings.ui)
    check_accept(accept)
    answer = v2_response({})
    answer.headers["Vary"] = "Accept"  # a browser is answered the page
    return answer


@router.get(
    "/brokers",
    operation_id="listBrokers",
    dependencies=[ACCEPTS_V2_READING_ANY],
    responses={200: {"model": v2.Brokers}, **NOT_ACCEPTABLE},
)
async def brokers(gw: GW) -> Response:
    return v2_response({"brokers": [b.broker_id for b in await gw.log.brokers()]})


@router.get("/healthz", operation_id="health", responses={200: {"description": "The process is up."}})
async def healthz() -> Response:
    return v3_response({"status": "ok"})


Backend = Literal["log", "coordinator", "sessions"]


@runtime_checkable
class ReportsWhatItCannotServe(Protocol):
    """A log that serves what it can and says what it cannot (the embedded log): topics it could
    not open, partitions that stopped taking writes until a restart, each with why."""

    def unopened_topics(self) -> dict[str, str]: ...

    def stopped_partitions(self) -> dict[str, str]: ...


@router.get(
    "/readyz",
    operation_id="ready",
    responses={
        200: {"description": "The backends asked about answer."},
        422: ERRORS[422],
        503: {"model": ErrorBody, "description": "A backend asked about does not answer."},
    },
)
async def readyz(
    request: Request,
    gw: GW,
    backend: Annotated[
        list[Backend] | None,
        Query(
            description="Ask only about these backends (repeatable), e.g. `?backend=log` for a "
            "readiness probe that a Redis or ZooKeeper outage, shared by every replica, does not "
            "fail. Every backend by default."
        ),
    ] = None,
) -> Response:
    """Ready when every backend asked about answers (all three unless ``backend`` names some);
    else 503 with ``Retry-After`` and the error of the first that did not."""
    checks: dict[Backend, Callable[[], Awaitable[object]]] = {
        "log": gw.log.list_topics,
        "coordinator": gw.coordinator.groups,
        "sessions": lambda: gw.sessions.instances("\x00readiness"),
    }
    try:
        for name in dict.fromkeys(backend or checks):
            await checks[name]()
    except GatewayError as exc:  # a backend that does not answer now: a probe may come back later
        retry_after = exc.retry_after if exc.retry_after is not None else RETRY_AFTER_S
        return error_response(503, int(exc.error_code), exc.message, retry_after=retry_after, media_type=V3)
    body: dict[str, Any] = {"status": "ready"}
    if isinstance(gw.log, ReportsWhatItCannotServe):
        # Still ready: every other topic is served, and a stopped partition's records are still read.
        # Unopened topics answer 503 until the cause is fixed; stopped partitions' writes until a restart.
        found = {
            "unopened_topics": gw.log.unopened_topics(),
            "stopped_partitions": gw.log.stopped_partitions(),
        }
        named = {key: why for key, why in found.items() if why}
        if named:
            body.update({f"{key}_count": len(why) for key, why in named.items()})
            if await _may_name_topics(request, gw):
                body.update(named)
    return v3_response(body)


async def _may_name_topics(request: Request, gw: Gateway) -> bool:
    """Whether the caller of this open route may be told topic names: authenticated (when
    authentication is on), and allowed to DESCRIBE the cluster."""
    if gw.settings.auth_methods and principal_of(request.scope) == ANONYMOUS:
        return False
    try:
        decision = await decision_of(request)
    except GatewayError:  # the ACLs cannot be read now: a probe's answer does not wait for them
        return False
    return decision.may(ResourceType.CLUSTER, CLUSTER_NAME, Operation.DESCRIBE)


@router.get("/metrics", operation_id="metrics", responses={200: {"content": {"text/plain": {}}}})
async def metrics(gw: GW) -> Response:
    """Prometheus exposition."""
    return Response(generate_latest(gw.metrics.registry), media_type=CONTENT_TYPE_LATEST)
