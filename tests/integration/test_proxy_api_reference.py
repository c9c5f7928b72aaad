"""The REST Proxy, indexed by Confluent's REST Proxy API reference: every v2 endpoint, in the
reference's order, with where it is tested, and v3 as a table of what is served.

``V2`` is the v2 reference (``kafka-rest``: ``resources/v2``: ``TopicsResource``,
``ProduceToTopicAction``, ``PartitionsResource``, ``ProduceToPartitionAction``,
``ConsumersResource``, ``BrokersResource``, ``RootResource``), ``V3`` the v3 one
(``resources/v3``), one ``Endpoint`` (test_registry_api_reference's) a row: the tests that prove
the gateway's answers to it (``module::test``), its query parameters the gateway does not serve,
and for an endpoint not served the reason. ``EXTENSIONS`` are the gateway's own routes (docs/api.md's
native extensions). Three tests keep the index whole: every route of the app is in ``V2``, ``V3``,
``EXTENSIONS`` or the registry's index; every row has a test that exists or a reason; and what is
not served answers a 404 or 405 in the v2 error shape. docs/api.md lists the differences.

The sections below test the parameters and answers the other modules do not; each test starts a
real gateway (``client``; the helpers are tests/helpers' and test_proxy_conformance's).
"""

from __future__ import annotations

import re
from typing import Any, Final

import httpx
import pytest

from service.api.access import route_keys
from service.server.app import create_app
from service.settings import Settings
from tests.helpers import BINARY, JSON, STRING, V2, b64, consumer, create_topic, subscribe
from tests.integration.test_proxy_conformance import (
    AVRO,
    JSONSCHEMA,
    ORDER,
    ORDER_JSON,
    ORDER_PROTO,
    PROTOBUF,
    post,
    refused,
)
from tests.integration.test_registry_api_reference import Endpoint, registry_routes

HERE: Final = "test_proxy_api_reference"
PRODUCE: Final = "test_produce"
CONSUMERS: Final = "test_consumers"
ERRORS: Final = "test_errors"
META: Final = "test_metadata"
CONFORMANCE: Final = "test_proxy_conformance"
V3_BODIES: Final = f"{CONFORMANCE}::test_v3_topic_bodies_are_bound_as_confluents_v3_binds_them"
ACL_BODIES: Final = "test_acls_api::test_bad_bindings_and_filters_are_refused"
FORMATS: Final = "test_schema_formats"
INSTANCE: Final = "/consumers/{group}/instances/{instance}"
ACCEPT: Final = f"{CONFORMANCE}::test_routes_refuse_an_accept_they_cannot_answer"
SLASH: Final = f"{CONFORMANCE}::test_trailing_slashes_are_served_directly"

V2_INDEX: Final[tuple[Endpoint, ...]] = (
    # --- topics (TopicsResource, ProduceToTopicAction)
    Endpoint("GET /topics", (f"{META}::test_topics_and_partitions", ACCEPT)),
    Endpoint(
        "GET /topics/{topic}",
        (
            f"{HERE}::test_what_is_not_there",
            f"{META}::test_topics_and_partitions",
            f"{ERRORS}::test_unknown_topic_and_partition",
        ),
    ),
    Endpoint(
        "POST /topics/{topic}",
        (
            f"{PRODUCE}::test_binary_produce_response_shape",
            f"{PRODUCE}::test_json_and_string_formats_round_trip",
            f"{FORMATS}::test_avro_inline_schema_is_registered_and_records_round_trip",
            f"{FORMATS}::test_json_schema_and_protobuf_round_trip",
            f"{CONFORMANCE}::test_a_schema_id_of_another_subject_is_a_serialization_error",
            f"{CONFORMANCE}::test_malformed_produce_bodies_are_bad_requests",
            f"{ERRORS}::test_wrong_content_type_is_415",
            f"{ERRORS}::test_body_over_the_limit_is_413",
            f"{ERRORS}::test_auto_create_off_gives_40401",
            f"{HERE}::test_produce_in_every_format",
        ),
    ),
    # --- partitions (PartitionsResource, ProduceToPartitionAction)
    Endpoint(
        "GET /topics/{topic}/partitions",
        (
            f"{HERE}::test_what_is_not_there",
            f"{META}::test_topics_and_partitions",
        ),
    ),
    Endpoint(
        "GET /topics/{topic}/partitions/{partition}",
        (
            f"{HERE}::test_what_is_not_there",
            f"{META}::test_topics_and_partitions",
            f"{ERRORS}::test_unknown_topic_and_partition",
        ),
    ),
    Endpoint(
        "GET /topics/{topic}/partitions/{partition}/offsets",
        (
            f"{HERE}::test_what_is_not_there",
            f"{META}::test_partition_offsets",
            f"{ERRORS}::test_unknown_topic_and_partition",
        ),
    ),
    Endpoint(
        "POST /topics/{topic}/partitions/{partition}",
        (
            f"{PRODUCE}::test_explicit_partition_per_record_and_per_request",
            f"{CONFORMANCE}::test_a_schema_id_of_another_subject_is_a_serialization_error",
            f"{CONFORMANCE}::test_malformed_produce_bodies_are_bad_requests",
            f"{ERRORS}::test_unknown_topic_and_partition",
            f"{HERE}::test_produce_in_every_format",
        ),
    ),
    # --- consumers (ConsumersResource)
    Endpoint(
        "POST /consumers/{group}",
        (
            f"{CONSUMERS}::test_create_consumer_returns_instance_and_base_uri",
            f"{CONSUMERS}::test_generated_instance_id_and_empty_body",
            f"{ERRORS}::test_bad_consumer_configs",
            f"{HERE}::test_a_consumer_in_every_format",
        ),
    ),
    Endpoint(
        f"DELETE {INSTANCE}",
        (f"{CONSUMERS}::test_delete_instance", f"{ERRORS}::test_unknown_instance_everywhere"),
    ),
    Endpoint(
        f"POST {INSTANCE}/subscription",
        (
            f"{CONSUMERS}::test_subscription_get_set_delete",
            f"{CONSUMERS}::test_pattern_subscription_picks_up_new_topics",
            f"{CONFORMANCE}::test_topics_win_over_a_pattern_given_with_them",
            f"{CONFORMANCE}::test_a_pattern_and_a_topic_list_do_not_replace_each_other",
            f"{ERRORS}::test_bad_subscriptions",
        ),
    ),
    Endpoint(f"GET {INSTANCE}/subscription", (f"{CONSUMERS}::test_subscription_get_set_delete",)),
    Endpoint(f"DELETE {INSTANCE}/subscription", (f"{CONSUMERS}::test_subscription_get_set_delete",)),
    Endpoint(
        f"POST {INSTANCE}/assignments",
        (f"{CONSUMERS}::test_manual_assignment_and_exclusivity", f"{ERRORS}::test_bad_seeks_and_commits"),
    ),
    Endpoint(f"GET {INSTANCE}/assignments", (f"{CONSUMERS}::test_manual_assignment_and_exclusivity",)),
    Endpoint(
        f"POST {INSTANCE}/offsets",
        (
            f"{CONSUMERS}::test_commit_explicit_stores_offset_plus_one_and_get_offsets",
            f"{CONSUMERS}::test_empty_commit_commits_everything_fetched",
            f"{ERRORS}::test_bad_seeks_and_commits",
            f"{HERE}::test_a_commit_takes_async",
        ),
    ),
    Endpoint(
        f"GET {INSTANCE}/offsets",
        (
            f"{CONSUMERS}::test_commit_explicit_stores_offset_plus_one_and_get_offsets",
            f"{CONSUMERS}::test_empty_commit_commits_everything_fetched",
        ),
    ),
    Endpoint(
        f"POST {INSTANCE}/positions",
        (f"{CONSUMERS}::test_seek_to_offset_and_beginning", f"{CONSUMERS}::test_seek_to_timestamp"),
    ),
    Endpoint(
        f"POST {INSTANCE}/positions/beginning",
        (
            f"{CONSUMERS}::test_seek_to_offset_and_beginning",
            f"{CONSUMERS}::test_seek_unassigned_partition_is_illegal_state",
        ),
    ),
    Endpoint(f"POST {INSTANCE}/positions/end", (f"{CONSUMERS}::test_seek_to_end",)),
    Endpoint(
        f"GET {INSTANCE}/records",
        (
            f"{CONSUMERS}::test_poll_is_a_real_long_poll",
            f"{CONSUMERS}::test_empty_poll_waits_for_timeout",
            f"{CONSUMERS}::test_max_bytes_limits_and_never_stalls",
            f"{CONSUMERS}::test_format_mismatch_is_406",
            f"{CONSUMERS}::test_binary_consumer_gets_base64",
            f"{FORMATS}::test_a_schema_consumer_refuses_other_accept_types",
            f"{FORMATS}::test_a_record_that_does_not_decode_stops_the_consumer_at_it_until_it_seeks_past",
        ),
    ),
    # --- brokers (BrokersResource) and the root (RootResource)
    Endpoint("GET /brokers", (f"{META}::test_root_and_brokers", ACCEPT)),
    Endpoint("GET /", (f"{META}::test_root_and_brokers", ACCEPT)),
    Endpoint(
        "POST /",
        (f"{HERE}::test_what_is_not_served_is_a_404_or_405",),
        not_served="a no-op Confluent keeps for its own server tests",
    ),
)

V3C: Final = "/v3/clusters/{cluster_id}"
ADMIN: Final = "brokergate's admin API is v3's topics, groups, lags and ACLs; use Kafka's tools for the rest"
V3_PRODUCE: Final = "v3's produce (a record stream per request) is not served: produce through v2"

V3_INDEX: Final[tuple[Endpoint, ...]] = (
    Endpoint("GET /v3/clusters", (f"{META}::test_v3_topic_lifecycle",)),
    Endpoint(f"GET {V3C}", (f"{META}::test_v3_topic_lifecycle",)),
    Endpoint(f"GET {V3C}/acls", ("test_acls_api::test_create_list_filter_delete",)),
    Endpoint(
        f"POST {V3C}/acls",
        ("test_acls_api::test_create_list_filter_delete", ACL_BODIES),
    ),
    Endpoint(f"DELETE {V3C}/acls", ("test_acls_api::test_create_list_filter_delete",)),
    Endpoint(f"POST {V3C}/acls:batch", not_served=ADMIN),
    Endpoint(f"GET {V3C}/brokers", (f"{META}::test_v3_topic_lifecycle",)),
    Endpoint(f"GET {V3C}/brokers/-/configs", not_served=ADMIN),
    Endpoint(f"GET {V3C}/brokers/{{broker_id}}", not_served=ADMIN),
    Endpoint(f"GET {V3C}/brokers/{{broker_id}}/configs", not_served=ADMIN),
    Endpoint(f"GET {V3C}/brokers/{{broker_id}}/configs/{{name}}", not_served=ADMIN),
    Endpoint(f"PUT {V3C}/brokers/{{broker_id}}/configs/{{name}}", not_served=ADMIN),
    Endpoint(f"DELETE {V3C}/brokers/{{broker_id}}/configs/{{name}}", not_served=ADMIN),
    Endpoint(f"POST {V3C}/brokers/{{broker_id}}/configs:alter", not_served=ADMIN),
    Endpoint(f"GET {V3C}/brokers/{{broker_id}}/partition-replicas", not_served=ADMIN),
    Endpoint(f"GET {V3C}/consumer-groups", ("test_groups::test_group_description_and_lag",)),
    Endpoint(f"GET {V3C}/consumer-groups/{{group}}", ("test_groups::test_group_description_and_lag",)),
    Endpoint(f"GET {V3C}/consumer-groups/{{group}}/consumers", not_served=ADMIN),
    Endpoint(f"GET {V3C}/consumer-groups/{{group}}/consumers/{{consumer}}", not_served=ADMIN),
    Endpoint(f"GET {V3C}/consumer-groups/{{group}}/consumers/{{consumer}}/assignments", not_served=ADMIN),
    Endpoint(
        f"GET {V3C}/consumer-groups/{{group}}/consumers/{{consumer}}/assignments"
        "/{topic}/partitions/{partition}",
        not_served=ADMIN,
    ),
    Endpoint(
        f"GET {V3C}/consumer-groups/{{group}}/lag-summary", ("test_groups::test_group_description_and_lag",)
    ),
    Endpoint(f"GET {V3C}/consumer-groups/{{group}}/lags", ("test_groups::test_group_description_and_lag",)),
    Endpoint(
        f"GET {V3C}/consumer-groups/{{group}}/lags/{{topic}}/partitions/{{partition}}", not_served=ADMIN
    ),
    Endpoint(f"GET {V3C}/topics", (f"{META}::test_v3_topic_lifecycle",)),
    Endpoint(
        f"POST {V3C}/topics",
        (f"{META}::test_v3_topic_lifecycle", f"{ERRORS}::test_bad_topic_creation", V3_BODIES),
    ),
    Endpoint(f"GET {V3C}/topics/-/configs", not_served=ADMIN),
    Endpoint(f"POST {V3C}/topics/-/configs:alter", not_served=ADMIN),
    Endpoint(f"GET {V3C}/topics/-/partitions/-/reassignment", not_served=ADMIN),
    Endpoint(f"GET {V3C}/topics/{{topic}}", (f"{META}::test_v3_topic_lifecycle",)),
    Endpoint(f"PATCH {V3C}/topics/{{topic}}", (f"{META}::test_grow_partition_count", V3_BODIES)),
    Endpoint(f"DELETE {V3C}/topics/{{topic}}", (f"{META}::test_v3_topic_lifecycle",)),
    Endpoint(f"GET {V3C}/topics/{{topic}}/configs", not_served=ADMIN),
    Endpoint(f"GET {V3C}/topics/{{topic}}/configs/{{name}}", not_served=ADMIN),
    Endpoint(f"PUT {V3C}/topics/{{topic}}/configs/{{name}}", not_served=ADMIN),
    Endpoint(f"DELETE {V3C}/topics/{{topic}}/configs/{{name}}", not_served=ADMIN),
    Endpoint(f"POST {V3C}/topics/{{topic}}/configs:alter", not_served=ADMIN),
    Endpoint(f"GET {V3C}/topics/{{topic}}/partitions", (f"{META}::test_v3_topic_lifecycle",)),
    Endpoint(f"GET {V3C}/topics/{{topic}}/partitions/-/reassignment", not_served=ADMIN),
    Endpoint(f"GET {V3C}/topics/{{topic}}/partitions/{{partition}}", not_served=ADMIN),
    Endpoint(f"GET {V3C}/topics/{{topic}}/partitions/{{partition}}/offset", not_served=ADMIN),
    Endpoint(f"GET {V3C}/topics/{{topic}}/partitions/{{partition}}/reassignment", not_served=ADMIN),
    Endpoint(f"GET {V3C}/topics/{{topic}}/partitions/{{partition}}/replicas", not_served=ADMIN),
    Endpoint(f"GET {V3C}/topics/{{topic}}/partitions/{{partition}}/replicas/{{broker_id}}", not_served=ADMIN),
    Endpoint(f"POST {V3C}/topics/{{topic}}/records", not_served=V3_PRODUCE),
    Endpoint(f"POST {V3C}/topics/{{topic}}/records:batch", not_served=V3_PRODUCE),
    Endpoint(f"GET {V3C}/{{config_type}}-configs", not_served=ADMIN),
    Endpoint(f"GET {V3C}/{{config_type}}-configs/{{name}}", not_served=ADMIN),
    Endpoint(f"PUT {V3C}/{{config_type}}-configs/{{name}}", not_served=ADMIN),
    Endpoint(f"DELETE {V3C}/{{config_type}}-configs/{{name}}", not_served=ADMIN),
    Endpoint(f"POST {V3C}/{{config_type}}-configs:alter", not_served=ADMIN),
)

# The gateway's own routes, none of Confluent's (docs/api.md: native extensions; docs/streams.md;
# docs/share-groups.md; docs/push.md; the documentation, the AsyncAPI document, health and metrics
# routes; the web console).
EXTENSIONS: Final = re.compile(
    r"(GET|POST|DELETE|WS) (/openapi\.json|/asyncapi\.json|/docs.*|/redoc|/healthz|/readyz|/metrics|/ui.*"
    r"|/topics/\{topic\}/partitions/\{partition\}/records|/share-groups/.*"
    r"|/v3/clusters/\{cluster_id\}/share-groups.*)|WS /consumers/\{group\}/instances/\{instance\}/records"
    r"|(GET|PUT|POST|DELETE) /v3/clusters/\{cluster_id\}/push-subscriptions.*"
)


# --- the index itself ---------------------------------------------------------------------------


def test_every_route_is_in_an_index() -> None:
    app = create_app(Settings())
    keys = [key for route in app.routes for key in route_keys(route)]
    named = {e.route for e in V2_INDEX + V3_INDEX}
    assert len(named) == len(V2_INDEX) + len(V3_INDEX), "an endpoint is named twice"
    registry = {f"{k.split()[0]} /schema-registry{k.split()[1]}".rstrip("/") for k in registry_routes()}
    unnamed = [
        k for k in keys if k not in named and k.rstrip("/") not in registry and not EXTENSIONS.fullmatch(k)
    ]
    assert not unnamed, "routes no index names"
    served = [e.route for e in V2_INDEX + V3_INDEX if e.not_served and e.route in keys]
    assert not served, "served, yet 'not served'"


def test_every_endpoint_has_a_test_or_a_reason() -> None:
    for endpoint in V2_INDEX + V3_INDEX:
        endpoint.check()


@pytest.mark.parametrize(
    "endpoint",
    [e for e in V2_INDEX + V3_INDEX if e.not_served],
    ids=lambda e: e.route if isinstance(e, Endpoint) else "",
)
async def test_what_is_not_served_is_a_404_or_405(client: httpx.AsyncClient, endpoint: Endpoint) -> None:
    """A route of Confluent's the gateway does not serve is the gateway's no-such-route answer."""
    method, path = endpoint.route.split()
    cluster = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    concrete = re.sub(r"\{[^}]+\}", "x", path.replace("{cluster_id}", cluster))
    body = {} if method in ("POST", "PUT") else None
    r = await client.request(method, concrete, json=body, headers={"Content-Type": V2})
    # Confluent's (rest-utils' WebApplicationExceptionMapper): the status as the error code,
    # Jersey's message
    expected = {404: "HTTP 404 Not Found", 405: "HTTP 405 Method Not Allowed"}
    assert r.json() == {"error_code": r.status_code, "message": expected[r.status_code]}, r.text


# Jersey's message (its status line), then, as the 406 does, what the route would take.
UNSUPPORTED = "HTTP 415 Unsupported Media Type: this route reads"
PRODUCE_READS = (
    "application/vnd.kafka.binary.v2+json, application/vnd.kafka.json.v2+json, "
    "application/vnd.kafka.string.v2+json, application/vnd.kafka.avro.v2+json, "
    "application/vnd.kafka.jsonschema.v2+json, application/vnd.kafka.protobuf.v2+json "
    "or application/json (read as binary)"
)
CONTROL_READS = "application/vnd.kafka.v2+json or application/json"


@pytest.mark.parametrize(
    ("method", "path", "content_type", "status", "message"),
    [
        ("GET", "/no/such/route", None, 404, "HTTP 404 Not Found"),
        ("POST", "/topics/{t}/nonsense", V2, 404, "HTTP 404 Not Found"),
        ("GET", "/v3/nothing", None, 404, "HTTP 404 Not Found"),
        ("GET", "/topics/{t}/partitions/abc", None, 404, "HTTP 404 Not Found"),
        ("GET", "/consumers/{t}/instances/i/nothing", None, 404, "HTTP 404 Not Found"),
        ("DELETE", "/topics/{t}", None, 405, "HTTP 405 Method Not Allowed"),
        ("PUT", "/consumers/{t}", V2, 405, "HTTP 405 Method Not Allowed"),
        ("POST", "/brokers", V2, 405, "HTTP 405 Method Not Allowed"),
        ("POST", "/topics/{t}", "text/plain", 415, f"{UNSUPPORTED} {PRODUCE_READS}, not 'text/plain'."),
        (
            "POST",
            "/consumers/{t}",
            "application/xml",
            415,
            f"{UNSUPPORTED} {CONTROL_READS}, not 'application/xml'.",
        ),
        (
            "POST",
            "/v3/clusters/{c}/topics",
            "text/plain",
            415,
            f"{UNSUPPORTED} {CONTROL_READS}, not 'text/plain'.",
        ),
        ("GET", "/schema-registry/nothing", None, 404, "HTTP 404 Not Found"),
        ("DELETE", "/schema-registry/schemas", None, 405, "HTTP 405 Method Not Allowed"),
    ],
)
async def test_jerseys_own_errors_are_the_status_as_the_code(
    client: httpx.AsyncClient,
    name: str,
    method: str,
    path: str,
    content_type: str | None,
    status: int,
    message: str,
) -> None:
    """A path no route has, a method the route does not take, a Content-Type it does not read and
    a path parameter that does not convert are Jersey's NotFoundException, NotAllowedException and
    NotSupportedException under Confluent's proxy and registry: rest-utils'
    WebApplicationExceptionMapper answers the status as the code and Jersey's message."""
    await create_topic(client, name, 1)
    cluster = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    headers = {"Content-Type": content_type} if content_type else {}
    body = b"{}" if content_type else None
    r = await client.request(method, path.format(t=name, c=cluster), content=body, headers=headers)
    assert r.status_code == status, r.text
    assert r.json() == {"error_code": status, "message": message}, r.text
    if status == 405:
        assert r.headers["allow"], r.headers


async def test_what_is_there_keeps_its_own_code(client: httpx.AsyncClient, name: str) -> None:
    """Not Jersey's 404: an unknown topic, partition and consumer instance are the proxy's own
    40401, 40402 and 40403 (Errors.java), an unknown subject the registry's 40401."""
    refused(await client.get(f"/topics/{name}"), 404, 40401)
    await create_topic(client, name, 1)
    refused(await client.get(f"/topics/{name}/partitions/7"), 404, 40402)
    refused(await client.get(f"/consumers/{name}/instances/ghost/subscription"), 404, 40403)
    r = await client.get(f"/schema-registry/subjects/{name}/versions")
    assert (r.status_code, r.json()["error_code"]) == (404, 40401), r.text


# --- GET /topics/{topic}, GET /topics/{topic}/partitions[/{partition}[/offsets]] (TopicsResource,
# PartitionsResource) ---------------------------------------------------------------------------


async def test_what_is_not_there(client: httpx.AsyncClient, name: str) -> None:
    """Confluent's codes; the messages name the topic and partition, where Confluent's say "Topic
    not found." and "Partition not found." (docs/api.md lists the difference)."""
    for path in (f"/topics/{name}", f"/topics/{name}/partitions", f"/topics/{name}/partitions/0/offsets"):
        assert name in refused(await client.get(path), 404, 40401), path
    await create_topic(client, name, 1)
    for path in (f"/topics/{name}/partitions/1", f"/topics/{name}/partitions/1/offsets"):
        message = refused(await client.get(path), 404, 40402)
        assert name in message and "1" in message, path


# --- POST /topics/{topic}, POST /topics/{topic}/partitions/{partition} (ProduceToTopicAction,
# ProduceToPartitionAction): every embedded format ------------------------------------------------

FORMATS_ON_THE_WIRE: Final[list[Any]] = [
    pytest.param(BINARY, {}, {"value": b64("v")}, id="binary"),
    pytest.param(JSON, {}, {"value": {"any": ["json", 1]}}, id="json"),
    pytest.param(STRING, {}, {"value": "text"}, id="string"),
    pytest.param(AVRO, {"value_schema": ORDER}, {"value": {"id": "o", "qty": 1}}, id="avro"),
    pytest.param(JSONSCHEMA, {"value_schema": ORDER_JSON}, {"value": {"id": "o"}}, id="jsonschema"),
    pytest.param(PROTOBUF, {"value_schema": ORDER_PROTO}, {"value": {"id": "o"}}, id="protobuf"),
]


@pytest.mark.parametrize(("media_type", "schema", "record"), FORMATS_ON_THE_WIRE)
async def test_produce_in_every_format(
    client: httpx.AsyncClient, name: str, media_type: str, schema: dict[str, Any], record: dict[str, Any]
) -> None:
    """Each embedded format to a topic, then to a partition: Confluent's answer shape (a schema's
    id given back for the schema formats, the first time inline and then by id)."""
    await create_topic(client, name, 2)
    r = await post(client, f"/topics/{name}", media_type, {**schema, "records": [record]})
    assert r.status_code == 200, r.text
    first = r.json()
    assert set(first) == {"key_schema_id", "value_schema_id", "offsets"}
    by_id = {"value_schema_id": first["value_schema_id"]} if schema else {}
    assert (first["value_schema_id"] is None) is (not schema)
    r = await post(client, f"/topics/{name}/partitions/1", media_type, {**by_id, "records": [record]})
    assert r.status_code == 200, r.text
    assert (
        r.json()["offsets"][0]["partition"] == 1 and r.json()["value_schema_id"] == first["value_schema_id"]
    )
    r = await post(client, f"/topics/{name}/partitions/2", media_type, {**by_id, "records": [record]})
    refused(r, 404, 40402)


# --- POST /consumers/{group} (ConsumersResource.createGroup) -------------------------------------


@pytest.mark.parametrize("fmt", ["binary", "json", "avro", "jsonschema", "protobuf", "BINARY"])
async def test_a_consumer_in_every_format(client: httpx.AsyncClient, name: str, fmt: str) -> None:
    """Confluent's formats, named in any case (CreateConsumerInstanceRequest upper-cases it)."""
    r = await client.post(
        f"/consumers/g-{name}", json={"name": "c", "format": fmt}, headers={"Content-Type": V2}
    )
    assert r.status_code == 200, r.text
    assert r.json()["instance_id"] == "c" and r.json()["base_uri"].endswith(
        f"/consumers/g-{name}/instances/c"
    )
    refused(
        await client.post(
            f"/consumers/g-{name}", json={"name": "c", "format": fmt}, headers={"Content-Type": V2}
        ),
        409,
        40902,
    )
    assert (
        await client.delete(f"/consumers/g-{name}/instances/c", headers={"Content-Type": V2})
    ).status_code == 204


# --- POST /consumers/{group}/instances/{instance}/offsets (ConsumersResource.commitOffsets) ------


async def test_a_commit_takes_async(client: httpx.AsyncClient, name: str) -> None:
    """``?async=true`` (Confluent: commitAsync rather than commitSync) commits as well."""
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, name)
    body = {"offsets": [{"topic": name, "partition": 0, "offset": 4}]}
    r = await client.post(
        f"{base}/offsets", params={"async": "true"}, json=body, headers={"Content-Type": V2}
    )
    assert r.status_code == 200, r.text
    r = await client.request(
        "GET",
        f"{base}/offsets",
        json={"partitions": [{"topic": name, "partition": 0}]},
        headers={"Content-Type": V2},
    )
    assert r.json()["offsets"][0]["offset"] == 5
