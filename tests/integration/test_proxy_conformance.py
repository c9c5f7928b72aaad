"""The REST Proxy v2 API answers as Confluent's, organised by Confluent's v2 API reference.

Each section is a resource of the reference (produce to a topic or a partition with schemas,
consumer subscriptions, brokers and topics, the content negotiation of every route), each test
a request a client sends and the status, error code and message Confluent's proxy answers it
with (``kafka-rest``: ``resources/v2``, ``controllers/SchemaManagerImpl``,
``controllers/*RecordSerializer*``, ``Errors``, Jackson's binding errors). Where Confluent's own
answer is a bug it marks as such, the gateway's better answer is asserted and docs/api.md lists
the difference.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.helpers import BINARY, JSON, STRING, V2, b64, cluster_id, consumer, create_topic

AVRO = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF = "application/vnd.kafka.protobuf.v2+json"

ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "string"}, {"name": "qty", "type": "int"}],
    }
)
OTHER = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "x", "type": "long"}]})
ORDER_JSON = json.dumps({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]})
OTHER_JSON = json.dumps({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]})
ORDER_PROTO = 'syntax = "proto3";\nmessage Order {\n  string id = 1;\n}\n'
OTHER_PROTO = 'syntax = "proto3";\nmessage Other {\n  int64 x = 1;\n}\n'

# (format's media type, the schema type the registry takes, the topic's schema, another, a value)
SCHEMA_FORMATS = [
    pytest.param(AVRO, "AVRO", ORDER, OTHER, {"id": "o-1", "qty": 1}, id="avro"),
    pytest.param(JSONSCHEMA, "JSON", ORDER_JSON, OTHER_JSON, {"id": "o-1"}, id="jsonschema"),
    pytest.param(PROTOBUF, "PROTOBUF", ORDER_PROTO, OTHER_PROTO, {"id": "o-1"}, id="protobuf"),
]


def refused(r: httpx.Response, status: int, code: int) -> str:
    """The message of a refusal in Confluent's v2 error shape with this status and error code."""
    assert (r.status_code, r.json().get("error_code")) == (status, code), r.text
    assert set(r.json()) == {"error_code", "message"}, r.text
    return str(r.json()["message"])


async def post(client: httpx.AsyncClient, path: str, media_type: str, body: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await client.post(path, content=content, headers={"Content-Type": media_type})


async def register(client: httpx.AsyncClient, subject: str, schema_type: str, text: str) -> int:
    r = await client.post(
        f"/schema-registry/subjects/{subject}/versions",
        json={"schema": text, "schemaType": schema_type},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    assert r.status_code == 200, r.text
    return int(r.json()["id"])


async def end_offset(client: httpx.AsyncClient, topic: str) -> int:
    return int((await client.get(f"/topics/{topic}/partitions/0/offsets")).json()["end_offset"])


# --- POST /topics/{topic} and /topics/{topic}/partitions/{partition}: schemas by id ------------


@pytest.mark.parametrize(("media_type", "schema_type", "schema", "other", "value"), SCHEMA_FORMATS)
@pytest.mark.parametrize("target", ["/topics/{t}", "/topics/{t}/partitions/0"])
async def test_a_schema_id_of_another_subject_is_a_serialization_error(
    client: httpx.AsyncClient,
    name: str,
    target: str,
    media_type: str,
    schema_type: str,
    schema: str,
    other: str,
    value: Any,
) -> None:
    """Confluent's SchemaManager asks the registry for the id's version under the topic's subject
    (TopicNameStrategy: ``{topic}-value``); an id that is none is its 42207."""
    await create_topic(client, name, 1)
    path = target.format(t=name)
    mine = await register(client, f"{name}-value", schema_type, schema)
    elsewhere = await register(client, f"{name}-elsewhere", schema_type, other)
    message = refused(
        await post(client, path, media_type, {"value_schema_id": elsewhere, "records": [{"value": value}]}),
        422,
        42207,
    )
    assert message.startswith("Error serializing message. Error when fetching schema version. ")
    assert f"subject = {name}-value" in message and "error code: 40403" in message
    assert await end_offset(client, name) == 0
    # a subject with no version at all: the registry's 40401
    message = refused(
        await post(client, path, media_type, {"key_schema_id": mine, "records": [{"key": value}]}), 422, 42207
    )
    assert f"subject = {name}-key" in message and "error code: 40401" in message
    # the topic's own schema by id is taken
    r = await post(client, path, media_type, {"value_schema_id": mine, "records": [{"value": value}]})
    assert r.status_code == 200 and r.json()["value_schema_id"] == mine, r.text


async def test_an_unknown_schema_id_is_a_serialization_error(client: httpx.AsyncClient, name: str) -> None:
    """The registry's 40403 for the id becomes the proxy's 42207, its message and code quoted."""
    await create_topic(client, name, 1)
    for side in ("key", "value"):
        body = {f"{side}_schema_id": 666, "records": [{side: {"id": "o", "qty": 1}}]}
        message = refused(await post(client, f"/topics/{name}", AVRO, body), 422, 42207)
        assert message == (
            "Error serializing message. Error when fetching schema by id. schemaId = 666\n"
            "Schema 666 not found; error code: 40403"
        )
    assert await end_offset(client, name) == 0


async def test_a_schema_id_given_as_a_string_is_taken_as_its_number(
    client: httpx.AsyncClient, name: str
) -> None:
    """Jackson binds ``"value_schema_id": "1"`` to the integer 1; text that is no integer is its 400."""
    await create_topic(client, name, 1)
    schema_id = await register(client, f"{name}-value", "AVRO", ORDER)
    body = {"value_schema_id": str(schema_id), "records": [{"value": {"id": "a", "qty": 1}}]}
    r = await post(client, f"/topics/{name}", AVRO, body)
    assert r.status_code == 200 and r.json()["value_schema_id"] == schema_id, r.text
    for bad in ("one", "1.5", True, {"id": 1}):
        body = {"value_schema_id": bad, "records": [{"value": {"id": "a", "qty": 1}}]}
        refused(await post(client, f"/topics/{name}", AVRO, body), 400, 400)
    # so is a record's partition
    r = await post(client, f"/topics/{name}", BINARY, {"records": [{"value": b64("x"), "partition": "0"}]})
    assert r.status_code == 200 and r.json()["offsets"][0]["partition"] == 0, r.text
    assert await end_offset(client, name) == 2


async def test_an_incompatible_inline_schema_is_a_serialization_error(
    client: httpx.AsyncClient, name: str
) -> None:
    """The registry's 409 on registering the inline schema is the proxy's 42207."""
    await create_topic(client, name, 1)
    await register(client, f"{name}-value", "AVRO", ORDER)
    incompatible = json.dumps(
        {**json.loads(ORDER), "fields": [*json.loads(ORDER)["fields"], {"name": "x", "type": "int"}]}
    )
    body = {"value_schema": incompatible, "records": [{"value": {"id": "a", "qty": 1, "x": 1}}]}
    message = refused(await post(client, f"/topics/{name}", AVRO, body), 422, 42207)
    assert message.startswith(
        f"Error serializing message. Error when registering schema. format = AVRO, subject = {name}-value, "
    )
    assert message.endswith("; error code: 409")
    assert await end_offset(client, name) == 0


async def test_a_record_that_does_not_fit_its_schema_is_a_bad_request(
    client: httpx.AsyncClient, name: str
) -> None:
    """Confluent's SchemaRecordSerializer: a value the schema cannot take is a 400."""
    await create_topic(client, name, 1)
    body = {"value_schema": ORDER, "records": [{"value": {"id": "a", "qty": "many"}}]}
    message = refused(await post(client, f"/topics/{name}", AVRO, body), 400, 400)
    assert message.startswith("Bad Request: records[0].value: "), message
    assert await end_offset(client, name) == 0


# --- POST /topics/{topic}: bodies Confluent's JSON binding or record serializer refuses ---------


@pytest.mark.parametrize(
    ("media_type", "body", "message"),
    [
        (
            BINARY,
            b'{"records": [{"value": "!!!not base64"}]}',
            'Bad Request: data="!!!not base64" is not a valid',
        ),
        (BINARY, b'{"records": [{"value": 12}]}', "Bad Request: data=12 is not a base64 string."),
        (
            BINARY,
            b'{"records": [{"key": {"a": 1}, "value": null}]}',
            'Bad Request: data={"a":1} is not a base64',
        ),
        (STRING, b'{"records": [{"value": 12}]}', "Bad Request: data=12 is not a string."),
        (BINARY, b'{"records": "YQ=="}', "Cannot deserialize 'records'"),
        (BINARY, b'{"records": {"value": "YQ=="}}', "Cannot deserialize 'records'"),
        (BINARY, b'{"records": [1, 2]}', "Cannot deserialize records[0]"),
        (JSON, b'{"records": ["value"]}', "Cannot deserialize records[0]"),
        (BINARY, b'["records"]', "Cannot deserialize a produce request"),
        (BINARY, b"{not json", "Request body is not valid JSON"),
        (
            BINARY,
            b'{"records": [{"value": "a", "partition": "zero"}]}',
            "Cannot deserialize records[0].partition",
        ),
        (
            AVRO,
            b'{"value_schema": {"type": "int"}, "records": [{"value": 1}]}',
            "Cannot deserialize 'value_schema'",
        ),
    ],
)
@pytest.mark.parametrize("target", ["/topics/{t}", "/topics/{t}/partitions/0"])
async def test_malformed_produce_bodies_are_bad_requests(
    client: httpx.AsyncClient, name: str, target: str, media_type: str, body: bytes, message: str
) -> None:
    await create_topic(client, name, 1)
    said = refused(await post(client, target.format(t=name), media_type, body), 400, 400)
    assert said.startswith(message), said
    assert await end_offset(client, name) == 0


# --- POST /consumers/{group}/instances/{instance}/subscription ---------------------------------


async def subscription(client: httpx.AsyncClient, base: str) -> dict[str, Any]:
    r = await client.get(f"{base}/subscription")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def subscribe_with(client: httpx.AsyncClient, base: str, body: dict[str, Any]) -> httpx.Response:
    return await client.post(f"{base}/subscription", json=body, headers={"Content-Type": V2})


async def test_topics_win_over_a_pattern_given_with_them(client: httpx.AsyncClient, name: str) -> None:
    """ConsumersResource hands KafkaConsumer.subscribe the topics if given, else the pattern."""
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}")
    r = await subscribe_with(client, base, {"topics": [name], "topic_pattern": "nothing-.*"})
    assert r.status_code == 204, r.text
    assert await subscription(client, base) == {"topics": [name]}


async def test_a_subscription_naming_nothing_changes_nothing(client: httpx.AsyncClient, name: str) -> None:
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}")
    assert (await subscribe_with(client, base, {"topics": [name]})).status_code == 204
    r = await subscribe_with(client, base, {})
    assert r.status_code == 204, r.text
    assert await subscription(client, base) == {"topics": [name]}
    # an empty list is KafkaConsumer.subscribe's unsubscribe
    assert (await subscribe_with(client, base, {"topics": []})).status_code == 204
    assert await subscription(client, base) == {"topics": []}


async def test_a_pattern_and_a_topic_list_do_not_replace_each_other(
    client: httpx.AsyncClient, name: str
) -> None:
    """Kafka's consumer refuses to switch between a pattern and a topic list (IllegalStateException),
    which Confluent's proxy answers with 409/40903; a DELETE first, and the switch is taken."""
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}")
    assert (await subscribe_with(client, base, {"topic_pattern": f"{name}.*"})).status_code == 204
    message = refused(await subscribe_with(client, base, {"topics": [name]}), 409, 40903)
    assert "Subscription to topics, partitions and pattern are mutually exclusive" in message
    assert (await subscription(client, base))["topic_pattern"] == f"{name}.*"
    # pattern to pattern, and topics to topics, replace
    assert (await subscribe_with(client, base, {"topic_pattern": f"{name}-x.*"})).status_code == 204
    assert (await client.delete(f"{base}/subscription")).status_code == 204
    assert (await subscribe_with(client, base, {"topics": [name]})).status_code == 204
    refused(await subscribe_with(client, base, {"topic_pattern": f"{name}.*"}), 409, 40903)
    assert (await subscribe_with(client, base, {"topics": [name, name]})).status_code == 204
    assert await subscription(client, base) == {"topics": [name]}


# --- The consumer routes' bodies: what Confluent's JSON binding refuses, and what it binds -------

# (route under the instance, method, body, the message's start): text that is not JSON and a value
# of the wrong JSON type are Jackson's JsonParseException and JsonMappingException, rest-utils'
# 400 with error code 400, on every consumer route as on produce.
BAD_CONSUMER_BODIES = [
    ("/subscription", "POST", b"[", "Request body is not valid JSON"),
    ("/subscription", "POST", b'["topics"]', "Cannot deserialize the request body from a list"),
    ("/subscription", "POST", b'"topics"', "Cannot deserialize the request body from a string"),
    ("/subscription", "POST", b'{"topics": "a"}', "Cannot deserialize 'topics' from a string"),
    ("/subscription", "POST", b'{"topics": [["a"]]}', "Cannot deserialize topics[0] from a list"),
    ("/subscription", "POST", b'{"topic_pattern": {"p": 1}}', "Cannot deserialize 'topic_pattern'"),
    ("/assignments", "POST", b'{"partitions": {"topic": "t"}}', "Cannot deserialize 'partitions'"),
    (
        "/assignments",
        "POST",
        b'{"partitions": [{"topic": "t", "partition": "zero"}]}',
        "Cannot deserialize partitions[0].partition from a string",
    ),
    ("/assignments", "POST", b'{"partitions": [7]}', "Cannot deserialize partitions[0] from a number"),
    ("/offsets", "POST", b"{", "Request body is not valid JSON"),
    (
        "/offsets",
        "POST",
        b'{"offsets": [{"topic": "t", "partition": 0, "offset": "x"}]}',
        "Cannot deserialize offsets[0].offset",
    ),
    ("/offsets", "GET", b'{"partitions": "t"}', "Cannot deserialize 'partitions'"),
    ("/positions", "POST", b'{"offsets": "x"}', "Cannot deserialize 'offsets'"),
    (
        "/positions",
        "POST",
        b'{"timestamps": [{"topic": "t", "partition": 0, "timestamp": "yesterday"}]}',
        # each kind the field takes, not the first alone
        'Cannot deserialize timestamps[0].timestamp from a string ("yesterday"): it is an integer or '
        "an ISO 8601 timestamp.",
    ),
    (
        "/positions",
        "POST",
        b'{"timestamps": [{"topic": "t", "partition": 0, "timestamp": [1]}]}',
        "Cannot deserialize timestamps[0].timestamp from a list: it is an integer or an ISO 8601 timestamp.",
    ),
    ("/positions/beginning", "POST", b'{"partitions": 5}', "Cannot deserialize 'partitions'"),
    ("/positions/end", "POST", b"[]", "Cannot deserialize the request body from a list"),
]


@pytest.mark.parametrize(("route", "method", "body", "message"), BAD_CONSUMER_BODIES)
async def test_consumer_bodies_confluents_binding_refuses_are_bad_requests(
    client: httpx.AsyncClient, name: str, route: str, method: str, body: bytes, message: str
) -> None:
    base = await consumer(client, f"g-{name}")
    r = await client.request(method, f"{base}{route}", content=body, headers={"Content-Type": V2})
    said = refused(r, 400, 400)
    assert said.startswith(message), said


@pytest.mark.parametrize(
    ("body", "status", "code", "message"),
    [
        (b"[", 400, 400, "Request body is not valid JSON"),
        (b'[{"format": "json"}]', 400, 400, "Cannot deserialize the request body from a list"),
        (b'{"fetch.min.bytes": "lots"}', 400, 400, "Cannot deserialize 'fetch.min.bytes' from a string"),
        (b'{"format": {"json": true}}', 400, 400, "Cannot deserialize 'format' from an object"),
        (b'{"auto.offset.reset": ["earliest"]}', 400, 400, "Cannot deserialize 'auto.offset.reset'"),
        # CreateConsumerInstanceRequest refuses a format it does not know as it is built: 422, 422
        (b'{"format": "thrift"}', 422, 422, "Invalid format type."),
        (b'{"format": 5}', 422, 422, "Invalid format type."),
        # Kafka's consumer refuses these configs: KafkaConsumerManager's 42204
        (
            b'{"auto.offset.reset": "smallest"}',
            422,
            42204,
            "Invalid consumer configuration: Invalid value smallest for configuration auto.offset.reset",
        ),
        (
            b'{"auto.commit.enable": "maybe"}',
            422,
            42204,
            "Invalid consumer configuration: Invalid value maybe for configuration enable.auto.commit",
        ),
        # KafkaRestConfig.PROXY_FETCH_MIN_BYTES_VALIDATOR: -1 to 10 MB, else 40001
        (
            b'{"fetch.min.bytes": -5}',
            422,
            40001,
            "Invalid consumer configuration. It does not abide by the constraints: Invalid value -5 "
            "for configuration fetch.min.bytes: Value must be at least -1",
        ),
        (b'{"fetch.min.bytes": 10000001}', 422, 40001, "Invalid consumer configuration. It does not"),
    ],
)
async def test_consumer_configs_confluent_refuses(
    client: httpx.AsyncClient, name: str, body: bytes, status: int, code: int, message: str
) -> None:
    r = await client.post(f"/consumers/{name}", content=body, headers={"Content-Type": V2})
    said = refused(r, status, code)
    assert said.startswith(message), said


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("", {"format": "json", "group": "g"}, "group"),
        ("", {"auto_offset_reset": "earliest"}, "auto_offset_reset"),
        ("/subscription", {"topics": ["t"], "pattern": "t.*"}, "pattern"),
        ("/assignments", {"partitions": [{"topic": "t", "partition": 0, "offset": 1}]}, "offset"),
        ("/offsets", {"offsets": [{"topic": "t", "partition": 0, "offset": 1, "leader": 1}]}, "leader"),
        ("/positions/end", {"partitions": [], "all": True}, "all"),
    ],
)
async def test_a_field_the_request_class_does_not_have_is_refused(
    client: httpx.AsyncClient, name: str, route: str, body: dict[str, Any], field: str
) -> None:
    """Jackson fails on an unknown property; rest-utils' JacksonMessageBodyProvider answers it as a
    constraint violation: 422 with error code 422, ``Unrecognized field: x``."""
    base = await consumer(client, f"g-{name}")
    url = f"/consumers/h-{name}" if not route else f"{base}{route}"
    r = await client.post(url, json=body, headers={"Content-Type": V2})
    assert refused(r, 422, 422) == f"Unrecognized field: {field}"


@pytest.mark.parametrize(
    ("route", "body", "message"),
    [
        (
            "/assignments",
            b'{"partitions": [{"topic": "t", "partition": -1}]}',
            "partitions[0].partition must be greater than or equal to 0 (was -1)",
        ),
        ("/positions/end", b'{"partitions": [{"partition": 0}]}', "partitions[0].topic must not be null"),
        (
            "/offsets",
            b'{"offsets": [{"topic": "t", "partition": 0, "offset": -2}]}',
            "offsets[0].offset must be greater than or equal to 0 (was -2)",
        ),
        ("/subscription", b"", "The request body must not be null"),
        ("/positions", b"null", "The request body must not be null"),
    ],
)
async def test_a_body_breaking_a_constraint_is_a_constraint_violation(
    client: httpx.AsyncClient, name: str, route: str, body: bytes, message: str
) -> None:
    """What binds but breaks a constraint of its class (@PositiveOrZero, @NotEmpty, the resource's
    @NotNull) is rest-utils' ConstraintViolationExceptionMapper's 422 with error code 422, the
    violation as ConstraintViolations.format writes it: path, rule, the value it was."""
    base = await consumer(client, f"g-{name}")
    r = await client.post(f"{base}{route}", content=body, headers={"Content-Type": V2})
    said = refused(r, 422, 422)
    assert said.startswith(message), said


async def test_the_names_confluents_classes_have_are_taken(client: httpx.AsyncClient, name: str) -> None:
    """CreateConsumerInstanceRequest's "id" names the instance over "name"
    (KafkaConsumerManager.getConsumerInstanceName), its @JsonAlias requestWaitMs and
    responseMinBytes are its configs; an offset's "metadata" is taken."""
    await create_topic(client, name, 1)
    body = {"id": "by-id", "name": "by-name", "requestWaitMs": 100, "responseMinBytes": 1, "format": "json"}
    r = await client.post(f"/consumers/g-{name}", json=body, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text
    assert r.json()["instance_id"] == "by-id"
    base = r.json()["base_uri"]
    r = await client.post(
        f"{base}/assignments",
        json={"partitions": [{"topic": name, "partition": 0}]},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 204, r.text
    offsets = [{"topic": name, "partition": 0, "offset": 0, "metadata": "m"}]
    r = await client.post(f"{base}/positions", json={"offsets": offsets}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    r = await client.post(f"{base}/offsets", json={"offsets": offsets}, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text


async def test_consumer_bodies_bind_as_jackson_binds_them(client: httpx.AsyncClient, name: str) -> None:
    """Jackson takes a number or a boolean where a string goes as its text, and a null as a field
    left out; fetch.min.bytes -1 is Confluent's "no minimum"."""
    await create_topic(client, name, 1)
    body = {"name": 12345, "format": None, "auto.commit.enable": False, "fetch.min.bytes": -1}
    r = await client.post(f"/consumers/g-{name}", json=body, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text
    assert r.json()["instance_id"] == "12345"
    base = r.json()["base_uri"]
    r = await subscribe_with(client, base, {"topics": [name], "topic_pattern": None})
    assert r.status_code == 204, r.text
    assert await subscription(client, base) == {"topics": [name]}
    other = await consumer(client, f"h-{name}")
    r = await client.post(
        f"{other}/assignments",
        json={"partitions": [{"topic": name, "partition": "0"}]},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 204, r.text
    r = await client.get(f"{other}/assignments")
    assert r.json() == {"partitions": [{"topic": name, "partition": 0}]}, r.text


# --- Content negotiation: the Accept header on every v2 route ---------------------------------


async def v2_routes(client: httpx.AsyncClient, name: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    """(method, path, JSON body) of a sample of v2 routes, one per resource."""
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}")
    assert (await subscribe_with(client, base, {"topics": [name]})).status_code == 204
    return [
        ("GET", "/", None),
        ("GET", "/brokers", None),
        ("GET", "/topics", None),
        ("GET", f"/topics/{name}", None),
        ("GET", f"/topics/{name}/partitions", None),
        ("GET", f"/topics/{name}/partitions/0", None),
        ("GET", f"/topics/{name}/partitions/0/offsets", None),
        ("POST", f"/topics/{name}", {"records": [{"value": b64("x")}]}),
        ("POST", f"/topics/{name}/partitions/0", {"records": [{"value": b64("x")}]}),
        ("GET", f"{base}/subscription", None),
        ("GET", f"{base}/assignments", None),
        ("POST", f"{base}/positions/beginning", {"partitions": [{"topic": name, "partition": 0}]}),
        ("POST", f"{base}/offsets", {}),
    ]


@pytest.mark.parametrize(
    "accept",
    ["application/octet-stream", "text/plain", "application/xml, text/html", "text/*; q=0"],
)
async def test_routes_refuse_an_accept_they_cannot_answer(
    client: httpx.AsyncClient, name: str, accept: str
) -> None:
    """Jersey matches Accept against a resource's @Produces (application/vnd.kafka.v2+json) and
    answers 406; Confluent's sends that 406 without a body (a JAX-RS bug its RootResourceTest
    marks), the gateway sends one in the v2 error shape (docs/api.md lists the difference). The
    root answers an Accept naming text/html with a page for browsers (the difference too)."""
    routes = await v2_routes(client, name)
    for method, path, body in routes:
        content = None if body is None else json.dumps(body).encode()
        headers = {"Accept": accept, "Content-Type": BINARY if path.startswith("/topics/") else V2}
        r = await client.request(method, path, content=content, headers=headers)
        if path == "/" and "text/html" in accept:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), r.text
            continue
        assert refused(r, 406, 406).startswith("HTTP 406 Not Acceptable"), (method, path)
    assert await end_offset(client, name) == 0  # no produce was served


@pytest.mark.parametrize(
    "accept",
    [
        None,
        V2,
        "application/json",
        "*/*",
        "application/*",
        "text/html, application/vnd.kafka.v2+json; q=0.5",
        "application/vnd.kafka.v2+json, application/vnd.kafka+json, application/json",
        # Jersey selects by compatibility and orders by q: an item weighted 0 is served, last
        "application/json; q=0",
        "text/html, */*; q=0",
    ],
)
async def test_routes_answer_the_v2_types_and_wildcards(
    client: httpx.AsyncClient, name: str, accept: str | None
) -> None:
    routes = await v2_routes(client, name)
    for method, path, body in routes:
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": BINARY if path.startswith("/topics/") else V2}
        if accept is not None:
            headers["Accept"] = accept
        r = await client.request(method, path, content=content, headers=headers)
        assert r.status_code in (200, 204), (method, path, r.text)


async def test_consumer_routes_answer_the_embedded_formats_types_too(
    client: httpx.AsyncClient, name: str
) -> None:
    """ConsumersResource produces every embedded format's type on its control routes; the topics,
    partitions, brokers and root resources and produce only application/vnd.kafka.v2+json."""
    routes = await v2_routes(client, name)
    for method, path, body in routes:
        content = None if body is None else json.dumps(body).encode()
        headers = {"Accept": AVRO, "Content-Type": BINARY if path.startswith("/topics/") else V2}
        r = await client.request(method, path, content=content, headers=headers)
        if "/consumers/" in path:
            assert r.status_code in (200, 204), (method, path, r.text)
        else:
            refused(r, 406, 406)


async def test_content_type_is_checked_before_accept(client: httpx.AsyncClient, name: str) -> None:
    """Jersey's MethodSelectingRouter refuses a Content-Type its resource does not consume (415)
    before it reads Accept (406, or 400 when it cannot read it), on every method: a request wrong
    in both is 415. The brokers resource consumes anything (an empty @Consumes): there, Accept."""
    routes = await v2_routes(client, name)
    for accept in ["text/html", "application/json; q=abc"]:
        for method, path, body in routes:
            content = None if body is None else json.dumps(body).encode()
            headers = {"Accept": accept, "Content-Type": "text/plain"}
            r = await client.request(method, path, content=content, headers=headers)
            if path == "/brokers":
                assert r.status_code == (406 if accept == "text/html" else 400), (method, path, r.text)
            else:
                assert r.status_code == 415, (method, path, accept, r.text)
                assert r.json()["message"].startswith("HTTP 415 Unsupported Media Type: "), r.text
    r = await client.get("/topics", headers={"Content-Type": "application/xml"})
    assert r.status_code == 415, r.text
    r = await client.get("/brokers", headers={"Content-Type": "application/xml"})
    assert r.status_code == 200, r.text
    assert await end_offset(client, name) == 0  # no produce was served


async def test_a_poll_checks_content_type_before_accept(client: httpx.AsyncClient, name: str) -> None:
    """ConsumersResource's @Consumes holds for its record reads (GETs) too: a Content-Type it does
    not consume is 415 before Accept is read (406, or 400 when Jersey cannot read it), and an
    event stream is no exception."""
    await create_topic(client, name)
    base = await consumer(client, f"{name}-g", fmt="binary")
    for accept in [BINARY, "text/html", "application/json; q=abc", "text/event-stream"]:
        r = await client.get(
            f"{base}/records?timeout=0", headers={"Accept": accept, "Content-Type": "text/plain"}
        )
        assert refused(r, 415, 415) == (
            "HTTP 415 Unsupported Media Type: this route reads application/vnd.kafka.v2+json or "
            "application/json, not 'text/plain'."
        ), accept
    r = await client.get(f"{base}/records?timeout=0", headers={"Accept": BINARY, "Content-Type": V2})
    assert r.status_code == 200, r.text


async def test_the_document_lists_the_400_of_an_unreadable_accept(
    client: httpx.AsyncClient, name: str
) -> None:
    """Every operation that reads Accept (it lists a 406) lists the 400 of one Jersey cannot read,
    which each route of the sample answers; the root lists the 415 it now answers too."""
    for method, path, body in await v2_routes(client, name):
        content = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json; q=abc", "Content-Type": V2}
        if path.startswith("/topics/"):
            headers["Content-Type"] = BINARY
        r = await client.request(method, path, content=content, headers=headers)
        assert refused(r, 400, 400).startswith("HTTP 400 Bad Request: the Accept header"), (method, path)
    document = (await client.get("/openapi.json")).json()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if "406" in operation["responses"]:
                assert "Accept" in operation["responses"]["400"]["description"], (method, path)
    assert "415" in document["paths"]["/"]["get"]["responses"]


# --- Paths: a trailing slash is served, not redirected ----------------------------------------


async def test_trailing_slashes_are_served_directly(client: httpx.AsyncClient, name: str) -> None:
    """Jersey serves ``/topics/`` as ``/topics``; httpx, like many clients, does not follow a 307."""
    assert client.follow_redirects is False
    routes = await v2_routes(client, name)
    for method, path, body in routes:
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": BINARY if path.startswith("/topics/") else V2}
        slashed = path if path.endswith("/") else path + "/"
        r = await client.request(method, slashed, content=content, headers=headers)
        assert r.status_code in (200, 204), (method, slashed, r.status_code, r.text)
        assert "location" not in r.headers, (method, slashed)
    r = await client.get(f"/topics/{name}/")
    assert r.json()["name"] == name


# --- v3 bodies and errors (TopicsResource, AclsResource) --------------------------------------


def refused_v3(r: httpx.Response, status: int, code: int) -> str:
    """``refused``, typed as v3's resources type everything they answer: application/json."""
    assert r.headers["content-type"] == "application/json", r.headers
    return refused(r, status, code)


async def test_v3_topic_bodies_are_bound_as_confluents_v3_binds_them(
    client: httpx.AsyncClient, name: str
) -> None:
    """CreateTopicRequest and PartitionsCountRequest under rest-utils' Jackson: text that is not
    JSON, a value of the wrong type and a required field left out (their AutoValue builders
    throw) are 400 with error code 400; a name the class does not have 422/422 ``Unrecognized
    field``; a partition count below 1 a constraint, 422/422; its other names are taken."""
    cid = await cluster_id(client)
    url = f"/v3/clusters/{cid}/topics"
    for bad in [
        b"{not json",
        b"[]",
        {"topic_name": name, "partitions_count": "many"},
        {"topic_name": name, "validate_only": "perhaps"},
        {"topic_name": name, "configs": "retention.ms=1"},
        {"partitions_count": 1},
        {"topic_name": name, "configs": [{"value": "1"}]},
    ]:
        refused_v3(await post(client, url, "application/json", bad), 400, 400)
    message = refused_v3(await post(client, url, "application/json", {"topic_name": name, "x": 1}), 422, 422)
    assert message == "Unrecognized field: x"
    body = {"topic_name": name, "partitions_count": 0}
    assert "partitions_count" in refused_v3(await post(client, url, "application/json", body), 422, 422)
    body = {"topic_name": name, "validate_only": True}
    refused_v3(await post(client, url, "application/json", body), 422, 42206)
    assert (await client.get(f"/topics/{name}")).status_code == 404  # nothing was created
    body = {"topic_name": name, "partitions_count": 1, "validate_only": False, "replicas_assignments": {}}
    r = await post(client, url, "application/json", {**body, "configs": [{"name": "retention.ms"}]})
    assert r.status_code == 422 and r.json()["error_code"] != 400, r.text  # bound: the config needs a value
    r = await post(client, url, "application/json", body)
    assert r.status_code == 201, r.text
    for bad, status in [({"partitions_count": "x"}, 400), ({}, 400), ({"partitions_count": 2, "y": 0}, 422)]:
        r = await client.patch(f"{url}/{name}", json=bad)
        refused_v3(r, status, status)
    refused_v3(await client.get("/v3/clusters/nope/topics"), 404, 404)
    refused_v3(await client.get(f"{url}/{name}-not"), 404, 40401)
    # rest-utils' default ObjectMapper coerces a JSON string holding an integer into an Integer
    # field (Jackson's ALLOW_COERCION_OF_SCALARS), so Confluent takes "3": the gateway takes it too
    r = await post(client, url, "application/json", {"topic_name": f"{name}-text", "partitions_count": "3"})
    assert r.status_code == 201 and r.json()["partitions_count"] == 3, r.text
    r = await client.patch(f"{url}/{name}-text", json={"partitions_count": "4"})
    assert r.status_code == 200 and r.json()["partitions_count"] == 4, r.text
