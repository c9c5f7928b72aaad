"""v2 consumer resources: instances, subscription, assignment, records, offsets, positions."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from api_schemas import v2
from service.api.gateway import Gateway, get_gateway
from service.core.acl import Operation
from service.core.assignors import STRATEGIES
from service.core.models import InstanceConfig, Subscription, TopicPartition
from service.core.rules import MAX_PARTITION
from service.errors import (
    ConsumerConfigConstraint,
    InvalidConsumerConfig,
    InvalidPayload,
    PayloadTooLarge,
    Unprocessable,
)
from service.settings import Settings
from service.wire.formats import content_type_for
from service.wire.timestamps import epoch_millis

from .accept import ACCEPTS_CONSUMER_TYPES, accepted_formats
from .access import answer_404_first, check_topics, decision_of
from .binding import JACKSON, Jackson, Refusals
from .bodies import Body, OptionalBody, check_control_type
from .quotas import client_of
from .replies import JSONBody, no_content, records_response
from .replies import v2 as v2_response
from .responses import CONSUMER_ERRORS, THROTTLED, records_doc
from .streams.sse import EVENT_STREAM_DOC, LastEventId, instance_events, wants_events
from .urls import public_base

router = APIRouter(prefix="/consumers/{group}", tags=["consumers"], default_response_class=JSONBody)
GW = Annotated[Gateway, Depends(get_gateway)]
INSTANCE = "/instances/{instance}"
_RECORDS = {"type": "array", "items": {"$ref": "#/components/schemas/ConsumerRecord"}}
# A body is bound as Confluent's proxy binds it (binding.py): its 400 and 422 as the document says.
_ERRORS: dict[int | str, dict[str, Any]] = {
    **CONSUMER_ERRORS,
    400: {
        "model": v2.ErrorBody,
        "description": "A body Confluent's JSON binding refuses: not JSON, not an object, a value of "
        "the wrong JSON type (error code 400).",
    },
    422: {
        "model": v2.ErrorBody,
        "description": "A body naming a field its class does not have, breaking one of its constraints "
        "or an unknown format (error code 422); a consumer config Kafka refuses (42204) or out of "
        "range (40001); another invalid request (42201-42208).",
    },
}
_NO_CONTENT = {204: {"description": "Done."}, **_ERRORS}

# Confluent's proxy passes these to Kafka's consumer, whose ConfigException it answers 42204 with
# the consumer's message (KafkaConsumerManager.createConsumer); its CreateConsumerInstanceRequest
# refuses a format it does not know as it is built, with RestConstraintViolationException's 422.
_CONFIG_REFUSALS: Refusals = {
    "format": lambda value: Unprocessable("Invalid format type."),
    "auto.offset.reset": lambda value: InvalidConsumerConfig(
        f"Invalid consumer configuration: Invalid value {value} for configuration auto.offset.reset: "
        "String must be one of: latest, earliest, none"
    ),
    "auto.commit.enable": lambda value: InvalidConsumerConfig(
        f"Invalid consumer configuration: Invalid value {value} for configuration enable.auto.commit: "
        "Expected value to be either true or false"
    ),
}
# CreateConsumerInstanceRequest's other names: its @JsonAlias, and "id", which names the instance
# over "name" (KafkaConsumerManager.getConsumerInstanceName).
_CONFIG_ALIASES = {
    "id": "name",
    "responseMinBytes": "fetch.min.bytes",
    "requestWaitMs": "consumer.request.timeout.ms",
}

# The body each route takes, declared once (bodies.py): the route reads it, the document shows it.
_CREATE = OptionalBody(v2.CreateConsumerRequest, Jackson(refusals=_CONFIG_REFUSALS, aliases=_CONFIG_ALIASES))
_SUBSCRIPTION = Body(v2.SubscriptionRequest, JACKSON)
_PARTITIONS = Body(v2.PartitionsRequest, JACKSON)
_SOME_PARTITIONS = OptionalBody(v2.PartitionsRequest, JACKSON)
_COMMIT = OptionalBody(v2.CommitRequest, JACKSON)
_SEEK = Body(v2.SeekRequest, JACKSON)

# KafkaRestConfig.PROXY_FETCH_MIN_BYTES_VALIDATOR: -1 (no minimum) to 10 MB.
FETCH_MIN_BYTES_RANGE = (-1, 10_000_000)


def _config(req: v2.CreateConsumerRequest | None, gw: Gateway) -> InstanceConfig:
    s = gw.settings
    config = InstanceConfig(
        request_timeout_ms=s.consumer_request_timeout_ms,
        instance_timeout_ms=s.consumer_instance_timeout_ms,
    )
    if req is None:
        return config
    config.format = req.format
    if req.auto_offset_reset is not None:
        config.auto_offset_reset = req.auto_offset_reset
    if req.auto_commit_enable is not None:
        config.auto_commit = str(req.auto_commit_enable).lower() == "true"
    if req.fetch_min_bytes is not None:
        config.fetch_min_bytes = max(1, _fetch_min_bytes(int(req.fetch_min_bytes)))
    set_timeouts(config, s, req.consumer_request_timeout_ms, req.consumer_instance_timeout_ms)
    if req.partition_assignment_strategy is not None:
        if req.partition_assignment_strategy not in STRATEGIES:
            raise InvalidConsumerConfig(
                f"Unknown partition.assignment.strategy {req.partition_assignment_strategy!r}; "
                "use range, roundrobin or balanced."
            )
        config.strategy = req.partition_assignment_strategy
    return config


def _fetch_min_bytes(value: int) -> int:
    """``fetch.min.bytes`` within Confluent's range, else its 40001 (the range's ConfigException)."""
    least, most = FETCH_MIN_BYTES_RANGE
    if value < least or value > most:
        bound = f"be at least {least}" if value < least else f"be no more than {most}"
        raise ConsumerConfigConstraint(
            "Invalid consumer configuration. It does not abide by the constraints: "
            f"Invalid value {value} for configuration fetch.min.bytes: Value must {bound}"
        )
    return value


def set_timeouts(
    config: InstanceConfig, s: Settings, request_ms: int | str | None, instance_ms: int | str | None
) -> None:
    """``consumer.request.timeout.ms`` (capped at the most a poll waits) and
    ``consumer.instance.timeout.ms`` (refused beyond what the settings allow) into ``config``."""
    if request_ms is not None:
        if int(request_ms) < 0:
            raise InvalidPayload("consumer.request.timeout.ms: must not be negative")
        config.request_timeout_ms = min(int(request_ms), s.consumer_max_timeout_ms)
    if instance_ms is not None:
        timeout = int(instance_ms)
        most = s.consumer_max_instance_timeout_ms
        if not 1000 <= timeout <= most:
            raise InvalidConsumerConfig(
                f"consumer.instance.timeout.ms must be between 1000 and {most}: "
                "an instance nobody polls must be reaped in bounded time."
            )
        config.instance_timeout_ms = timeout


def _base_uri(request: Request, group: str, instance: str) -> str:
    # Every name is one path segment, whatever characters it holds.
    return f"{public_base(request)}/consumers/{quote(group, safe='')}/instances/{quote(instance, safe='')}"


@router.post(
    "",
    operation_id="createConsumer",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    responses={200: {"model": v2.CreateConsumerResponse}, **_ERRORS},
    openapi_extra=_CREATE.openapi,
)
async def create_consumer(group: str, request: Request, gw: GW) -> Response:
    """Create a consumer instance in `group`; it belongs to the caller (anyone else gets 404)."""
    req = await _CREATE.read(request)
    who = await decision_of(request)
    state = await gw.consumers.create(
        group, req.name if req else None, _config(req, gw), owner=who.caller.principal
    )
    return v2_response({"instance_id": state.name, "base_uri": _base_uri(request, group, state.name)})


@router.delete(
    INSTANCE,
    operation_id="deleteConsumer",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    status_code=204,
    responses=_NO_CONTENT,
)
async def delete_consumer(group: str, instance: str, request: Request, gw: GW) -> Response:
    """Delete the instance; its partitions go to the rest of the group."""
    await gw.consumers.delete(group, instance, who=await decision_of(request))
    return no_content()


@router.post(
    INSTANCE + "/subscription",
    operation_id="subscribe",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    status_code=204,
    responses=_NO_CONTENT,
    openapi_extra=_SUBSCRIPTION.openapi,
)
async def subscribe(group: str, instance: str, request: Request, gw: GW) -> Response:
    """Subscribe to a list of topics or to a regex pattern (new matching topics are picked up)."""
    async with answer_404_first(request, gw.consumers.check_owner, group, instance):
        req = await _SUBSCRIPTION.read(request)
        # Confluent's proxy hands KafkaConsumer.subscribe the topics if given, else the pattern if
        # given, else nothing; and that consumer takes an empty list for an unsubscribe.
        if req.topics is not None:
            if not req.topics:
                await gw.consumers.unsubscribe(group, instance, who=await decision_of(request))
                return no_content()
            sub = Subscription(tuple(dict.fromkeys(req.topics)))
        elif req.topic_pattern is not None:
            sub = Subscription(pattern=req.topic_pattern)
        else:
            await gw.consumers.renew(group, instance, who=await decision_of(request))
            return no_content()
        who = await check_topics(request, sub.topics, Operation.READ)
        await gw.consumers.subscribe(group, instance, sub, who=who)
        return no_content()


@router.get(
    INSTANCE + "/subscription",
    operation_id="getSubscription",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    responses={200: {"model": v2.SubscriptionResponse}, **_ERRORS},
)
async def get_subscription(group: str, instance: str, request: Request, gw: GW) -> Response:
    who = await decision_of(request)
    sub = await gw.consumers.subscription(group, instance, who=who)
    if sub is None:
        return v2_response({"topics": []})
    if sub.pattern is not None:
        topics = sorted(await gw.consumers.subscribed_topics(group, instance, who=who))
        return v2_response({"topics": topics, "topic_pattern": sub.pattern})
    existing = await gw.consumers.subscribed_topics(group, instance, who=who)
    missing = [topic for topic in sub.topics if topic not in existing]  # a typo polls [] for ever
    return v2_response({"topics": list(sub.topics), **({"missing_topics": missing} if missing else {})})


@router.delete(
    INSTANCE + "/subscription",
    operation_id="unsubscribe",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    status_code=204,
    responses=_NO_CONTENT,
)
async def unsubscribe(group: str, instance: str, request: Request, gw: GW) -> Response:
    await gw.consumers.unsubscribe(group, instance, who=await decision_of(request))
    return no_content()


def _tps(req: v2.PartitionsRequest) -> list[TopicPartition]:
    return [TopicPartition(p.topic, p.partition) for p in req.partitions]


@router.post(
    INSTANCE + "/assignments",
    operation_id="assignPartitions",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    status_code=204,
    responses=_NO_CONTENT,
    openapi_extra=_PARTITIONS.openapi,
)
async def assign(group: str, instance: str, request: Request, gw: GW) -> Response:
    """Manually assign partitions (no group management)."""
    async with answer_404_first(request, gw.consumers.check_owner, group, instance):
        req = await _PARTITIONS.read(request)
        tps = _tps(req)
        who = await check_topics(request, (tp.topic for tp in tps), Operation.READ)
        await gw.consumers.assign(group, instance, tps, who=who)
        return no_content()


@router.get(
    INSTANCE + "/assignments",
    operation_id="getAssignments",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    responses={200: {"model": v2.AssignmentResponse}, **_ERRORS},
)
async def get_assignments(group: str, instance: str, request: Request, gw: GW) -> Response:
    tps = await gw.consumers.assignment(group, instance, who=await decision_of(request))
    return v2_response({"partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in tps]})


@router.get(
    INSTANCE + "/records",
    operation_id="pollRecords",
    responses={
        200: {
            "model": list[v2.ConsumerRecord],
            "content": {**records_doc(_RECORDS)["content"], **EVENT_STREAM_DOC},
        },
        **CONSUMER_ERRORS,
        **THROTTLED,
    },
)
async def poll(
    group: str,
    instance: str,
    request: Request,
    gw: GW,
    timeout: Annotated[
        int | None, Query(description="Max wait in ms; default consumer.request.timeout.ms.")
    ] = None,
    max_bytes: Annotated[
        int | None, Query(description="Byte budget; a bigger record still comes alone.")
    ] = None,
    last_event_id: LastEventId = None,
) -> Response:
    """Long-poll for records: returns as soon as some are available, or empty at `timeout`.

    With `Accept: text/event-stream`, the records as Server-Sent Events, as they arrive.
    """
    # the resource's @Consumes holds for its GETs: 415 before Accept is read, as Jersey
    check_control_type(request)
    if wants_events(request):
        return await instance_events(
            request, gw, group, instance, max_bytes=max_bytes, last_event_id=last_event_id
        )
    s = gw.settings
    if timeout is not None:
        timeout = min(timeout, s.consumer_max_timeout_ms)
    budget = (
        s.consumer_max_bytes if max_bytes is None or max_bytes <= 0 else min(max_bytes, s.consumer_max_bytes)
    )
    fmt, polled = await gw.consumers.poll(
        group,
        instance,
        timeout_ms=timeout,
        max_bytes=budget,
        accept=accepted_formats(request.headers.get("accept")),
        client=client_of(request, gw.quotas) if gw.quotas.consume else "",
        who=await decision_of(request),
    )
    gw.metrics.count_consumed(polled)
    return records_response(fmt, polled, media_type=content_type_for(fmt))


@router.post(
    INSTANCE + "/offsets",
    operation_id="commitOffsets",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    responses={200: {"model": list[v2.TopicPartitionOffset]}, **_ERRORS},
    openapi_extra=_COMMIT.openapi,
)
async def commit(group: str, instance: str, request: Request, gw: GW) -> Response:
    """Commit: each listed offset is the last processed (offset+1 is stored); no body commits all fetched."""
    async with answer_404_first(request, gw.consumers.check_owner, group, instance):
        req = await _COMMIT.read(request)
        offsets = None
        if req is not None and req.offsets is not None:
            offsets = {TopicPartition(o.topic, o.partition): o.offset for o in req.offsets}
        who = await check_topics(request, (tp.topic for tp in offsets or ()), Operation.READ)
        done = await gw.consumers.commit(group, instance, offsets, who=who)
        return v2_response(
            [
                {"topic": tp.topic, "partition": tp.partition, "offset": off}
                for tp, off in sorted(done.items())
            ]
        )


NamedPartitions = Annotated[
    list[str] | None,
    Query(
        description="The partitions, as `topic:partition`, repeated or comma-separated "
        "(`?partitions=orders:0,orders:1`): the form a client that cannot send a GET with a body "
        "(fetch) uses instead of the body.",
    ),
]


def named_partitions(values: list[str], limit_bytes: int) -> list[TopicPartition]:
    """The partitions ``?partitions=`` names (``topic:partition``, repeated or comma-separated),
    in order, each once; ``InvalidPayload`` for a malformed one, ``PayloadTooLarge`` past the
    size a body may have."""
    size = sum(len(value) for value in values)
    if size > limit_bytes:
        raise PayloadTooLarge(f"The partitions named in the query are over the limit of {limit_bytes} bytes.")
    named: dict[TopicPartition, None] = {}
    for value in values:
        for item in value.split(","):
            topic, _, number = item.rpartition(":")
            digits = number.isascii() and number.isdigit() and len(number) <= len(str(MAX_PARTITION))
            if not topic or not digits or int(number) > MAX_PARTITION:
                raise InvalidPayload(
                    f"partitions: {item[:100]!r} is not topic:partition "
                    f"(a partition from 0 to {MAX_PARTITION})."
                )
            named[TopicPartition(topic, int(number))] = None
    return list(named)


@router.get(
    INSTANCE + "/offsets",
    operation_id="getCommittedOffsets",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    responses={200: {"model": v2.CommittedOffsetsResponse}, **_ERRORS},
    openapi_extra=_SOME_PARTITIONS.openapi,
)
async def committed(
    group: str, instance: str, request: Request, gw: GW, partitions: NamedPartitions = None
) -> Response:
    """Committed offsets of the listed partitions (default: the instance's assignment), listed in
    the body as Confluent's proxy takes them, or in the query (`partitions`)."""
    async with answer_404_first(request, gw.consumers.check_owner, group, instance):
        req = await _SOME_PARTITIONS.read(request)
        tps = _tps(req) if req else None
        if partitions is not None:
            if tps is not None:
                raise InvalidPayload("Name the partitions in the body or in the query, not both.")
            tps = named_partitions(partitions, gw.settings.max_request_bytes)
        who = await check_topics(request, (tp.topic for tp in tps or ()), Operation.DESCRIBE)
        found = await gw.consumers.committed(group, instance, tps, who=who)
        return v2_response(
            {
                "offsets": [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "offset": -1 if off is None else off,
                        "metadata": "",
                    }
                    for tp, off in found.items()
                ]
            }
        )


@router.post(
    INSTANCE + "/positions",
    operation_id="seek",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    status_code=204,
    responses=_NO_CONTENT,
    openapi_extra=_SEEK.openapi,
)
async def seek(group: str, instance: str, request: Request, gw: GW) -> Response:
    """Seek assigned partitions to offsets, or to the first offset at/after timestamps."""
    async with answer_404_first(request, gw.consumers.check_owner, group, instance):
        req = await _SEEK.read(request)
        named = [o.topic for o in req.offsets or ()] + [t.topic for t in req.timestamps or ()]
        who = await check_topics(request, named, Operation.DESCRIBE)
        if not req.offsets and not req.timestamps:
            # nothing to seek, as KafkaConsumerState.seek does nothing, but of an instance found first
            await gw.consumers.renew(group, instance, who=who)
        if req.offsets:
            offsets = {TopicPartition(o.topic, o.partition): o.offset for o in req.offsets}
            await gw.consumers.seek(group, instance, offsets, who=who)
        if req.timestamps:
            targets = {
                TopicPartition(t.topic, t.partition): epoch_millis(t.timestamp, f"timestamps[{i}]")
                for i, t in enumerate(req.timestamps)
            }
            await gw.consumers.seek_to_timestamps(group, instance, targets, who=who)
        return no_content()


@router.post(
    INSTANCE + "/positions/beginning",
    operation_id="seekToBeginning",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    status_code=204,
    responses=_NO_CONTENT,
    openapi_extra=_PARTITIONS.openapi,
)
async def seek_to_beginning(group: str, instance: str, request: Request, gw: GW) -> Response:
    async with answer_404_first(request, gw.consumers.check_owner, group, instance):
        req = await _PARTITIONS.read(request)
        tps = _tps(req)
        who = await check_topics(request, (tp.topic for tp in tps), Operation.DESCRIBE)
        await gw.consumers.seek_to(group, instance, tps, end=False, who=who)
        return no_content()


@router.post(
    INSTANCE + "/positions/end",
    operation_id="seekToEnd",
    dependencies=[ACCEPTS_CONSUMER_TYPES],
    status_code=204,
    responses=_NO_CONTENT,
    openapi_extra=_PARTITIONS.openapi,
)
async def seek_to_end(group: str, instance: str, request: Request, gw: GW) -> Response:
    async with answer_404_first(request, gw.consumers.check_owner, group, instance):
        req = await _PARTITIONS.read(request)
        tps = _tps(req)
        who = await check_topics(request, (tp.topic for tp in tps), Operation.DESCRIBE)
        await gw.consumers.seek_to(group, instance, tps, end=True, who=who)
        return no_content()
