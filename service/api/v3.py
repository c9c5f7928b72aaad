"""Native admin in Confluent's v3 shapes: cluster, topics (create, grow, delete), consumer groups, lag."""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import Field

from api_schemas import v3
from service.api.gateway import Gateway, get_gateway
from service.core.acl import Operation, ResourceType
from service.core.groups import GroupDescription, PartitionLag, resolve
from service.core.models import TopicInfo, TopicPartition
from service.errors import InvalidPayload, InvalidTopicConfig, NotFound

from .access import decision_of, visible
from .binding import Jackson
from .bodies import Body
from .replies import V3, JSONBody, no_content
from .replies import v3 as v3_response
from .responses import ERRORS
from .urls import public_base

router = APIRouter(prefix="/v3/clusters", tags=["v3"], default_response_class=JSONBody)
GW = Annotated[Gateway, Depends(get_gateway)]
CLUSTER = "/{cluster_id}"


def _base(request: Request) -> str:
    return public_base(request) + "/v3/clusters"


def _check(cluster_id: str, gw: Gateway) -> None:
    if cluster_id != gw.log.cluster_id:
        raise NotFound(f"Cluster {cluster_id} cannot be found.")  # Confluent's AbstractConfigManager's words


def _cluster(base: str, cid: str) -> dict[str, Any]:
    url = f"{base}/{cid}"
    return {
        "kind": "KafkaCluster",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cid}"},
        "cluster_id": cid,
        "brokers": {"related": f"{url}/brokers"},
        "topics": {"related": f"{url}/topics"},
        "consumer_groups": {"related": f"{url}/consumer-groups"},
    }


def _topic(base: str, cid: str, info: TopicInfo) -> dict[str, Any]:
    url = f"{base}/{cid}/topics/{info.name}"
    return {
        "kind": "KafkaTopic",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cid}/topic={info.name}"},
        "cluster_id": cid,
        "topic_name": info.name,
        "is_internal": False,
        "replication_factor": info.replication_factor,
        "partitions_count": len(info.partitions),
        "configs": info.configs,
        "partitions": {"related": f"{url}/partitions"},
    }


def _listing(kind: str, url: str, data: list[Any]) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"self": url, "next": None}, "data": data}


# The answers of a body bound as Confluent's v3 binds it (``binding.bind``), for the API document.
BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {
        **ERRORS[422],
        "description": "A body Confluent's v3 cannot bind: not JSON, a value of the wrong type or a "
        "required field left out (error code 400).",
    },
    422: {
        **ERRORS[422],
        "description": "A field the request has not (Unrecognized field: x) or a value breaking a "
        "constraint (error code 422); a request the gateway refuses (42201-42208).",
    },
}


_EXISTS: Final = " Or the topic exists (40002)."


class _ConfigEntry(v3.ConfigEntry):
    value: str | None = None  # CreateTopicRequest.ConfigEntry's value is @Nullable


class _CreateTopicBody(v3.CreateTopicRequest):
    """The names Confluent's CreateTopicRequest has beside the gateway's: bound as it binds them
    (so they are no unrecognized field), refused when they ask for what is not served."""

    # each config's value may be left out
    configs: list[_ConfigEntry] = Field(default_factory=list)  # type: ignore[assignment]
    replicas_assignments: dict[int, list[int]] | None = None  # partition: its brokers
    validate_only: bool | None = None


# v3's AutoValue builders throw on a required field left out (``Jackson.creator_requires``).
_CREATE_TOPIC = Body(_CreateTopicBody, Jackson(creator_requires=True), V3, shown=v3.CreateTopicRequest)
_PARTITION_COUNT = Body(v3.UpdatePartitionCountRequest, Jackson(creator_requires=True), V3)


@router.get("", operation_id="listClusters", responses={200: {"model": v3.ClusterList}})
async def list_clusters(request: Request, gw: GW) -> Response:
    base = _base(request)
    return v3_response(_listing("KafkaClusterList", base, [_cluster(base, gw.log.cluster_id)]))


@router.get(CLUSTER, operation_id="getCluster", responses={200: {"model": v3.Cluster}, **ERRORS})
async def get_cluster(cluster_id: str, request: Request, gw: GW) -> Response:
    _check(cluster_id, gw)
    return v3_response(_cluster(_base(request), cluster_id))


@router.get(
    CLUSTER + "/brokers", operation_id="listBrokersV3", responses={200: {"model": v3.BrokerList}, **ERRORS}
)
async def list_brokers(cluster_id: str, request: Request, gw: GW) -> Response:
    _check(cluster_id, gw)
    url = f"{_base(request)}/{cluster_id}/brokers"
    data = [
        {
            "kind": "KafkaBroker",
            "metadata": {
                "self": f"{url}/{b.broker_id}",
                "resource_name": f"crn:///kafka={cluster_id}/broker={b.broker_id}",
            },
            "cluster_id": cluster_id,
            "broker_id": b.broker_id,
            "host": b.host,
            "port": b.port,
        }
        for b in await gw.log.brokers()
    ]
    return v3_response(_listing("KafkaBrokerList", url, data))


@router.get(
    CLUSTER + "/topics", operation_id="listTopicsV3", responses={200: {"model": v3.TopicList}, **ERRORS}
)
async def list_topics(cluster_id: str, request: Request, gw: GW) -> Response:
    _check(cluster_id, gw)
    base = _base(request)
    data = []
    for name in await visible(request, ResourceType.TOPIC, await gw.topics.names()):
        try:
            data.append(_topic(base, cluster_id, await gw.topics.describe(name)))
        except NotFound:  # deleted while listing
            continue
    return v3_response(_listing("KafkaTopicList", f"{base}/{cluster_id}/topics", data))


@router.post(
    CLUSTER + "/topics",
    operation_id="createTopic",
    status_code=201,
    responses={
        201: {"model": v3.TopicData},
        **ERRORS,
        400: {**BODY_ERRORS[400], "description": BODY_ERRORS[400]["description"] + _EXISTS},
        422: BODY_ERRORS[422],
    },
    openapi_extra=_CREATE_TOPIC.openapi,
)
async def create_topic(cluster_id: str, request: Request, gw: GW) -> Response:
    """Create a topic (400/40002 if it exists)."""
    _check(cluster_id, gw)
    # Bound as Confluent's v3 binds it: Jackson's 400, 422 for an unrecognized field or a constraint
    req = await _CREATE_TOPIC.read(request)
    if req.validate_only or req.replicas_assignments:
        raise InvalidPayload("validate_only and replicas_assignments are not served: create the topic.")
    (await decision_of(request)).check_create_topic(req.topic_name)  # a rule's ``named`` need
    configs: dict[str, str] = {}
    for c in req.configs:
        if c.value is None:
            raise InvalidTopicConfig(f"Config {c.name!r} needs a value.")
        configs[c.name] = c.value
    info = await gw.topics.create(
        req.topic_name,
        req.partitions_count if req.partitions_count is not None else gw.settings.default_partitions,
        req.replication_factor if req.replication_factor is not None else -1,
        configs,
    )
    who = await decision_of(request)
    who.audit(
        "topic.create", Operation.CREATE, ResourceType.TOPIC, info.name, partitions=len(info.partitions)
    )
    return v3_response(_topic(_base(request), cluster_id, info), status_code=201)


@router.get(
    CLUSTER + "/topics/{topic}", operation_id="getTopicV3", responses={200: {"model": v3.TopicData}, **ERRORS}
)
async def get_topic(cluster_id: str, topic: str, request: Request, gw: GW) -> Response:
    _check(cluster_id, gw)
    return v3_response(_topic(_base(request), cluster_id, await gw.topics.describe(topic)))


@router.get(
    CLUSTER + "/topics/{topic}/partitions",
    operation_id="listPartitionsV3",
    responses={200: {"model": v3.PartitionList}, **ERRORS},
)
async def list_partitions(cluster_id: str, topic: str, request: Request, gw: GW) -> Response:
    """Partitions with their leader, replicas and beginning/end offsets."""
    _check(cluster_id, gw)
    base = _base(request)
    info = await gw.topics.describe(topic)
    url = f"{base}/{cluster_id}/topics/{topic}/partitions"
    data = []
    for p in info.partitions:
        begin, end = await gw.log.offsets(TopicPartition(topic, p.partition))
        data.append(
            {
                "kind": "KafkaPartition",
                "metadata": {
                    "self": f"{url}/{p.partition}",
                    "resource_name": f"crn:///kafka={cluster_id}/topic={topic}/partition={p.partition}",
                },
                "cluster_id": cluster_id,
                "topic_name": topic,
                "partition_id": p.partition,
                "leader": {"related": f"{base}/{cluster_id}/brokers/{p.leader}"},
                "replicas": list(p.replicas),
                "beginning_offset": begin,
                "end_offset": end,
            }
        )
    return v3_response(_listing("KafkaPartitionList", url, data))


@router.patch(
    CLUSTER + "/topics/{topic}",
    operation_id="updatePartitionCount",
    responses={200: {"model": v3.TopicData}, **ERRORS, **BODY_ERRORS},
    openapi_extra=_PARTITION_COUNT.openapi,
)
async def update_partition_count(cluster_id: str, topic: str, request: Request, gw: GW) -> Response:
    """Increase a topic's partition count; subscribed groups rebalance onto the new partitions."""
    _check(cluster_id, gw)
    req = await _PARTITION_COUNT.read(request)
    info = await gw.topics.set_partition_count(topic, req.partitions_count)
    who = await decision_of(request)
    who.audit("topic.alter", Operation.ALTER, ResourceType.TOPIC, topic, partitions=len(info.partitions))
    return v3_response(_topic(_base(request), cluster_id, info))


@router.delete(
    CLUSTER + "/topics/{topic}",
    operation_id="deleteTopic",
    status_code=204,
    responses={204: {"description": "Deleted."}, **ERRORS},
)
async def delete_topic(cluster_id: str, topic: str, request: Request, gw: GW) -> Response:
    _check(cluster_id, gw)
    await gw.topics.delete(topic)
    (await decision_of(request)).audit("topic.delete", Operation.DELETE, ResourceType.TOPIC, topic)
    return no_content()


async def _group(base: str, cid: str, desc: GroupDescription, gw: Gateway) -> dict[str, Any]:
    url = f"{base}/{cid}/consumer-groups/{desc.group}"
    all_topics = await gw.log.list_topics()
    consumers = []
    for member_id, member in sorted(desc.members.items()):
        consumers.append(
            {
                "kind": "KafkaConsumer",
                "metadata": {"self": f"{url}/consumers/{member_id}", "resource_name": None},
                "cluster_id": cid,
                "consumer_group_id": desc.group,
                "consumer_id": member_id,
                "instance_id": member_id,
                "client_id": member_id,
                "subscription": sorted(resolve(member.subscription, all_topics)),
                "topic_pattern": member.subscription.pattern,
                "assignments": [
                    {"topic_name": tp.topic, "partition_id": tp.partition}
                    for tp in sorted(desc.state.assignment.get(member_id, []))
                ],
            }
        )
    return {
        "kind": "KafkaConsumerGroup",
        "metadata": {"self": url, "resource_name": f"crn:///kafka={cid}/consumer-group={desc.group}"},
        "cluster_id": cid,
        "consumer_group_id": desc.group,
        "is_simple": not desc.members,
        "partition_assignor": desc.strategy,
        "state": "Stable" if desc.members else "Empty",
        "generation": desc.state.generation,
        "consumers": consumers,
        "lag_summary": {"related": f"{url}/lag-summary"},
        "lags": {"related": f"{url}/lags"},
    }


@router.get(
    CLUSTER + "/consumer-groups",
    operation_id="listConsumerGroups",
    responses={200: {"model": v3.ConsumerGroupList}, **ERRORS},
)
async def list_groups(cluster_id: str, request: Request, gw: GW) -> Response:
    _check(cluster_id, gw)
    base = _base(request)
    data = []
    for group in await visible(request, ResourceType.GROUP, sorted(await gw.coordinator.groups())):
        try:
            data.append(await _group(base, cluster_id, await gw.groups.describe(group), gw))
        except NotFound:
            continue
    return v3_response(_listing("KafkaConsumerGroupList", f"{base}/{cluster_id}/consumer-groups", data))


@router.get(
    CLUSTER + "/consumer-groups/{group}",
    operation_id="getConsumerGroup",
    responses={200: {"model": v3.ConsumerGroupData}, **ERRORS},
)
async def get_group(cluster_id: str, group: str, request: Request, gw: GW) -> Response:
    """A group with its members, their subscriptions and assignments, and its generation."""
    _check(cluster_id, gw)
    return v3_response(await _group(_base(request), cluster_id, await gw.groups.describe(group), gw))


async def _lags(request: Request, gw: Gateway, group: str) -> list[PartitionLag]:
    """The group's lag on the topics the caller may DESCRIBE (Kafka's OffsetFetch leaves out the others)."""
    who = await decision_of(request)
    return [
        lag
        for lag in await gw.groups.lag(group)
        if who.may(ResourceType.TOPIC, lag.tp.topic, Operation.DESCRIBE)
    ]


def _lag_rows(cid: str, group: str, lags: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "kind": "KafkaConsumerLag",
            "cluster_id": cid,
            "consumer_group_id": group,
            "topic_name": lag.tp.topic,
            "partition_id": lag.tp.partition,
            "current_offset": -1 if lag.committed is None else lag.committed,
            "log_end_offset": lag.end_offset,
            "lag": lag.lag,
            "consumer_id": lag.owner or "",
            "instance_id": lag.owner or "",
            "client_id": lag.owner or "",
        }
        for lag in lags
    ]


@router.get(
    CLUSTER + "/consumer-groups/{group}/lags",
    operation_id="getConsumerGroupLags",
    responses={200: {"model": v3.ConsumerLagList}, **ERRORS},
)
async def get_lags(cluster_id: str, group: str, request: Request, gw: GW) -> Response:
    """Per partition: committed offset, log end offset and lag (end minus committed)."""
    _check(cluster_id, gw)
    rows = _lag_rows(cluster_id, group, await _lags(request, gw, group))
    url = f"{_base(request)}/{cluster_id}/consumer-groups/{group}/lags"
    return v3_response(_listing("KafkaConsumerLagList", url, rows))


@router.get(
    CLUSTER + "/consumer-groups/{group}/lag-summary",
    operation_id="getConsumerGroupLagSummary",
    responses={200: {"model": v3.LagSummary}, **ERRORS},
)
async def get_lag_summary(cluster_id: str, group: str, request: Request, gw: GW) -> Response:
    _check(cluster_id, gw)
    lags = await _lags(request, gw, group)
    worst = max(lags, key=lambda lag: lag.lag, default=None)
    return v3_response(
        {
            "kind": "KafkaConsumerGroupLagSummary",
            "cluster_id": cluster_id,
            "consumer_group_id": group,
            "max_lag": worst.lag if worst else 0,
            "total_lag": sum(max(lag.lag, 0) for lag in lags),  # a position past the end is behind on nothing
            "max_lag_topic_name": worst.tp.topic if worst else None,
            "max_lag_partition_id": worst.tp.partition if worst else None,
            "partitions_past_end": sum(1 for lag in lags if lag.lag < 0),
        }
    )
