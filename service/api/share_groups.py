"""Share groups over HTTP (a brokergate extension: Kafka's share groups, KIP-932).

Share consumers, at ``/share-groups/{group}/consumers``: create one, subscribe it to topics,
poll (``GET …/records`` acquires records, each with its ``delivery_count``, and holds them under
an acquisition lock), settle what it holds (``POST …/acknowledgements``: accept, release,
reject or renew, by offsets or ranges; or piggy-backed, ``POST …/records`` with the same body
settles and then polls), delete it (what it held goes back at once).

Administration, at ``/v3/clusters/{cluster_id}/share-groups``: list, describe (consumers, and
per partition the start offset, records in flight and lag), reset where a group reads, delete.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from api_schemas import shares as wire
from api_schemas import v2
from service.api.gateway import Gateway, get_gateway
from service.core.acl import Operation, ResourceType
from service.core.models import InstanceConfig, TopicPartition
from service.core.rules import check_topic
from service.core.shares.consumers import GroupReport
from service.core.shares.delivery import AckType
from service.core.shares.service import Acknowledgement, StartAt
from service.errors import NotFound
from service.wire.formats import content_type_for
from service.wire.records import records_array

from .accept import accepted_formats
from .access import answer_404_first, check_topics, decision_of, visible
from .bodies import GATEWAY, Body, OptionalBody
from .consumers import set_timeouts
from .quotas import client_of
from .replies import V3, JSONBody, no_content
from .replies import v2 as v2_response
from .replies import v3 as v3_response
from .responses import CONSUMER_ERRORS, ERRORS, THROTTLED, records_doc
from .urls import public_base
from .v3 import _base, _check

router = APIRouter(
    prefix="/share-groups/{group}/consumers", tags=["share groups"], default_response_class=JSONBody
)
GW = Annotated[Gateway, Depends(get_gateway)]

# The body each route takes, declared once (bodies.py): the route reads it, the document shows it.
_CREATE = OptionalBody(wire.CreateShareConsumerRequest, GATEWAY)
_SUBSCRIPTION = Body(wire.ShareSubscriptionRequest, GATEWAY)
_ACKNOWLEDGE = Body(wire.AcknowledgeRequest, GATEWAY)
_RESET = Body(wire.ResetShareGroupRequest, GATEWAY, V3)
CONSUMER = "/{instance}"
_NO_CONTENT = {204: {"description": "Done."}, **CONSUMER_ERRORS}
_RECORDS = {"type": "array", "items": {"$ref": "#/components/schemas/ShareRecord"}}
# The piggy-backed acknowledgements of a poll that were refused: how many (POST …/acknowledgements
# says which, and why).
REFUSED_HEADER = "Brokergate-Acknowledgements-Refused"


def _config(req: wire.CreateShareConsumerRequest | None, gw: Gateway) -> InstanceConfig:
    s = gw.settings
    config = InstanceConfig(
        request_timeout_ms=s.consumer_request_timeout_ms,
        instance_timeout_ms=s.consumer_instance_timeout_ms,
        kind="share",
    )
    if req is None:
        return config
    config.format = req.format
    if req.auto_offset_reset is not None:
        config.auto_offset_reset = req.auto_offset_reset
    set_timeouts(config, s, req.consumer_request_timeout_ms, req.consumer_instance_timeout_ms)
    return config


def _base_uri(request: Request, group: str, instance: str) -> str:
    return f"{public_base(request)}/share-groups/{quote(group, safe='')}/consumers/{quote(instance, safe='')}"


@router.post(
    "",
    operation_id="createShareConsumer",
    responses={200: {"model": v2.CreateConsumerResponse}, **CONSUMER_ERRORS},
    openapi_extra=_CREATE.openapi,
)
async def create_share_consumer(group: str, request: Request, gw: GW) -> Response:
    """Create a consumer of share group `group` (created with its first consumer); it belongs to the
    caller. A group is a consumer group or a share group, not both (409)."""
    req = await _CREATE.read(request)
    who = await decision_of(request)
    state = await gw.share_consumers.create(
        group, req.name if req else None, _config(req, gw), owner=who.caller.principal
    )
    return v2_response({"instance_id": state.name, "base_uri": _base_uri(request, group, state.name)})


@router.delete(CONSUMER, operation_id="deleteShareConsumer", status_code=204, responses=_NO_CONTENT)
async def delete_share_consumer(group: str, instance: str, request: Request, gw: GW) -> Response:
    """Delete the consumer; the records it held are available to the others at once."""
    await gw.share_consumers.delete(group, instance, who=await decision_of(request))
    return no_content()


@router.post(
    CONSUMER + "/subscription",
    operation_id="subscribeShareConsumer",
    status_code=204,
    responses=_NO_CONTENT,
    openapi_extra=_SUBSCRIPTION.openapi,
)
async def subscribe(group: str, instance: str, request: Request, gw: GW) -> Response:
    """Read these topics (all their partitions, shared with the group's other consumers)."""
    async with answer_404_first(request, gw.share_consumers.check_owner, group, instance):
        req = await _SUBSCRIPTION.read(request)
        who = await check_topics(request, req.topics, Operation.READ)
        await gw.share_consumers.subscribe(group, instance, req.topics, who=who)
        return no_content()


@router.get(
    CONSUMER + "/subscription",
    operation_id="getShareSubscription",
    responses={200: {"model": wire.ShareSubscriptionResponse}, **CONSUMER_ERRORS},
)
async def get_subscription(group: str, instance: str, request: Request, gw: GW) -> Response:
    topics = await gw.share_consumers.subscription(group, instance, who=await decision_of(request))
    return v2_response({"topics": list(topics)})


@router.delete(
    CONSUMER + "/subscription",
    operation_id="unsubscribeShareConsumer",
    status_code=204,
    responses=_NO_CONTENT,
)
async def unsubscribe(group: str, instance: str, request: Request, gw: GW) -> Response:
    """Read nothing; the records the consumer held go back at once."""
    await gw.share_consumers.unsubscribe(group, instance, who=await decision_of(request))
    return no_content()


Timeout = Annotated[int | None, Query(description="Max wait in ms; default consumer.request.timeout.ms.")]
MaxBytes = Annotated[int | None, Query(description="Byte budget; a bigger record still comes alone.")]
MaxRecords = Annotated[
    int | None, Query(description="Most records to acquire; default and most: share_max_records.")
]
_POLL_RESPONSES = {
    200: {
        "model": list[wire.ShareRecord],
        "content": records_doc(_RECORDS)["content"],
        "headers": {
            REFUSED_HEADER: {
                "description": "POST only: how many of its acknowledgements were refused (absent if none).",
                "schema": {"type": "integer"},
            }
        },
    },
    **CONSUMER_ERRORS,
    **THROTTLED,
}


@router.get(CONSUMER + "/records", operation_id="pollShareRecords", responses=_POLL_RESPONSES)
async def poll(
    group: str,
    instance: str,
    request: Request,
    gw: GW,
    timeout: Timeout = None,
    max_bytes: MaxBytes = None,
    max_records: MaxRecords = None,
) -> Response:
    """Long-poll: acquire records as soon as some are available (new, released, or whose lock
    expired), or none at `timeout`. Each is the consumer's until its lock expires or it settles it."""
    return await _poll(request, gw, group, instance, timeout, max_bytes, max_records, ())


@router.post(
    CONSUMER + "/records",
    operation_id="acknowledgeAndPollShareRecords",
    responses=_POLL_RESPONSES,
    openapi_extra=_ACKNOWLEDGE.openapi,
)
async def acknowledge_and_poll(
    group: str,
    instance: str,
    request: Request,
    gw: GW,
    timeout: Timeout = None,
    max_bytes: MaxBytes = None,
    max_records: MaxRecords = None,
) -> Response:
    """Settle the acknowledgements of the body, then poll, in one round trip (how many were refused
    is in the Brokergate-Acknowledgements-Refused header)."""
    async with answer_404_first(request, gw.share_consumers.check_owner, group, instance):
        req = await _ACKNOWLEDGE.read(request)
        return await _poll(request, gw, group, instance, timeout, max_bytes, max_records, _acks(req))


async def _poll(
    request: Request,
    gw: GW,
    group: str,
    instance: str,
    timeout: int | None,
    max_bytes: int | None,
    max_records: int | None,
    acks: tuple[Acknowledgement, ...],
) -> Response:
    s = gw.settings
    budget = (
        s.consumer_max_bytes if max_bytes is None or max_bytes <= 0 else min(max_bytes, s.consumer_max_bytes)
    )
    most = (
        s.share_max_records
        if max_records is None or max_records <= 0
        else min(max_records, s.share_max_records)
    )
    accept = accepted_formats(request.headers.get("accept"))
    who = await check_topics(request, {a.tp.topic for a in acks}, Operation.READ)
    state, polled, refused = await gw.share_consumers.poll(
        group,
        instance,
        timeout_ms=None if timeout is None else min(timeout, s.consumer_max_timeout_ms),
        max_bytes=budget,
        max_records=most,
        acks=acks,
        accept=accept,
        client=client_of(request, gw.quotas) if gw.quotas.consume else "",
        who=who,
    )
    fmt = state.config.format
    gw.metrics.count_consumed(polled)
    headers = {REFUSED_HEADER: str(len(refused))} if refused else None
    return Response(records_array(fmt, polled), media_type=content_type_for(fmt), headers=headers)


@router.post(
    CONSUMER + "/acknowledgements",
    operation_id="acknowledgeShareRecords",
    responses={200: {"model": wire.AcknowledgeResponse}, **CONSUMER_ERRORS},
    openapi_extra=_ACKNOWLEDGE.openapi,
)
async def acknowledge(group: str, instance: str, request: Request, gw: GW) -> Response:
    """Settle records the consumer holds: accept (done), release (deliver again now; after the
    delivery limit it is archived instead), reject (archived), renew (hold it longer). Each offset
    stands alone: those the consumer does not hold are listed as refused, the rest are settled."""
    async with answer_404_first(request, gw.share_consumers.check_owner, group, instance):
        req = await _ACKNOWLEDGE.read(request)
        acks = _acks(req)
        who = await check_topics(request, {a.tp.topic for a in acks}, Operation.READ)
        refused = await gw.share_consumers.acknowledge(group, instance, acks, who=who)
        return v2_response(
            {
                "refused": [
                    {
                        "topic": r.tp.topic,
                        "partition": r.tp.partition,
                        "offset": r.offset,
                        "message": r.reason,
                    }
                    for r in refused
                ]
            }
        )


def _acks(req: wire.AcknowledgeRequest) -> tuple[Acknowledgement, ...]:
    """The body's acknowledgements (bounded to ``MAX_ACKNOWLEDGED`` offsets by its model)."""
    return tuple(
        Acknowledgement(
            TopicPartition(check_topic(a.topic), a.partition),
            a.offset_list(),
            AckType(a.type.upper()),
            a.error,
        )
        for a in req.acknowledgements
    )


# --- administration: v3 ---------------------------------------------------------------------

admin = APIRouter(
    prefix="/v3/clusters/{cluster_id}/share-groups", tags=["share groups"], default_response_class=JSONBody
)


def _group(base: str, cid: str, report: GroupReport) -> dict[str, Any]:
    url = f"{base}/{cid}/share-groups/{quote(report.group, safe='')}"
    return {
        "kind": "KafkaShareGroup",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cid}/share-group={report.group}"},
        "cluster_id": cid,
        "share_group_id": report.group,
        "state": "Stable" if report.consumers else "Empty",
        "consumers": [
            {"consumer_id": name, "subscription": list(topics)} for name, topics in report.consumers
        ],
        "partitions": [
            {
                "topic_name": p.tp.topic,
                "partition_id": p.tp.partition,
                "start_offset": p.start,
                "end_offset": p.end,
                "available": p.available,
                "acquired": p.acquired,
                "archiving": p.archiving,
                "lag": p.lag,
            }
            for p in report.partitions
        ],
        "lag": report.lag,
    }


@admin.get("", operation_id="listShareGroups", responses={200: {"model": wire.ShareGroupList}, **ERRORS})
async def list_share_groups(cluster_id: str, request: Request, gw: GW) -> Response:
    """Share groups (with consumers or delivery states) the caller may describe."""
    _check(cluster_id, gw)
    base = _base(request)
    data = []
    for group in await visible(request, ResourceType.GROUP, await gw.share_admin.groups()):
        try:
            data.append(_group(base, cluster_id, await gw.share_admin.describe(group)))
        except NotFound:
            continue  # gone meanwhile
    url = f"{base}/{cluster_id}/share-groups"
    return v3_response({"kind": "KafkaShareGroupList", "metadata": {"self": url, "next": None}, "data": data})


@admin.get(
    "/{group}", operation_id="getShareGroup", responses={200: {"model": wire.ShareGroupData}, **ERRORS}
)
async def get_share_group(cluster_id: str, group: str, request: Request, gw: GW) -> Response:
    """A share group: its consumers, and per partition its start and end offsets, records in
    flight by state, and lag."""
    _check(cluster_id, gw)
    return v3_response(_group(_base(request), cluster_id, await gw.share_admin.describe(group)))


@admin.post(
    "/{group}/reset",
    operation_id="resetShareGroup",
    responses={200: {"model": wire.ShareGroupData}, **CONSUMER_ERRORS},
    openapi_extra=_RESET.openapi,
)
async def reset_share_group(cluster_id: str, group: str, request: Request, gw: GW) -> Response:
    """Start the group over (as kafka-share-groups --reset-offsets): at the earliest or latest
    offsets of its topics, or at given offsets. Only while it has no consumers (409)."""
    _check(cluster_id, gw)
    req = await _RESET.read(request)
    if req.offsets is not None:
        offsets = {TopicPartition(o.topic, o.partition): o.offset for o in req.offsets}
        to: StartAt | dict[TopicPartition, int] = offsets
        named: list[str] = sorted({tp.topic for tp in offsets})
    else:
        assert req.to is not None
        to = req.to
        named = req.topics or []
    await check_topics(request, named, Operation.READ)
    await gw.share_admin.reset(group, to, req.topics)
    return v3_response(_group(_base(request), cluster_id, await gw.share_admin.describe(group)))


@admin.delete("/{group}", operation_id="deleteShareGroup", status_code=204, responses=_NO_CONTENT)
async def delete_share_group(cluster_id: str, group: str, gw: GW) -> Response:
    """Forget the group's delivery states (as kafka-share-groups --delete). Only while it has no
    consumers (409)."""
    _check(cluster_id, gw)
    await gw.share_admin.delete(group)
    return no_content()
