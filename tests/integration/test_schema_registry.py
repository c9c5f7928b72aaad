"""Confluent's schema-registry API served by a real gateway: behaviour, error codes, storage, replicas.

Each test starts its own gateway (``gateway`` fixture: embedded log and coordinator) and talks
to ``/schema-registry`` as a registry client would. The replicas tests run two gateways on the
session's Apache Kafka broker (sharing a registry topic of their own) and ZooKeeper; the interop
test drives confluent-kafka's own ``SchemaRegistryClient`` against the gateway.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import AsyncSchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry import Schema as ConfluentSchema

from deploy.local.kafka_broker import KafkaBroker
from deploy.local.zookeeper_server import ZooKeeperServer
from service.core.models import NewRecord, TopicPartition
from service.core.ports import Log
from service.core.schemas.model import Schema, SchemaType
from service.core.schemas.records import schema_key, schema_value
from service.server.backends import build_ports
from service.settings import Settings
from tests.conftest import ZOOKEEPER_TEST_SETTINGS, RunningGateway, kafka_settings, start_gateway

SR = "/schema-registry"
V1 = "application/vnd.schemaregistry.v1+json"


def record(name: str, *fields: dict[str, Any]) -> str:
    """An Avro record's schema as the registry stores and answers it (Avro's compact print)."""
    return json.dumps({"type": "record", "name": name, "fields": list(fields)}, separators=(",", ":"))


def field(name: str, kind: Any = "string", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


V_A = record("Order", field("id"))
V_AB = record("Order", field("id"), field("qty", "int", default=0))  # adds a field with a default
V_ABC = record("Order", field("id"), field("qty", "int"))  # ...and the default taken away
V_C = record("Order", field("id"), field("note"))  # adds a field without a default
V_NONE = record("Order", field("qty", "int", default=0))  # drops a field that had no default


class Registry:
    """A registry client in a few lines: each call returns the response, checked by the test."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def register(self, subject: str, schema: str, **body: Any) -> httpx.Response:
        return await self.client.post(f"{SR}/subjects/{subject}/versions", json={"schema": schema, **body})

    async def id_of(self, subject: str, schema: str, **body: Any) -> int:
        r = await self.register(subject, schema, **body)
        assert r.status_code == 200, r.text
        return int(r.json()["id"])

    async def get(self, path: str, **params: Any) -> httpx.Response:
        return await self.client.get(SR + path, params=params)

    async def post(self, path: str, body: Any, **params: Any) -> httpx.Response:
        return await self.client.post(SR + path, json=body, params=params)

    async def put(self, path: str, body: Any) -> httpx.Response:
        return await self.client.put(SR + path, json=body)

    async def delete(self, path: str, **params: Any) -> httpx.Response:
        return await self.client.delete(SR + path, params=params)


def error(r: httpx.Response, status: int, code: int) -> str:
    assert (r.status_code, r.json()["error_code"]) == (status, code), r.text
    assert r.headers["content-type"] == V1
    return str(r.json()["message"])


@pytest.fixture
def registry(gateway: RunningGateway) -> Registry:
    return Registry(gateway.client)


# --- registering and reading ---------------------------------------------------------------


async def test_register_then_read_it_back_every_way(registry: Registry) -> None:
    assert (await registry.get("/subjects")).json() == []
    r = await registry.register("orders-value", V_A)
    assert (r.status_code, r.json(), r.headers["content-type"]) == (200, {"id": 1}, V1)
    assert await registry.id_of("orders-value", V_A) == 1  # again: the same id, no new version
    assert await registry.id_of("orders-value", V_AB) == 2
    assert (await registry.get("/subjects")).json() == ["orders-value"]
    assert (await registry.get("/subjects/orders-value/versions")).json() == [1, 2]
    expected = {"subject": "orders-value", "version": 2, "id": 2, "schema": V_AB}
    assert (await registry.get("/subjects/orders-value/versions/2")).json() == expected
    assert (await registry.get("/subjects/orders-value/versions/latest")).json() == expected
    assert (await registry.get("/subjects/orders-value/versions/-1")).json() == expected
    assert (await registry.get("/subjects/orders-value/versions/1/schema")).text == V_A
    assert (await registry.get("/schemas/ids/1")).json() == {"schema": V_A}
    assert (await registry.get("/schemas/ids/1", subject="orders-value")).json() == {
        "subject": "orders-value",
        "version": 1,
        "schema": V_A,
    }
    assert (await registry.get("/schemas/ids/2/schema")).text == V_AB
    assert (await registry.get("/schemas/ids/2/versions")).json() == [
        {"subject": "orders-value", "version": 2}
    ]
    assert (await registry.get("/schemas/ids/2/subjects")).json() == ["orders-value"]
    assert sorted((await registry.get("/schemas/types")).json()) == ["AVRO", "JSON", "PROTOBUF"]
    assert (await registry.client.get(f"{SR}/")).json() == {}
    # a lookup finds the version the schema is
    r = await registry.post("/subjects/orders-value", {"schema": V_A})
    assert r.json() == {"subject": "orders-value", "version": 1, "id": 1, "schema": V_A}
    error(await registry.post("/subjects/orders-value", {"schema": V_C}), 404, 40403)
    error(await registry.post("/subjects/nope", {"schema": V_A}), 404, 40401)
    # what is not there
    error(await registry.get("/schemas/ids/99"), 404, 40403)
    error(await registry.get("/subjects/nope/versions"), 404, 40401)
    error(await registry.get("/subjects/nope/versions/1"), 404, 40401)
    error(await registry.get("/subjects/orders-value/versions/3"), 404, 40402)


async def test_one_schema_has_one_id_in_every_subject_whatever_its_spelling(registry: Registry) -> None:
    first = await registry.id_of("a-value", V_A)
    spelled_otherwise = json.dumps(json.loads(V_A), indent=4)
    assert await registry.id_of("b-value", spelled_otherwise) == first
    assert await registry.id_of("a-value", spelled_otherwise) == first
    assert (await registry.get("/subjects/a-value/versions")).json() == [1]
    assert (await registry.get("/schemas/ids/1/subjects")).json() == ["a-value", "b-value"]
    # the same text as JSON Schema is another schema
    json_schema = '{"type": "string"}'
    assert await registry.id_of("c-value", json_schema, schemaType="JSON") == first + 1
    r = await registry.get("/subjects/c-value/versions/1")
    assert r.json()["schemaType"] == "JSON"
    assert await registry.id_of("d-value", '"string"') == first + 2  # Avro
    # another type in the same subject is incompatible with what is there
    r = await registry.register("d-value", '{"type": "string"}', schemaType="JSON")
    assert "different schema type" in error(r, 409, 409)
    # a big schema (parsed off the event loop) is one too
    big = record("Big", *(field(f"field_{i}", "long", default=i) for i in range(2000)))
    assert len(big) > 64 * 1024
    assert await registry.id_of("big-value", big) == await registry.id_of("big2-value", big) == first + 3


@pytest.mark.parametrize(
    ("accept", "answered"),
    [
        (None, V1),
        ("*/*", V1),
        ("application/json", "application/json"),
        ("application/vnd.schemaregistry+json", "application/vnd.schemaregistry+json"),
        ("application/vnd.schemaregistry.v1+json, application/json; q=0.9", V1),
        ("application/json, application/vnd.schemaregistry+json; q=0.5", "application/json"),
    ],
)
async def test_answers_in_the_media_type_asked_for(
    registry: Registry, accept: str | None, answered: str
) -> None:
    headers = {"Accept": accept} if accept else {}
    r = await registry.client.get(f"{SR}/subjects", headers=headers)
    assert (r.status_code, r.headers["content-type"]) == (200, answered)


async def test_bad_requests_get_confluent_codes(registry: Registry) -> None:
    c = registry.client
    error(await c.get(f"{SR}/subjects", headers={"Accept": "text/html"}), 406, 406)
    url = f"{SR}/subjects/s-value/versions"
    error(
        await c.post(url, content=json.dumps({"schema": V_A}), headers={"Content-Type": "text/plain"}),
        415,
        415,
    )
    for content_type in (
        V1,
        "application/vnd.schemaregistry+json",
        "application/json",
        "application/octet-stream",
    ):
        r = await c.post(url, content=json.dumps({"schema": V_A}), headers={"Content-Type": content_type})
        assert r.status_code == 200, (content_type, r.text)
    error(await c.post(url, content=b"{not json", headers={"Content-Type": V1}), 400, 400)
    error(await c.post(url, json=[1]), 400, 400)
    error(await c.post(url, json={"schema": 5}), 400, 400)
    error(await c.post(url, json={}), 422, 42201)
    error(await c.post(url, json={"schema": "  "}), 422, 42201)
    assert "Invalid schema" in error(await c.post(url, json={"schema": "{oops"}), 422, 42201)
    error(await c.post(url, json={"schema": '{"type": "nothing"}'}), 422, 42201)
    error(await c.post(url, json={"schema": V_A, "schemaType": "XML"}), 422, 42201)
    error(
        await c.post(url, json={"schema": V_A, "references": [{"name": "x", "subject": "y", "version": 1}]}),
        422,
        42201,
    )
    error(await c.post(url, json={"schema": V_A, "id": 7}), 422, 42205)
    error(await c.post(url, json={"schema": V_AB, "version": 5}), 422, 42201)
    for bad in ("0", "-2", "abc", "2147483648", "1.5"):
        error(await registry.get(f"/subjects/s-value/versions/{bad}"), 422, 42202)
        error(await registry.delete(f"/subjects/s-value/versions/{bad}"), 422, 42202)
    error(await c.post(f"{SR}/subjects/a%01b/versions", json={"schema": V_A}), 422, 42208)
    error(await c.post(f"{SR}/subjects/__GLOBAL/versions", json={"schema": V_A}), 422, 42208)
    error(await registry.get("/schemas/ids/abc"), 404, 404)
    error(await registry.get("/nowhere"), 404, 404)
    error(await registry.get("/subjects", deleted="maybe"), 400, 400)


# --- compatibility -------------------------------------------------------------------------

CASES = [  # level, the schema that follows V_A, registered?
    ("BACKWARD", V_AB, True),
    ("BACKWARD", V_C, False),
    ("BACKWARD", V_NONE, True),
    ("FORWARD", V_C, True),
    ("FORWARD", V_NONE, False),
    ("FULL", V_AB, True),
    ("FULL", V_C, False),
    ("FULL", V_NONE, False),
    ("NONE", V_C, True),
    ("NONE", '"string"', True),
]


@pytest.mark.parametrize(("level", "following", "allowed"), CASES)
async def test_compatibility_per_level(registry: Registry, level: str, following: str, allowed: bool) -> None:
    r = await registry.put("/config/s-value", {"compatibility": level.lower()})
    assert r.json() == {"compatibility": level}
    await registry.id_of("s-value", V_A)
    check = await registry.post(
        "/compatibility/subjects/s-value/versions/latest", {"schema": following}, verbose="true"
    )
    assert check.json()["is_compatible"] is allowed
    assert bool(check.json()["messages"]) is not allowed
    r = await registry.register("s-value", following)
    if allowed:
        assert r.status_code == 200, r.text
    else:
        assert "incompatible" in error(r, 409, 409)
        assert (await registry.get("/subjects/s-value/versions")).json() == [1]


async def test_transitive_levels_compare_with_every_version(registry: Registry) -> None:
    for subject, level in (("plain", "BACKWARD"), ("transitive", "BACKWARD_TRANSITIVE")):
        await registry.put(f"/config/{subject}", {"compatibility": level})
        await registry.id_of(subject, V_A)
        await registry.id_of(subject, V_AB)
    # V_ABC reads what V_AB wrote, not what V_A wrote (qty has no default)
    assert (await registry.register("plain", V_ABC)).status_code == 200
    error(await registry.register("transitive", V_ABC), 409, 409)
    check = await registry.post("/compatibility/subjects/transitive/versions", {"schema": V_ABC})
    assert check.json() == {"is_compatible": False}
    check = await registry.post("/compatibility/subjects/transitive/versions/2", {"schema": V_ABC})
    assert check.json() == {"is_compatible": True}  # against that one version alone
    error(await registry.post("/compatibility/subjects/transitive/versions/7", {"schema": V_ABC}), 404, 40402)
    # nothing to compare with: compatible
    assert (await registry.post("/compatibility/subjects/new/versions/latest", {"schema": V_C})).json() == {
        "is_compatible": True
    }
    bad = await registry.post("/compatibility/subjects/plain/versions", {"schema": "{oops"}, verbose="true")
    assert bad.json()["is_compatible"] is False and "Invalid schema" in bad.json()["messages"][0]
    error(await registry.post("/compatibility/subjects/plain/versions", {"schema": "{oops"}), 422, 42201)


async def test_config(registry: Registry) -> None:
    assert (await registry.get("/config")).json() == {"compatibilityLevel": "BACKWARD"}
    assert (await registry.put("/config", {"compatibility": "full"})).json() == {"compatibility": "FULL"}
    assert (await registry.get("/config")).json() == {"compatibilityLevel": "FULL"}
    error(await registry.get("/config/s"), 404, 40408)
    assert (await registry.get("/config/s", defaultToGlobal="true")).json() == {"compatibilityLevel": "FULL"}
    await registry.put("/config/s", {"compatibility": "NONE"})
    assert (await registry.get("/config/s")).json() == {"compatibilityLevel": "NONE"}
    assert (await registry.delete("/config/s")).json() == {"compatibilityLevel": "NONE"}
    error(await registry.delete("/config/s"), 404, 40401)
    error(await registry.put("/config", {"compatibility": "SOMETIMES"}), 422, 42203)
    error(await registry.put("/config", {}), 422, 42203)
    assert (await registry.delete("/config")).json() == {"compatibilityLevel": "FULL"}
    assert (await registry.get("/config")).json() == {"compatibilityLevel": "BACKWARD"}


# --- deletes -------------------------------------------------------------------------------


async def test_soft_then_hard_delete(registry: Registry) -> None:
    assert await registry.id_of("s", V_A) == 1
    assert await registry.id_of("s", V_AB) == 2
    assert (await registry.delete("/subjects/s/versions/1")).json() == 1
    assert (await registry.get("/subjects/s/versions")).json() == [2]
    assert (await registry.get("/subjects/s/versions", deleted="true")).json() == [1, 2]
    assert (await registry.get("/subjects/s/versions", deletedOnly="true")).json() == [1]
    error(await registry.get("/subjects/s/versions/1"), 404, 40402)
    assert (await registry.get("/subjects/s/versions/1", deleted="true")).json()["id"] == 1
    assert (await registry.get("/schemas/ids/1")).json() == {"schema": V_A}  # still readable by id
    error(await registry.delete("/subjects/s/versions/1"), 404, 40406)
    error(await registry.delete("/subjects/s/versions/2", permanent="true"), 404, 40407)
    error(await registry.delete("/subjects/s", permanent="true"), 404, 40405)
    assert (await registry.delete("/subjects/s")).json() == [2]
    assert (await registry.get("/subjects")).json() == []
    assert (await registry.get("/subjects", deleted="true")).json() == ["s"]
    error(await registry.get("/subjects/s/versions/latest"), 404, 40401)
    error(await registry.delete("/subjects/s"), 404, 40404)
    # registered again after a soft delete: a new version, the same id
    assert await registry.id_of("s", V_A) == 1
    assert (await registry.get("/subjects/s/versions")).json() == [3]
    assert (await registry.delete("/subjects/s")).json() == [3]
    assert (await registry.delete("/subjects/s", permanent="true")).json() == [1, 2, 3]
    error(await registry.get("/subjects/s/versions", deleted="true"), 404, 40401)
    error(await registry.get("/schemas/ids/1"), 404, 40403)
    error(await registry.delete("/subjects/s"), 404, 40401)
    # ids are never handed out again
    assert await registry.id_of("s", V_C) == 3


# --- references ----------------------------------------------------------------------------

CUSTOMER = json.dumps(
    {
        "type": "record",
        "name": "Customer",
        "namespace": "shop",
        "fields": [{"name": "name", "type": "string"}],
    }
)
ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "buyer", "type": "shop.Customer"}],
    }
)
PROTO_DEP = 'syntax = "proto3";\npackage shop;\nmessage Money { int64 cents = 1; }\n'
PROTO = 'syntax = "proto3";\npackage shop;\nimport "money.proto";\nmessage Price { shop.Money amount = 1; }\n'
# as Confluent's registry prints a parsed .proto
PROTO_AS_STORED = 'syntax = "proto3";\npackage shop;\n\nimport "money.proto";\n\n'
PROTO_AS_STORED += "message Price {\n  shop.Money amount = 1;\n}\n"


async def test_references(registry: Registry) -> None:
    customer = await registry.id_of("customer", CUSTOMER)
    ref = {"name": "shop.Customer", "subject": "customer", "version": 1}
    order = await registry.id_of("order-value", ORDER, references=[ref])
    r = await registry.get("/subjects/order-value/versions/1")
    assert r.json()["references"] == [ref] and "schemaType" not in r.json()
    assert (await registry.get(f"/schemas/ids/{order}")).json()["references"] == [ref]
    assert (await registry.get("/subjects/customer/versions/1/referencedby")).json() == [order]
    assert (await registry.get("/subjects/customer/versions/latest/referencedby")).json() == [order]
    # "latest" in a reference is stored as the version it was
    latest = {"name": "shop.Customer", "subject": "customer", "version": -1}
    assert await registry.id_of("order2-value", ORDER, references=[latest]) == order
    # what is referenced cannot be deleted
    error(await registry.delete("/subjects/customer"), 422, 42206)
    error(await registry.delete("/subjects/customer/versions/1"), 422, 42206)
    # Protobuf imports
    await registry.id_of("money", PROTO_DEP, schemaType="PROTOBUF")
    price = await registry.id_of(
        "price-value",
        PROTO,
        schemaType="PROTOBUF",
        references=[{"name": "money.proto", "subject": "money", "version": 1}],
    )
    assert (await registry.get(f"/schemas/ids/{price}/schema")).text == PROTO_AS_STORED
    assert (await registry.get("/subjects/money/versions/1/referencedby")).json() == [price]
    # once the referrers are gone (soft), the referenced may go too
    for subject in ("order-value", "order2-value"):
        await registry.delete(f"/subjects/{subject}")
    assert (await registry.get("/subjects/customer/versions/1/referencedby")).json() == []
    assert (await registry.get("/subjects/customer/versions/1/referencedby", deleted="true")).json() == [
        order
    ]
    assert (await registry.delete("/subjects/customer")).json() == [1]
    error(await registry.delete("/subjects/customer", permanent="true"), 422, 42206)
    assert customer == 1


# --- modes ---------------------------------------------------------------------------------


async def test_read_only_mode_refuses_writes(registry: Registry) -> None:
    await registry.id_of("s", V_A)
    assert (await registry.get("/mode")).json() == {"mode": "READWRITE"}
    assert (await registry.put("/mode", {"mode": "readonly"})).json() == {"mode": "READONLY"}
    assert (await registry.get("/mode")).json() == {"mode": "READONLY"}
    error(await registry.register("s", V_AB), 422, 42205)
    error(await registry.register("t", V_AB), 422, 42205)
    error(await registry.delete("/subjects/s"), 422, 42205)
    error(await registry.delete("/subjects/s/versions/1"), 422, 42205)
    error(await registry.put("/config/s", {"compatibility": "NONE"}), 422, 42205)
    # reads, lookups and checks go on
    assert (await registry.post("/subjects/s", {"schema": V_A})).json()["id"] == 1
    assert (await registry.post("/compatibility/subjects/s/versions", {"schema": V_AB})).json()[
        "is_compatible"
    ]
    assert (await registry.put("/mode", {"mode": "READWRITE"})).status_code == 200
    assert await registry.id_of("s", V_AB) == 2
    # a subject's own mode
    error(await registry.get("/mode/s"), 404, 40409)
    assert (await registry.get("/mode/s", defaultToGlobal="true")).json() == {"mode": "READWRITE"}
    assert (await registry.put("/mode/s", {"mode": "READONLY"})).json() == {"mode": "READONLY"}
    error(await registry.register("s", V_NONE), 422, 42205)
    assert await registry.id_of("t", V_NONE) == 3
    assert (await registry.delete("/mode/s")).json() == {"mode": "READONLY"}
    error(await registry.delete("/mode/s"), 404, 40401)
    assert await registry.id_of("s", V_NONE) == 3
    for bad in ("SLEEPY", "IMPORT", None):
        error(await registry.put("/mode", {"mode": bad}), 422, 42204)


# --- storage -------------------------------------------------------------------------------


async def test_records_are_confluents_and_survive_a_restart(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path / "data")
    try:
        registry = Registry(gw.client)
        ids = [await registry.id_of("a-value", s) for s in (V_A, V_AB)]
        ids.append(await registry.id_of("b-value", V_C, schemaType="AVRO"))
        await registry.delete("/subjects/a-value/versions/1")
        await registry.put("/config/b-value", {"compatibility": "NONE"})
        await registry.put("/mode/b-value", {"mode": "READONLY"})
        r = await gw.client.get("/topics/_schemas/partitions/0/records", params={"offset": 0})
        stored = [
            (base64.b64decode(x["key"]), base64.b64decode(x["value"]) if x["value"] else None)
            for x in r.json()["records"]
        ]
        assert stored[0] == (
            b'{"keytype":"SCHEMA","subject":"a-value","version":1,"magic":1}',
            json.dumps(
                {"subject": "a-value", "version": 1, "id": 1, "schema": V_A, "deleted": False},
                separators=(",", ":"),
            ).encode(),
        )
        assert json.loads(stored[3][1] or b"") == {
            "subject": "a-value",
            "version": 1,
            "id": 1,
            "schema": V_A,
            "deleted": True,
        }
        assert stored[4] == (
            b'{"keytype":"CONFIG","subject":"b-value","magic":0}',
            b'{"subject":"b-value","compatibilityLevel":"NONE"}',
        )
        assert stored[5] == (
            b'{"keytype":"MODE","subject":"b-value","magic":0}',
            b'{"subject":"b-value","mode":"READONLY"}',
        )
        topic = (await gw.client.get("/topics/_schemas")).json()
        assert len(topic["partitions"]) == 1 and topic["configs"]["retention.ms"] == "-1"
    finally:
        await gw.client.aclose()
        await gw.stop()
    again = await start_gateway(tmp_path / "data")
    try:
        registry = Registry(again.client)
        assert (await registry.get("/subjects/a-value/versions")).json() == [2]
        assert (await registry.get("/subjects/a-value/versions", deleted="true")).json() == [1, 2]
        assert [
            (await registry.get(f"/subjects/{s}/versions/latest")).json()["id"]
            for s in ("a-value", "b-value")
        ] == ids[1:]
        assert (await registry.get("/config/b-value")).json() == {"compatibilityLevel": "NONE"}
        assert (await registry.get("/mode/b-value")).json() == {"mode": "READONLY"}
        assert await registry.id_of("c-value", V_A) == 1  # the soft-deleted version's schema keeps its id
        assert await registry.id_of("c-value", V_NONE, schemaType="AVRO") == 4
    finally:
        await again.client.aclose()
        await again.stop()


async def test_limits(tmp_path: Path) -> None:
    gw = await start_gateway(
        tmp_path / "data",
        schema_registry_max_schema_bytes=1024,
        schema_registry_max_versions=2,
        schema_registry_max_schemas=3,
        schema_registry_max_subjects=2,
    )
    try:
        registry = Registry(gw.client)
        await registry.put("/config", {"compatibility": "NONE"})
        big = record("Big", *(field(f"f{i}") for i in range(40)))
        assert "1024" in error(await registry.register("s", big), 413, 42201)
        assert [await registry.id_of("s", V_A), await registry.id_of("s", V_AB)] == [1, 2]
        assert "schema_registry_max_versions" in error(await registry.register("s", V_NONE), 422, 42205)
        assert await registry.id_of("t", V_C) == 3
        assert "schema_registry_max_subjects" in error(await registry.register("u", V_A), 422, 42205)
        await registry.delete("/subjects/t")
        await registry.delete("/subjects/t", permanent="true")  # id 3 is forgotten
        assert await registry.id_of("u", V_C) == 4
        assert "schema_registry_max_schemas" in error(await registry.register("u", '"string"'), 422, 42205)
        assert await registry.id_of("u", V_A) == 1  # a schema the registry holds adds nothing
    finally:
        await gw.client.aclose()
        await gw.stop()


# --- a registry client of Confluent's ------------------------------------------------------


async def test_confluent_kafka_schema_registry_client(gateway: RunningGateway) -> None:
    async with AsyncSchemaRegistryClient({"url": gateway.url + SR}) as client:
        schema_id = await client.register_schema("pay-value", ConfluentSchema(V_A, "AVRO"))
        assert schema_id == 1
        assert (await client.get_schema(schema_id)).schema_str == V_A
        latest = await client.get_latest_version("pay-value")
        assert (latest.schema_id, latest.version, latest.schema.schema_str) == (1, 1, V_A)
        assert await client.test_compatibility("pay-value", ConfluentSchema(V_AB, "AVRO"))
        assert not await client.test_compatibility("pay-value", ConfluentSchema(V_C, "AVRO"))
        assert await client.test_compatibility_all_versions("pay-value", ConfluentSchema(V_AB, "AVRO"))
        found = await client.lookup_schema("pay-value", ConfluentSchema(V_A, "AVRO"))
        assert (found.schema_id, found.version) == (1, 1)
        json_id = await client.register_schema("pay-key", ConfluentSchema('{"type": "string"}', "JSON"))
        assert (await client.get_schema(json_id)).schema_type == "JSON"
        assert await client.get_subjects() == ["pay-key", "pay-value"]
        assert await client.get_versions("pay-value") == [1]
        assert await client.get_compatibility() == "BACKWARD"
        assert await client.delete_subject("pay-key") == [1]
        with pytest.raises(SchemaRegistryError) as failed:
            await client.register_schema("pay-value", ConfluentSchema(V_C, "AVRO"))
        assert (failed.value.http_status_code, failed.value.error_code) == (409, 409)


# --- two replicas on Kafka and ZooKeeper ---------------------------------------------------


@pytest.fixture
async def replicas(
    tmp_path: Path, kafka_broker: KafkaBroker, zookeeper: ZooKeeperServer
) -> AsyncIterator[list[RunningGateway]]:
    chroot = f"{zookeeper.url}/t-{uuid.uuid4().hex[:12]}"
    shared = kafka_settings(kafka_broker)  # one registry topic for both replicas
    async with AsyncExitStack() as stack:
        running = []
        for node in ("a", "b"):
            gw = await start_gateway(
                tmp_path / node, coordinator=chroot, node_id=node, **shared, **ZOOKEEPER_TEST_SETTINGS
            )
            stack.push_async_callback(gw.stop)
            stack.push_async_callback(gw.client.aclose)
            running.append(gw)
        yield running


async def test_two_replicas_on_kafka_and_zookeeper_register_as_one(replicas: list[RunningGateway]) -> None:
    a, b = (Registry(gw.client) for gw in replicas)
    await a.put("/config", {"compatibility": "NONE"})
    schemas = [record(f"R{i}", field("x")) for i in range(24)]

    async def register(via: Registry, subject: str, schema: str) -> tuple[str, str, int]:
        return subject, schema, await via.id_of(subject, schema)

    # Every schema through both replicas at once, in two subjects each, some twice: all racing.
    calls = [
        register(via, f"s{i % 3}-value", schema) for i, schema in enumerate(schemas) for via in (a, b, a)
    ] + [register(via, "shared-value", schema) for schema in schemas[:6] for via in (b, a)]
    results = await asyncio.gather(*calls)
    ids_of: dict[str, set[int]] = {}
    for _, schema, schema_id in results:
        ids_of.setdefault(schema, set()).add(schema_id)
    assert all(len(ids) == 1 for ids in ids_of.values()), "a schema got two ids"
    ids = [ids_of[s].pop() for s in schemas]
    assert sorted(ids) == list(range(1, 25)), "ids are unique and dense"
    for subject, expected in [(f"s{k}-value", schemas[k::3]) for k in range(3)] + [
        ("shared-value", schemas[:6])
    ]:
        for via in (a, b):
            versions = (await via.get(f"/subjects/{subject}/versions")).json()
            assert versions == list(range(1, len(expected) + 1)), (subject, versions)
        got = {(await b.get(f"/subjects/{subject}/versions/{v}")).json()["schema"] for v in versions}
        assert got == set(expected)
    # a write through one replica is read through the other at once
    new_id = await b.id_of("late-value", V_A)
    assert (await a.get(f"/schemas/ids/{new_id}")).json() == {"schema": V_A}
    assert (await a.get("/config")).json() == {"compatibilityLevel": "NONE"}
    topic = (await a.client.get(f"/topics/{replicas[0].settings.schema_registry_topic}")).json()
    assert len(topic["partitions"]) == 1 and topic["configs"]["cleanup.policy"] == "compact"


class _RacedRegistryLog:
    """One replica's Kafka log (the ``Log`` port it runs on), on which the registry's topic is
    raced on purpose. ``lag()``: its end offset reads as it is now until this replica appends
    (a read that came back short), so this replica decides on a state without what the other
    replica registers meanwhile. ``take_ids()``: before each of this replica's registrations,
    another writer's record lands holding the id it chose (a writer that raced it every time)."""

    def __init__(self, log: Log, topic: str) -> None:
        self._log = log
        self._topic = topic  # the registry's
        self._stale_end: int | None = None
        self._taking = False
        self.taken = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)

    async def lag(self) -> None:
        self._stale_end = (await self._log.offsets(TopicPartition(self._topic, 0)))[1]

    def take_ids(self) -> None:
        self._taking = True

    async def offsets(self, tp: TopicPartition) -> tuple[int, int]:
        begin, end = await self._log.offsets(tp)
        return (
            (begin, self._stale_end)
            if tp.topic == self._topic and self._stale_end is not None
            else (begin, end)
        )

    async def append(self, tp: TopicPartition, records: Sequence[NewRecord]) -> Sequence[int]:
        if tp.topic == self._topic:
            self._stale_end = None
            if self._taking:
                chosen = json.loads(records[0].value or b"{}")["id"]
                self.taken += 1
                other = Schema(SchemaType.AVRO, record(f"Other{self.taken}", field("o")))
                subject = f"other-{self.taken}"
                taken = NewRecord(
                    schema_key(subject, 1), schema_value(subject, 1, chosen, other, deleted=False)
                )
                await self._log.append(tp, [taken])
        return await self._log.append(tp, records)


@pytest.fixture
async def raced(
    tmp_path: Path, kafka_broker: KafkaBroker, zookeeper: ZooKeeperServer
) -> AsyncIterator[tuple[_RacedRegistryLog, Registry, Registry]]:
    """Two replicas on one Kafka and one ZooKeeper: ``a`` on a log whose registry topic is raced
    (``_RacedRegistryLog``), ``b`` as it is."""
    chroot = f"{zookeeper.url}/t-{uuid.uuid4().hex[:12]}"
    common: dict[str, Any] = {
        **kafka_settings(kafka_broker),  # one registry topic for both replicas
        "coordinator": chroot,
        **ZOOKEEPER_TEST_SETTINGS,
    }
    log, coordinator, sessions = build_ports(Settings(data_dir=tmp_path / "a", node_id="a", **common))
    racing = _RacedRegistryLog(log, common["schema_registry_topic"])
    async with AsyncExitStack() as stack:
        clients = []
        for node, ports in (("a", (racing, coordinator, sessions)), ("b", None)):
            gw = await start_gateway(tmp_path / node, ports=ports, node_id=node, **common)
            stack.push_async_callback(gw.stop)
            stack.push_async_callback(gw.client.aclose)
            clients.append(Registry(gw.client))
        yield racing, clients[0], clients[1]


async def test_a_registration_that_lost_a_race_decides_again(
    raced: tuple[_RacedRegistryLog, Registry, Registry],
) -> None:
    """Replica a decides on a state without the two schemas b registered meanwhile: id 2, version
    1 of the subject; its record comes after b's and is ignored (id 2 is b's other schema). It
    reads them, decides again in the same request (id 4, version 2) and answers that, not a 500."""
    racing, a, b = raced
    assert (await a.put("/config", {"compatibility": "NONE"})).status_code == 200
    assert await a.id_of("w-value", record("W", field("w"))) == 1
    await racing.lag()
    assert await b.id_of("t-value", record("X1", field("x"))) == 2
    assert await b.id_of("raced-value", record("X2", field("x"))) == 3
    assert await a.id_of("raced-value", record("Y", field("y"))) == 4
    for via in (a, b):
        assert (await via.get("/subjects/raced-value/versions")).json() == [1, 2]
        assert (await via.get("/subjects/raced-value/versions/2")).json()["id"] == 4
        assert (await via.get("/schemas/ids/2")).json() == {"schema": record("X1", field("x"))}
        assert (await via.get("/schemas/ids/4")).json() == {"schema": record("Y", field("y"))}


async def test_a_registration_that_keeps_losing_is_a_retriable_503(
    raced: tuple[_RacedRegistryLog, Registry, Registry],
) -> None:
    """Another writer takes the id replica a chose before each of its attempts: after three, a
    503 with Confluent's 50002 and ``Retry-After``, which its clients retry; no id for the schema."""
    racing, a, b = raced
    racing.take_ids()
    r = await a.register("lost-value", record("Lost", field("l")))
    assert (error(r, 503, 50002), r.headers["retry-after"]) == (
        "The registry's records were not read back as written in 3 attempts: other writers raced this one "
        "(is every replica on the same coordinator?); retry.",
        "1",
    )
    assert racing.taken == 3
    for via in (a, b):
        assert (await via.get("/subjects")).json() == ["other-1", "other-2", "other-3"]
