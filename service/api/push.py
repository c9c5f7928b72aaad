"""Push subscriptions over HTTP (a brokergate extension), at ``/v3/clusters/{cluster_id}/push-subscriptions``.

Create one or replace its spec (``PUT …/{name}``), list the caller's (``GET``), describe one with
its status (``GET …/{name}``), pause and resume it (``POST …/pause``, ``…/resume``), rotate
its signing secret (``POST …/rotate-secret``: the new one is in the answer, and the previous
one is still sent beside it for a day), delete it (``DELETE …/{name}``). What a caller may do is
the service's to decide (``PushService``): READ on the topics and the subscription's group to
create or change one, and only its owner (or a super user) finds it at all.
"""

from __future__ import annotations

import time
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from api_schemas import push as wire
from service.api.gateway import Gateway, get_gateway
from service.core.push.spec import Auth, Ordering, PushSpec, PushSubscription

from .access import decision_of
from .bodies import GATEWAY, Body
from .replies import V3, JSONBody, no_content
from .replies import v3 as v3_response
from .responses import ERRORS
from .v3 import _base, _check

admin = APIRouter(
    prefix="/v3/clusters/{cluster_id}/push-subscriptions",
    tags=["push subscriptions"],
    default_response_class=JSONBody,
)
GW = Annotated[Gateway, Depends(get_gateway)]

_SPEC = Body(wire.PushSubscriptionSpec, GATEWAY, V3)
_ONE = {200: {"model": wire.PushSubscription}, **ERRORS}


def _spec(req: wire.PushSubscriptionSpec) -> PushSpec:
    auth = req.authentication
    return PushSpec(
        endpoint=req.endpoint,
        topics=tuple(req.topics or ()),
        topic_pattern=req.topic_pattern,
        format=req.format,
        start=req.start,
        start_timestamp_ms=req.start_timestamp_ms,
        max_records=req.batching.max_records,
        max_bytes=req.batching.max_bytes,
        max_in_flight=req.max_in_flight,
        ordering=Ordering(req.ordering),
        ack_deadline_ms=req.ack_deadline_ms,
        min_backoff_ms=req.retry.min_backoff_ms,
        max_backoff_ms=req.retry.max_backoff_ms,
        max_attempts=req.retry.max_attempts,
        dead_letter_topic=req.dead_letter_topic,
        auth=Auth(auth.type),
        token=auth.token,
    )


async def _shown(
    request: Request, gw: Gateway, cid: str, sub: PushSubscription, *, secret: bool = False
) -> dict[str, Any]:
    spec = sub.spec
    status = await gw.push.status(sub)
    stats = status.stats
    url = f"{_base(request)}/{cid}/push-subscriptions/{quote(sub.name, safe='')}"
    shown: dict[str, Any] = {
        "kind": "KafkaPushSubscription",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cid}/push-subscription={sub.name}"},
        "cluster_id": cid,
        "name": sub.name,
        "owner": sub.owner,
        "paused": sub.paused,
        "created_ms": sub.created_ms,
        "endpoint": spec.endpoint,
        "topics": list(spec.topics) or None,
        "topic_pattern": spec.topic_pattern,
        "format": spec.format,
        "start": spec.start,
        "start_timestamp_ms": spec.start_timestamp_ms,
        "batching": {"max_records": spec.max_records, "max_bytes": spec.max_bytes},
        "max_in_flight": spec.max_in_flight,
        "ordering": spec.ordering.value,
        "ack_deadline_ms": spec.ack_deadline_ms,
        "retry": {
            "min_backoff_ms": spec.min_backoff_ms,
            "max_backoff_ms": spec.max_backoff_ms,
            "max_attempts": spec.max_attempts,
        },
        "dead_letter_topic": spec.dead_letter_topic,
        "authentication": {"type": spec.auth.value, "token": None},  # a token is never shown back
        "status": {
            "backlog": status.backlog,
            "held": status.held,
            "delivering": stats is not None,
        },
    }
    if stats is not None:
        shown["status"].update(
            delivered=stats.delivered,
            delivery_rate=round(stats.rate(time.monotonic()), 3),
            requests=stats.requests,
            failures=stats.failures,
            dead_lettered=stats.dead_lettered,
            in_flight=stats.in_flight,
            last_status=stats.last_status,
            last_error=stats.last_error,
            last_error_time_ms=stats.last_error_ms,
        )
    if secret:
        shown["secret"] = sub.secrets[0] if spec.auth is Auth.WEBHOOK and sub.secrets else None
    return shown


@admin.get(
    "", operation_id="listPushSubscriptions", responses={200: {"model": wire.PushSubscriptionList}, **ERRORS}
)
async def list_subscriptions(cluster_id: str, request: Request, gw: GW) -> Response:
    """The caller's push subscriptions (a super user's: every one)."""
    _check(cluster_id, gw)
    subs = await gw.push.list(who=await decision_of(request))
    data = [await _shown(request, gw, cluster_id, sub) for sub in subs]
    url = f"{_base(request)}/{cluster_id}/push-subscriptions"
    return v3_response(
        {"kind": "KafkaPushSubscriptionList", "metadata": {"self": url, "next": None}, "data": data}
    )


@admin.get("/{name}", operation_id="getPushSubscription", responses=_ONE)
async def describe(cluster_id: str, name: str, request: Request, gw: GW) -> Response:
    """The subscription, with its backlog and (from the replica delivering it) its deliveries."""
    _check(cluster_id, gw)
    sub = await gw.push.get(name, who=await decision_of(request))
    return v3_response(await _shown(request, gw, cluster_id, sub))


@admin.put(
    "/{name}",
    operation_id="putPushSubscription",
    responses={201: {"model": wire.PushSubscription}, **_ONE},
    openapi_extra=_SPEC.openapi,
)
async def put(cluster_id: str, name: str, request: Request, gw: GW) -> Response:
    """Create the subscription (201, its signing secret in this answer only), or replace the spec
    of the caller's subscription of that name (200: where it reads from is kept, its deliverer
    starts again)."""
    _check(cluster_id, gw)
    who = await decision_of(request)
    spec = _spec(await _SPEC.read(request))
    sub, created = await gw.push.put(name, spec, who=who)
    gw.push_changed.set()
    shown = await _shown(request, gw, cluster_id, sub, secret=created)
    return v3_response(shown, status_code=201 if created else 200)


async def _paused(cluster_id: str, name: str, request: Request, gw: Gateway, paused: bool) -> Response:
    _check(cluster_id, gw)
    sub = await gw.push.set_paused(name, paused, who=await decision_of(request))
    gw.push_changed.set()
    return v3_response(await _shown(request, gw, cluster_id, sub))


@admin.post("/{name}/pause", operation_id="pausePushSubscription", responses=_ONE)
async def pause(cluster_id: str, name: str, request: Request, gw: GW) -> Response:
    """Stop delivering (what is held is let go, and kept for later); idempotent."""
    return await _paused(cluster_id, name, request, gw, True)


@admin.post("/{name}/resume", operation_id="resumePushSubscription", responses=_ONE)
async def resume(cluster_id: str, name: str, request: Request, gw: GW) -> Response:
    """Deliver again from where it stopped; idempotent."""
    return await _paused(cluster_id, name, request, gw, False)


@admin.post("/{name}/rotate-secret", operation_id="rotatePushSecret", responses=_ONE)
async def rotate_secret(cluster_id: str, name: str, request: Request, gw: GW) -> Response:
    """A new signing secret, in this answer; requests carry both signatures for a day."""
    _check(cluster_id, gw)
    sub = await gw.push.rotate_secret(name, who=await decision_of(request))
    gw.push_changed.set()
    return v3_response(await _shown(request, gw, cluster_id, sub, secret=True))


@admin.delete(
    "/{name}",
    operation_id="deletePushSubscription",
    status_code=204,
    responses={204: {"description": "Deleted."}, **ERRORS},
)
async def delete(cluster_id: str, name: str, request: Request, gw: GW) -> Response:
    """Delete the subscription and where it was (what its share group kept)."""
    _check(cluster_id, gw)
    await gw.push.delete(name, who=await decision_of(request))
    gw.push_changed.set()
    return no_content()
