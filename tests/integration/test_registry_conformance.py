"""The schema registry against Confluent's API reference, endpoint by endpoint: what a client of
Confluent's registry sees, it sees here (texts, codes, media types, parameters).

Organised as Confluent's reference is: schemas (``/schemas``, ``/schemas/ids/{id}``), subjects
and their versions, compatibility, config and mode; then the HTTP around them (``Accept``,
charsets, subjects holding ``/``) and the registry's state on a Kafka broker. Each test starts a
real gateway (``gateway`` fixture: embedded log and coordinator; the session's Apache Kafka
broker, with a registry topic of the test's own, for the broker tests) and
speaks HTTP to ``/schema-registry`` as a registry client would. Error texts are Confluent's
(``Errors.java`` and the ``Rest*Exception`` classes of its registry).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import AsyncSchemaRegistryClient
from confluent_kafka.schema_registry import Schema as ConfluentSchema

from deploy.local.kafka_broker import KafkaBroker
from service.adapters.embedded.log import EmbeddedLog
from service.adapters.kafka import KafkaLog
from service.adapters.kafka.options import KafkaOptions
from service.client import GatewayClient
from service.core.models import NewRecord, TopicPartition
from service.core.schemas.model import Schema, SchemaType
from service.core.schemas.records import schema_key, schema_value
from service.core.schemas.store import RegistryTopic
from tests.conftest import RunningGateway, kafka_settings, running_gateway

SR = "/schema-registry"
V1 = "application/vnd.schemaregistry.v1+json"
SR_DEFAULT = "application/vnd.schemaregistry+json"

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"type": "string", "name": "id", "doc": "the order's id"},
        {"name": "qty", "type": {"type": "int", "connect.name": "q", "a.prop": 1}, "default": 0},
    ],
}
# Avro's compact print of ORDER: each object's keys in Avro's order, attributes as they came
ORDER_TEXT = (
    '{"type":"record","name":"Order","namespace":"shop","fields":['
    '{"name":"id","type":"string","doc":"the order\'s id"},'
    '{"name":"qty","type":{"type":"int","connect.name":"q","a.prop":1},"default":0}]}'
)
# ... and normalized: attributes sorted
ORDER_NORMALIZED = ORDER_TEXT.replace('"connect.name":"q","a.prop":1', '"a.prop":1,"connect.name":"q"')


def spaced(schema: Any) -> str:
    return json.dumps(schema, indent=2)


def record(name: str, *fields: str) -> str:
    fields_ = [{"name": f, "type": "string"} for f in fields]
    return json.dumps({"type": "record", "name": name, "fields": fields_}, separators=(",", ":"))


class Registry:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def register(self, subject: str, schema: str, **body: Any) -> httpx.Response:
        params = {"normalize": "true"} if body.pop("normalize", False) else {}
        return await self.client.post(
            f"{SR}/subjects/{subject}/versions", json={"schema": schema, **body}, params=params
        )

    async def id_of(self, subject: str, schema: str, **body: Any) -> int:
        r = await self.register(subject, schema, **body)
        assert r.status_code == 200, r.text
        return int(r.json()["id"])

    async def get(self, path: str, **params: Any) -> httpx.Response:
        return await self.client.get(SR + path, params=params)


def error(r: httpx.Response, status: int, code: int) -> str:
    assert (r.status_code, r.json()["error_code"]) == (status, code), r.text
    return str(r.json()["message"])


@pytest.fixture
def registry(gateway: RunningGateway) -> Registry:
    return Registry(gateway.client)


# --- schemas: GET /schemas ------------------------------------------------------------------


async def test_get_schemas_with_its_filters(registry: Registry) -> None:
    a1, a2 = record("A", "x"), record("A", "x", "y")
    await registry.client.put(f"{SR}/config", json={"compatibility": "NONE"})
    ids = [await registry.id_of(s, t) for s, t in [("a-value", a1), ("a-value", a2), ("b-value", a1)]]
    await registry.id_of("other", record("O", "z"))
    assert (await registry.client.delete(f"{SR}/subjects/a-value/versions/2")).status_code == 200

    def short(r: httpx.Response) -> list[tuple[str, int, int]]:
        assert r.status_code == 200, r.text
        return [(s["subject"], s["version"], s["id"]) for s in r.json()]

    everything = await registry.get("/schemas")
    assert everything.json()[0] == {"subject": "a-value", "version": 1, "id": ids[0], "schema": a1}
    assert short(everything) == [("a-value", 1, ids[0]), ("b-value", 1, ids[0]), ("other", 1, 3)]
    assert short(await registry.get("/schemas", deleted="true"))[:2] == [("a-value", 1, 1), ("a-value", 2, 2)]
    assert short(await registry.get("/schemas", subjectPrefix="a")) == [("a-value", 1, 1)]
    assert short(await registry.get("/schemas", subjectPrefix="a", deleted="true", latestOnly="true")) == [
        ("a-value", 2, 2)
    ]
    assert short(await registry.get("/schemas", latestOnly="true", offset=1, limit=1)) == [("b-value", 1, 1)]
    # a limit out of 1 to 1000 is Confluent's default, 1000
    assert len((await registry.get("/schemas", limit=0)).json()) == 3


# --- schemas: ?format= ----------------------------------------------------------------------

C_TEXT = '{"type":"record","name":"C","namespace":"n","fields":[{"name":"c","type":"string"}]}'
B_TEXT = '{"type":"record","name":"B","namespace":"n","fields":[{"name":"c","type":"C"}]}'
A_TEXT = (
    '{"type":"record","name":"A","namespace":"m","fields":['
    '{"name":"b","type":"n.B"},{"name":"c2","type":["null","n.C"],"default":null}]}'
)
# A with the types of its references (B, and C through B) written in full where first used,
# in the namespace they are written in, as Avro's Schema.toString() prints it
A_RESOLVED = (
    '{"type":"record","name":"A","namespace":"m","fields":['
    '{"name":"b","type":{"type":"record","name":"B","namespace":"n","fields":['
    '{"name":"c","type":{"type":"record","name":"C","fields":[{"name":"c","type":"string"}]}}]}},'
    '{"name":"c2","type":["null","n.C"],"default":null}]}'
)


async def test_format_resolved_inlines_an_avro_schemas_references(registry: Registry) -> None:
    """AvroSchema.formattedString("resolved"): A refs B refs C, answered with both written in full;
    the references stay listed. Another name, or none, answers the text as stored."""
    await registry.id_of("c", C_TEXT)
    await registry.id_of("b", B_TEXT, references=[{"name": "n.C", "subject": "c", "version": 1}])
    refs = [{"name": "n.B", "subject": "b", "version": 1}]
    a = await registry.id_of("a-value", A_TEXT, references=refs)
    for fmt in ("resolved", "RESOLVED", " resolved"):
        got = (await registry.get(f"/schemas/ids/{a}", format=fmt)).json()
        assert got == {"references": refs, "schema": A_RESOLVED}, fmt
    assert (await registry.get(f"/schemas/ids/{a}/schema", format="resolved")).text == A_RESOLVED
    got = (await registry.get("/subjects/a-value/versions/1", format="resolved")).json()
    assert (got["id"], got["schema"], got["references"]) == (a, A_RESOLVED, refs)
    r = await registry.get("/subjects/a-value/versions/latest/schema", format="resolved")
    assert r.text == A_RESOLVED
    r = await registry.client.post(
        f"{SR}/subjects/a-value", params={"format": "resolved"}, json={"schema": A_TEXT, "references": refs}
    )
    assert r.json()["schema"] == A_RESOLVED, r.text
    # a schema without references is its text; an unknown format, or default, is the text as stored
    assert (await registry.get("/schemas/ids/1", format="resolved")).json()["schema"] == C_TEXT
    for fmt in ("default", "no-such-format", "serialized", ""):
        assert (await registry.get(f"/schemas/ids/{a}", format=fmt)).json()["schema"] == A_TEXT, fmt


async def test_format_resolved_is_the_text_for_json_schema_and_protobuf(registry: Registry) -> None:
    """JsonSchema's and ProtobufSchema's formattedString know no "resolved": their canonical text."""
    inner = await registry.id_of("inner", '{"type":"string"}', schemaType="JSON")
    outer_text = '{"type":"object","properties":{"s":{"$ref":"inner.json"}}}'
    refs = [{"name": "inner.json", "subject": "inner", "version": 1}]
    outer = await registry.id_of("outer", outer_text, schemaType="JSON", references=refs)
    proto_text = 'syntax = "proto3";\nmessage P {\n  string s = 1;\n}\n'
    proto = await registry.id_of("p", proto_text, schemaType="PROTOBUF")
    for schema_id in (inner, outer, proto):
        stored = (await registry.get(f"/schemas/ids/{schema_id}")).json()
        assert (await registry.get(f"/schemas/ids/{schema_id}", format="resolved")).json() == stored


# --- subjects: registering and looking up (normalize, Avro's text) -------------------------


async def test_schema_text_is_avros_compact_print(registry: Registry) -> None:
    schema_id = await registry.id_of("orders-value", spaced(ORDER))
    assert (await registry.get("/subjects/orders-value/versions/1")).json()["schema"] == ORDER_TEXT
    assert (await registry.get("/subjects/orders-value/versions/1/schema")).text == ORDER_TEXT
    assert (await registry.get(f"/schemas/ids/{schema_id}")).json() == {"schema": ORDER_TEXT}
    assert (await registry.get(f"/schemas/ids/{schema_id}/schema")).text == ORDER_TEXT
    # the same schema spelled otherwise is the same schema, found by a lookup
    r = await registry.client.post(f"{SR}/subjects/orders-value", json={"schema": json.dumps(ORDER)})
    assert (r.status_code, r.json()["schema"], r.json()["id"]) == (200, ORDER_TEXT, schema_id)


async def test_normalize_stores_and_returns_the_normalized_text(registry: Registry) -> None:
    schema_id = await registry.id_of("n-value", spaced(ORDER), normalize=True)
    assert (await registry.get("/subjects/n-value/versions/1")).json()["schema"] == ORDER_NORMALIZED
    assert (await registry.get(f"/schemas/ids/{schema_id}")).json() == {"schema": ORDER_NORMALIZED}
    r = await registry.client.post(
        f"{SR}/subjects/n-value", params={"normalize": "true"}, json={"schema": json.dumps(ORDER)}
    )
    assert (r.status_code, r.json()["version"], r.json()["schema"]) == (200, 1, ORDER_NORMALIZED)


async def test_a_name_on_a_primitive_is_no_part_of_it(registry: Registry) -> None:
    schema_id = await registry.id_of("p-value", '{"type": "int", "name": "X"}')
    assert (await registry.get(f"/schemas/ids/{schema_id}")).json() == {"schema": '"int"'}
    for spelling in ('{"type":"int"}', '"int"'):
        r = await registry.client.post(f"{SR}/subjects/p-value", json={"schema": spelling})
        assert (r.status_code, r.json()["id"], r.json()["version"]) == (200, schema_id, 1), r.text
    assert await registry.id_of("p-value", '"int"') == schema_id
    assert (await registry.get("/subjects/p-value/versions")).json() == [1]


# --- error texts, as Confluent's ------------------------------------------------------------


async def test_error_messages_are_confluents(registry: Registry) -> None:
    c = registry.client
    base = await registry.id_of("base", record("Base", "x"))
    ref = {"name": "Base", "subject": "base", "version": 1}
    await registry.id_of("user", record("User", "x").replace('"string"}]', '"Base"}]', 1), references=[ref])
    r = await c.get(f"{SR}/subjects/nope/versions")
    assert error(r, 404, 40401) == "Subject 'nope' not found."
    assert error(await c.get(f"{SR}/subjects/base/versions/7"), 404, 40402) == "Version 7 not found."
    assert error(await c.get(f"{SR}/schemas/ids/99"), 404, 40403) == "Schema 99 not found"
    r = await c.post(f"{SR}/subjects/base", json={"schema": record("Other", "y")})
    assert error(r, 404, 40403) == "Schema not found"
    r = await c.delete(f"{SR}/subjects/base")
    assert error(r, 422, 42206) == (
        "One or more references exist to the schema {magic=1,keytype=SCHEMA,subject=base,version=1}."
    )
    r = await c.delete(f"{SR}/subjects/base/versions/1")
    assert error(r, 422, 42206) == (
        "One or more references exist to the schema {magic=1,keytype=SCHEMA,subject=base,version=1}."
    )
    await registry.id_of("soft", record("Soft", "x"))
    r = await c.delete(f"{SR}/subjects/soft", params={"permanent": "true"})
    assert error(r, 404, 40405) == "Subject 'soft' was not deleted first before being permanently deleted"
    r = await c.delete(f"{SR}/subjects/soft/versions/1", params={"permanent": "true"})
    assert error(r, 404, 40407) == (
        "Subject 'soft' Version 1 was not deleted first before being permanently deleted"
    )
    assert (await c.delete(f"{SR}/subjects/soft/versions/1")).status_code == 200
    r = await c.delete(f"{SR}/subjects/soft/versions/1")
    assert error(r, 404, 40406) == (
        "Subject 'soft' Version 1 was soft deleted.Set permanent=true to delete permanently"
    )
    await registry.id_of("soft2", record("Soft", "x"))
    assert (await c.delete(f"{SR}/subjects/soft2")).status_code == 200
    r = await c.delete(f"{SR}/subjects/soft2")
    assert error(r, 404, 40404) == "Subject 'soft2' was soft deleted.Set permanent=true to delete permanently"
    r = await c.get(f"{SR}/config/base")
    assert error(r, 404, 40408) == "Subject 'base' does not have subject-level compatibility configured"
    r = await c.get(f"{SR}/mode/base")
    assert error(r, 404, 40409) == "Subject 'base' does not have subject-level mode configured"
    r = await c.put(f"{SR}/mode", json={"mode": "NOPE"})
    assert error(r, 422, 42204) == "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD."
    r = await c.put(f"{SR}/config", json={"compatibility": "NOPE"})
    assert error(r, 422, 42203) == (
        "Invalid compatibility level. Valid values are none, backward, forward, full, "
        "backward_transitive, forward_transitive, and full_transitive"
    )
    r = await registry.register("__GLOBAL", record("G", "x"))
    assert error(r, 422, 42208) == "The specified subject '__GLOBAL' is not a valid."
    r = await c.get(f"{SR}/subjects/base/versions/0")
    assert error(r, 422, 42202) == (
        "The specified version '0' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"'
    )
    r = await registry.register("base", record("Base", "x", "y"))  # BACKWARD: a field without default
    message = error(r, 409, 409)
    assert message.startswith(
        'Schema being registered is incompatible with an earlier schema for subject "base", '
    )
    assert message.startswith("details: [", message.index("details: ")), message
    old_text = record("Base", "x")  # the version it may not follow, then the level, as Confluent lists them
    assert message.endswith(
        f"{{oldSchemaVersion: 1}}, {{oldSchema: '{old_text}'}}, "
        "{validateFields: 'false', compatibility: 'BACKWARD'}]"
    ), message
    r = await c.post(
        f"{SR}/compatibility/subjects/base/versions/latest",
        params={"verbose": "true"},
        json={"schema": record("Base", "x", "y")},
    )
    assert r.json()["is_compatible"] is False
    assert r.json()["messages"][-3:] == [
        "{oldSchemaVersion: 1}",
        f"{{oldSchema: '{old_text}'}}",
        "{validateFields: 'false', compatibility: 'BACKWARD'}",
    ]
    assert (await c.put(f"{SR}/mode/base", json={"mode": "READONLY"})).status_code == 200
    r = await registry.register("base", record("Base", "z"))
    assert error(r, 422, 42205) == "Subject base in context . is in read-only mode"
    assert base == 1
    r = await c.get(f"{SR}/subjects", headers={"Accept": "text/html"})
    assert error(r, 406, 406) == "HTTP 406 Not Acceptable"
    r = await c.post(f"{SR}/subjects/base/versions", content=b"{}", headers={"Content-Type": "text/plain"})
    assert error(r, 415, 415) == "HTTP 415 Unsupported Media Type"


# --- compatibility: why not, in Confluent's words -------------------------------------------

_MATCHES = "in the new schema does not match with the old schema"
# (the old schema, the new one, what Confluent's Avro checker says of the new one under BACKWARD)
AVRO_REFUSALS = [
    (
        record("R", "x"),
        record("R", "x", "y"),
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'y' at path '/fields/1' "
        "in the new schema has no default value and is missing in the old schema', additionalInfo:'y'}",
    ),
    (
        record("R", "x"),
        record("R", "x").replace('"string"', '"int"'),
        f"{{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field {_MATCHES}', "
        "additionalInfo:'reader type: INT not compatible with writer type: STRING'}",
    ),
    (
        record("R", "x"),
        record("S", "x"),
        "{errorType:'NAME_MISMATCH', description:'The name of the schema has changed (path '/name')', "
        "additionalInfo:'expected: R'}",
    ),
    (
        '{"type":"enum","name":"E","symbols":["A","C","B"]}',
        '{"type":"enum","name":"E","symbols":["A"]}',
        "{errorType:'MISSING_ENUM_SYMBOLS', description:'The new schema is missing enum symbols '[B, C]' "
        "at path '/symbols' in the old schema', additionalInfo:'[B, C]'}",
    ),
    (
        '{"type":"fixed","name":"F","size":4}',
        '{"type":"fixed","name":"F","size":8}',
        "{errorType:'FIXED_SIZE_MISMATCH', description:'The size of FIXED type field at path '/size' "
        f"{_MATCHES}', "
        "additionalInfo:'expected: 4, found: 8'}",
    ),
    (
        '["int","string"]',
        '["int","boolean"]',
        "{errorType:'MISSING_UNION_BRANCH', description:'The new schema is missing a type inside a union "
        "field at path '/1' in the old schema', additionalInfo:'reader union lacking writer type: STRING'}",
    ),
]


async def test_each_routes_not_found_is_worded_as_confluents(registry: Registry) -> None:
    """Route by route, the 404 Confluent's resource throws for what is not there, and its words
    (Errors: subjectNotFoundException, versionNotFoundException, schemaNotFoundException with and
    without an id, the not-configured ones), as SchemasResource, SubjectVersionsResource,
    SubjectsResource, CompatibilityResource, ConfigResource and ModeResource throw them."""
    c = registry.client
    await registry.id_of("base", record("Base", "x"))
    schema = {"schema": record("Base", "x")}
    nope = "Subject 'nope' not found."
    no_schema_99 = "Schema 99 not found"
    cases: list[tuple[str, str, dict[str, Any] | None, int, str]] = [
        # SchemasResource: getSchema and getSchemaOnly name the id, getSubjects and getVersions do not
        ("GET", "/schemas/ids/99", None, 40403, no_schema_99),
        ("GET", "/schemas/ids/99/schema", None, 40403, no_schema_99),
        ("GET", "/schemas/ids/99/subjects", None, 40403, "Schema not found"),
        ("GET", "/schemas/ids/99/versions", None, 40403, "Schema not found"),
        # SubjectVersionsResource
        ("GET", "/subjects/nope/versions", None, 40401, nope),
        ("GET", "/subjects/nope/versions/1", None, 40401, nope),
        ("GET", "/subjects/nope/versions/latest", None, 40401, nope),
        ("GET", "/subjects/base/versions/7", None, 40402, "Version 7 not found."),
        ("GET", "/subjects/nope/versions/1/schema", None, 40401, nope),
        ("GET", "/subjects/base/versions/7/schema", None, 40402, "Version 7 not found."),
        ("GET", "/subjects/nope/versions/1/referencedby", None, 40401, nope),
        ("GET", "/subjects/base/versions/7/referencedby", None, 40402, "Version 7 not found."),
        ("DELETE", "/subjects/nope/versions/1", None, 40401, nope),
        ("DELETE", "/subjects/base/versions/7", None, 40402, "Version 7 not found."),
        # SubjectsResource
        ("POST", "/subjects/nope", schema, 40401, nope),
        ("POST", "/subjects/base", {"schema": record("Other", "y")}, 40403, "Schema not found"),
        ("DELETE", "/subjects/nope", None, 40401, nope),
        # CompatibilityResource: a version not there, whether or not its subject is
        ("POST", "/compatibility/subjects/base/versions/7", schema, 40402, "Version 7 not found."),
        ("POST", "/compatibility/subjects/nope/versions/1", schema, 40402, "Version 1 not found."),
        # ConfigResource, ModeResource: no subject-level setting to read, or to delete
        (
            "GET",
            "/config/nope",
            None,
            40408,
            "Subject 'nope' does not have subject-level compatibility configured",
        ),
        ("DELETE", "/config/nope", None, 40401, nope),
        ("DELETE", "/config/base", None, 40401, "Subject 'base' not found."),
        ("GET", "/mode/nope", None, 40409, "Subject 'nope' does not have subject-level mode configured"),
        ("DELETE", "/mode/nope", None, 40401, nope),
        ("DELETE", "/mode/base", None, 40401, "Subject 'base' not found."),
    ]
    answered = []
    for method, path, body, *_ in cases:
        r = await c.request(method, SR + path, json=body)
        answered.append(
            (method, path, body, r.status_code, r.json().get("error_code"), r.json().get("message"))
        )
    assert answered == [(m, p, b, 404, code, message) for m, p, b, code, message in cases]
    # no version to compare with is no refusal: compatible
    r = await c.post(f"{SR}/compatibility/subjects/nope/versions/latest", json=schema)
    assert r.json() == {"is_compatible": True}, r.text


@pytest.mark.parametrize(("old", "new", "why"), AVRO_REFUSALS, ids=lambda v: str(v)[:30])
async def test_an_avro_refusal_is_worded_as_confluents(
    registry: Registry, old: str, new: str, why: str
) -> None:
    """A 409's details and a verbose check's messages: Avro's incompatibilities as Confluent's
    Difference words them, the version and its text, then the level."""
    await registry.id_of("s", old)
    envelope = ["{oldSchemaVersion: 1}", f"{{oldSchema: '{old}'}}", BACKWARD]
    r = await registry.register("s", new)
    assert error(r, 409, 409) == (
        'Schema being registered is incompatible with an earlier schema for subject "s", '
        f"details: [{', '.join([why, *envelope])}]"
    )
    r = await registry.client.post(
        f"{SR}/compatibility/subjects/s/versions/latest", params={"verbose": "true"}, json={"schema": new}
    )
    assert r.json() == {"is_compatible": False, "messages": [why, *envelope]}, r.text


BACKWARD = "{validateFields: 'false', compatibility: 'BACKWARD'}"


async def test_forward_and_full_refusals_are_assembled_as_confluents(registry: Registry) -> None:
    """FORWARD: the old schema reads new data ("old" first), the old schema after; FULL: those
    errors first, then the new schema's reading old data, then the old schema, only after those."""
    c = registry.client
    old = record("R", "x")
    await registry.id_of("f", old)
    dropped = record("R", "y").replace('"string"}', '"string","default":""}')  # x dropped, y added
    missing_x = (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'x' at path '/fields/0' "
        "in the old schema has no default value and is missing in the new schema', additionalInfo:'x'}"
    )
    old_schema = ["{oldSchemaVersion: 1}", f"{{oldSchema: '{old}'}}"]
    for level, expected in (
        ("FORWARD", [missing_x, *old_schema]),
        ("FULL", [missing_x]),  # the new schema reads the old data: no old schema listed
        ("BACKWARD", []),
    ):
        assert (await c.put(f"{SR}/config/f", json={"compatibility": level})).status_code == 200
        r = await c.post(
            f"{SR}/compatibility/subjects/f/versions/latest",
            params={"verbose": "true"},
            json={"schema": dropped},
        )
        tail = [f"{{validateFields: 'false', compatibility: '{level}'}}"] if expected else []
        assert r.json()["messages"] == [*expected, *tail], (level, r.text)
    await c.put(f"{SR}/config/f", json={"compatibility": "FULL"})
    typed = record("R", "x").replace('"string"', '"int"')
    r = await c.post(
        f"{SR}/compatibility/subjects/f/versions/latest", params={"verbose": "true"}, json={"schema": typed}
    )
    mismatch = "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field in the "
    mismatch += "%s schema "
    assert r.json()["messages"] == [
        mismatch.replace("%s", "old") + "does not match with the new schema', "
        "additionalInfo:'reader type: STRING not compatible with writer type: INT'}",
        mismatch.replace("%s", "new") + "does not match with the old schema', "
        "additionalInfo:'reader type: INT not compatible with writer type: STRING'}",
        *old_schema,
        "{validateFields: 'false', compatibility: 'FULL'}",
    ]


async def test_other_refusals_are_assembled_alike(registry: Registry) -> None:
    """JSON Schema's and Protobuf's rules in the same envelope, "new" and "old" in their places
    (Protobuf's at Confluent's paths); a schema of another type is Confluent's one line and the level."""
    c = registry.client
    old = '{"type":"object","properties":{"a":{"type":"string","maxLength":5}}}'
    await registry.id_of("j", old, schemaType="JSON")
    new = old.replace("5", "3")
    r = await registry.register("j", new, schemaType="JSON")
    assert error(r, 409, 409).endswith(
        'details: [{errorType:"MAX_LENGTH_DECREASED", description:"The value at path '
        "'#/properties/a/maxLength' in the new schema is less than its value in the old schema'}, "
        f"{{oldSchemaVersion: 1}}, {{oldSchema: '{old}'}}, {BACKWARD}]"
    )
    proto = 'syntax = "proto3";\nmessage A {\n  int32 a = 1;\n  oneof o {\n    int32 b = 2;\n  }\n}\n'
    await registry.id_of("p", proto, schemaType="PROTOBUF")
    old_proto = (await registry.get("/subjects/p/versions/1/schema")).text
    changed = proto.replace("int32 a", "string a").replace("int32 b", "sint32 b")
    r = await registry.register("p", changed, schemaType="PROTOBUF")
    scalar = '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path '
    assert error(r, 409, 409).endswith(
        f"details: [{scalar}'#/A/1' in the new schema does not match its kind in the old schema\"}}, "
        f"{scalar}'#/A/o/2' in the new schema does not match its kind in the old schema\"}}, "
        f"{{oldSchemaVersion: 1}}, {{oldSchema: '{old_proto}'}}, {BACKWARD}]"
    ), r.text
    r = await c.post(
        f"{SR}/compatibility/subjects/j/versions/1", params={"verbose": "true"}, json={"schema": '"int"'}
    )
    assert r.json() == {
        "is_compatible": False,
        "messages": ["Incompatible because of different schema type", BACKWARD],
    }, r.text


# --- HTTP: Accept, charsets -------------------------------------------------------------------


@pytest.mark.parametrize("accept", ["*", "*/x", "*; q=0.5", "text/html, */x"])
async def test_wildcard_accepts_are_served(registry: Registry, accept: str) -> None:
    r = await registry.client.get(f"{SR}/subjects", headers={"Accept": accept})
    assert (r.status_code, r.headers["content-type"]) == (200, V1), r.text


@pytest.mark.parametrize(
    ("accept", "answered"),
    [
        ("application/json; q=0", "application/json"),
        ("application/vnd.schemaregistry.v1+json; q=0, application/json", "application/json"),
        ("application/json; q=0, application/vnd.schemaregistry+json; q=0", SR_DEFAULT),
        ("text/html, */*; q=0", V1),
    ],
)
async def test_an_accept_weighted_0_is_served_last(registry: Registry, accept: str, answered: str) -> None:
    """Jersey selects a method by compatibility alone and orders the candidates by q, then by the
    resource's qs (CombinedMediaType): an item weighted 0 is served when nothing better is."""
    r = await registry.client.get(f"{SR}/subjects", headers={"Accept": accept})
    assert (r.status_code, r.headers["content-type"]) == (200, answered), r.text


async def test_content_type_is_checked_before_accept(registry: Registry) -> None:
    """Every resource of Confluent's registry @Consumes its JSON types and octet-stream; Jersey
    refuses another Content-Type (415) before it reads Accept (406, 400), on every method."""
    c = registry.client
    schema = json.dumps({"schema": '"string"'}).encode()
    requests = [
        ("POST", f"{SR}/subjects/ct-value/versions", schema),
        ("POST", f"{SR}/subjects/ct-value", schema),
        ("POST", f"{SR}/compatibility/subjects/ct-value/versions/latest", schema),
        ("PUT", f"{SR}/config", b'{"compatibility": "NONE"}'),
        ("GET", f"{SR}/subjects", None),
        ("GET", f"{SR}/schemas/ids/1", None),
        ("GET", f"{SR}/config", None),
        ("DELETE", f"{SR}/subjects/ct-value", None),
    ]
    for accept in [None, "text/html", "application/json; q=abc"]:
        for method, path, body in requests:
            headers = {"Content-Type": "text/plain"} | ({"Accept": accept} if accept else {})
            r = await c.request(method, path, content=body, headers=headers)
            assert error(r, 415, 415) == "HTTP 415 Unsupported Media Type", (method, path, accept)
    for content_type in ["application/octet-stream", "application/*", "*/*"]:
        r = await c.get(f"{SR}/subjects", headers={"Content-Type": content_type, "Accept": "text/html"})
        assert error(r, 406, 406) == "HTTP 406 Not Acceptable", content_type
    assert (await c.get(f"{SR}/subjects")).json() == []  # nothing was registered


async def test_the_document_lists_what_the_registry_answers(registry: Registry) -> None:
    """The OpenAPI document a client is generated from: every registry operation lists the 400 of
    an Accept Jersey cannot read and the 415 of a Content-Type it does not read (each answered
    here over HTTP), and ``format`` names the forms each schema type has."""
    c = registry.client
    assert error(await c.get(f"{SR}/subjects", headers={"Accept": "text/html; q=2"}), 400, 400)
    assert error(await c.get(f"{SR}/subjects", headers={"Content-Type": "text/plain"}), 415, 415)
    document = (await c.get("/openapi.json")).json()
    formats = 0
    for path, operations in document["paths"].items():
        if not path.startswith(SR):
            continue
        for method, operation in operations.items():
            for status in ("400", "406", "415"):
                assert status in operation["responses"], (method, path, status)
            assert "Accept" in operation["responses"]["400"]["description"], (method, path)
            for parameter in operation.get("parameters", []):
                if parameter["name"] == "format":
                    formats += 1
                    for form in ("AVRO `resolved`", "PROTOBUF `serialized`"):
                        assert form in parameter["description"], (method, path)
    assert formats == 5  # by id, its text, a subject's version, its text, a lookup


# Accept as Jersey reads it under Confluent's proxy and registry (AcceptableMediaType, HttpHeaderReader):
# what it serves, and what it cannot read (its 400: HeaderValueException, an inbound header).
ACCEPT_SERVED = [
    "*",  # "*/*"
    "*/x",  # a wildcard type admits any subtype (MediaType.isCompatible)
    "application/*",
    "application",  # a type alone: "application/*"
    "APPLICATION/JSON;Q=.5",
    "text/html, */*; q=0.1",
    'application/json; x="a,b" ;q=1.000',
    "application/json,",  # a last comma ends the list
    # Jersey selects by compatibility and orders by q (CombinedMediaType): q=0 is served, last
    "application/json; q=0",
    "text/html, */*; q=0",
]
ACCEPT_REFUSED = ["text/*", "text/html", "text/*; q=0", "application/xml, text/*; q=1"]
ACCEPT_MALFORMED = [
    "application/json; q=abc",
    "application/json; q=2",
    "application/json; q=-1",
    "application/json; q=1.5",
    "application/json; q=0.12345",
    "application/json; q",
    "application/json; q = 0.5",
    "application/json,,*/*",
    ", application/json",
    "application /json",
    "application/json text/html",
]


@pytest.mark.parametrize("path", ["/brokers", f"{SR}/subjects"])
async def test_one_accept_parser_for_the_proxy_and_the_registry(gateway: RunningGateway, path: str) -> None:
    """The v2 routes and the registry read Accept alike: Jersey's wildcards served, a header it
    cannot read 400 with the route's error shape (Confluent's servers send that 400 bodyless), one
    that admits none of the route's types 406."""
    c = gateway.client
    for accept in ACCEPT_SERVED:
        r = await c.get(path, headers={"Accept": accept})
        assert r.status_code == 200, (accept, r.text)
    for accept in ACCEPT_REFUSED:
        r = await c.get(path, headers={"Accept": accept})
        assert r.status_code == 406, (accept, r.text)
        assert r.json()["error_code"] in (406, 40602), (accept, r.text)
    for accept in ACCEPT_MALFORMED:
        r = await c.get(path, headers={"Accept": accept})
        assert (r.status_code, r.json()["error_code"]) == (400, 400), (accept, r.text)
        assert r.json()["message"].startswith("HTTP 400 Bad Request: the Accept header cannot"), r.text


async def test_the_records_routes_read_accept_alike(gateway: RunningGateway) -> None:
    """The routes whose Accept picks an embedded format (a consumer's poll, the stateless read)
    read it with the same parser: a wildcard answers in the instance's (or the default) format."""
    c = gateway.client
    binary = "application/vnd.kafka.binary.v2+json"
    r = await c.post("/topics/acc", json={"records": [{"value": "eA=="}]}, headers={"Content-Type": binary})
    assert r.status_code == 200, r.text
    body = {"name": "i", "format": "binary", "auto.offset.reset": "earliest"}
    base = (await c.post("/consumers/acc-g", json=body)).json()["base_uri"].split("/consumers", 1)[1]
    assert (await c.post(f"/consumers{base}/subscription", json={"topics": ["acc"]})).status_code == 204
    poll = (f"/consumers{base}/records", {"timeout": 50})
    routes = [poll, ("/topics/acc/partitions/0/records", {"offset": 0})]
    for path, params in routes:
        for accept in [*ACCEPT_SERVED, binary, f"text/html, {binary}; q=0.5"]:
            r = await c.get(path, params=params, headers={"Accept": accept})
            assert (r.status_code, r.headers["content-type"]) == (200, binary), (path, accept, r.text)
        for accept in [f"{binary}; q=0", f"application/vnd.kafka.json.v2+json; q=0, {binary}"]:
            r = await c.get(path, params=params, headers={"Accept": accept})
            assert (r.status_code, r.headers["content-type"]) == (200, binary), (path, accept, r.text)
        for accept in ["text/*", "text/html", "text/*; q=0"]:
            r = await c.get(path, params=params, headers={"Accept": accept})
            assert r.status_code == 406, (path, accept, r.text)
        for accept in ACCEPT_MALFORMED:
            r = await c.get(path, params=params, headers={"Accept": accept})
            assert (r.status_code, r.json()["error_code"]) == (400, 400), (path, accept, r.text)
    # Jersey picks the format the best q names (json, here), not one weighted lower: the
    # binary instance's format does not match it
    accept = f"{binary}; q=0.5, application/vnd.kafka.json.v2+json"
    r = await c.get(poll[0], params=poll[1], headers={"Accept": accept})
    assert (r.status_code, r.json()["error_code"]) == (406, 40601), r.text


@pytest.mark.parametrize("charset", ["utf-16", "UTF-16BE", "utf-16le", "utf-32"])
async def test_a_body_in_the_charset_it_names_is_read(registry: Registry, charset: str) -> None:
    schema = {"type": "record", "name": "Wide", "doc": "é ☃", "fields": []}
    body = json.dumps({"schema": json.dumps(schema)}, ensure_ascii=False).encode(charset)
    r = await registry.client.post(
        f"{SR}/subjects/wide-value/versions",
        content=body,
        headers={"Content-Type": f"application/vnd.schemaregistry.v1+json; charset={charset}"},
    )
    assert (r.status_code, r.json()) == (200, {"id": 1}), r.text
    assert json.loads((await registry.get("/schemas/ids/1")).json()["schema"])["doc"] == "é ☃"


async def test_a_body_is_read_in_the_encoding_its_bytes_show(registry: Registry) -> None:
    """As Jackson reads it: UTF-16 or UTF-32 is recognised whatever the charset says; bytes that
    are not in the encoding they show are a bad request (400), never a server error."""
    body = json.dumps({"schema": record("Utf16", "x")}).encode("utf-16-le")
    for charset in ("no-such-charset", "utf-8", "punycode"):
        r = await registry.client.post(
            f"{SR}/subjects/wide-value/versions",
            content=body,
            headers={"Content-Type": f"application/json; charset={charset}"},
        )
        assert (r.status_code, r.json()) == (200, {"id": 1}), r.text
    for bad in (b'{"schema": "\\"int\\""}\xff', '{"schema": "x"}'.encode("utf-16-le")[:-1] + b"\xd8"):
        r = await registry.client.post(
            f"{SR}/subjects/bad/versions",
            content=bad,
            headers={"Content-Type": "application/json; charset=utf-16le"},
        )
        error(r, 400, 400)


# --- subjects holding "/" ---------------------------------------------------------------------


async def test_a_subject_holding_a_slash_is_one_segment(registry: Registry) -> None:
    c = registry.client
    schema = record("Slashed", "x")
    r = await c.post(f"{SR}/subjects/team%2Forders-value/versions", json={"schema": schema})
    assert (r.status_code, r.json()) == (200, {"id": 1}), r.text
    assert (await c.get(f"{SR}/subjects")).json() == ["team/orders-value"]
    assert (await c.get(f"{SR}/subjects/team%2Forders-value/versions")).json() == [1]
    got = (await c.get(f"{SR}/subjects/team%2Forders-value/versions/latest")).json()
    assert (got["subject"], got["id"]) == ("team/orders-value", 1)
    assert (await c.get(f"{SR}/subjects/team%2forders-value/versions/1/schema")).json()["name"] == "Slashed"
    r = await c.post(f"{SR}/subjects/team%2Forders-value", json={"schema": schema})
    assert r.json()["subject"] == "team/orders-value"
    subject = "team%2Forders-value"
    r = await c.post(f"{SR}/compatibility/subjects/{subject}/versions/latest", json={"schema": schema})
    assert r.json() == {"is_compatible": True}
    assert (await c.put(f"{SR}/config/{subject}", json={"compatibility": "NONE"})).status_code == 200
    assert (await c.get(f"{SR}/config/team%2Forders-value")).json() == {"compatibilityLevel": "NONE"}
    assert (await c.put(f"{SR}/mode/a%2Fb", json={"mode": "READONLY"})).json() == {"mode": "READONLY"}
    assert (await c.get(f"{SR}/mode/a%2Fb")).json() == {"mode": "READONLY"}
    assert (await c.get(f"{SR}/schemas/ids/1/subjects")).json() == ["team/orders-value"]
    # several slashes, and the subject without them is another one
    assert await registry.id_of("a%2F%2Fb%2F", schema) == 1
    assert (await c.get(f"{SR}/subjects")).json() == ["a//b/", "team/orders-value"]
    error(await c.get(f"{SR}/subjects/teamorders-value/versions"), 404, 40401)
    assert (await c.delete(f"{SR}/subjects/team%2Forders-value")).json() == [1]


async def test_confluents_client_with_slashes_and_normalize(gateway: RunningGateway) -> None:
    async with AsyncSchemaRegistryClient({"url": gateway.url + SR}) as client:
        schema = ConfluentSchema(record("Slashed", "x"), "AVRO")
        schema_id = await client.register_schema("team/orders-value", schema)
        assert await client.get_subjects() == ["team/orders-value"]
        latest = await client.get_latest_version("team/orders-value")
        assert (latest.schema_id, latest.version, latest.subject) == (schema_id, 1, "team/orders-value")
        found = await client.lookup_schema("team/orders-value", schema)
        assert (found.schema_id, found.version) == (schema_id, 1)
        assert await client.delete_subject("team/orders-value") == [1]
        # normalize_schemas sends ?normalize=true: the normalized text is what is stored
        normalized_id = await client.register_schema("n-value", ConfluentSchema(spaced(ORDER), "AVRO"), True)
        assert (await client.get_schema(normalized_id)).schema_str == ORDER_NORMALIZED


@pytest.mark.parametrize(
    "path",
    [
        f"{SR}/schemas/ids/1%2Fschema",  # an id: never a subject
        f"{SR}/subjects/a/versions/1%2Fschema",  # a version
        f"{SR}/subjects%2Fa/versions",  # the resource's own name
        f"{SR}/config%2Fa",
        f"{SR}%2Fsubjects",
        f"{SR}/subjects/%EF%BF%BF/versions",  # what stands for "/" while routing, forged
        f"{SR}/subjects/%2E%2E/versions",
        "/topics/orders%2Fpartitions%2F0",  # outside the registry: never
        "/topics/a%2Fb",
    ],
)
async def test_an_encoded_slash_elsewhere_is_refused(gateway: RunningGateway, path: str) -> None:
    r = await gateway.client.get(path)
    assert (r.status_code, r.json()["error_code"]) == (422, 42207), r.text


# --- the registry's state in its topic ------------------------------------------------------


async def test_a_low_end_offset_never_empties_the_registry(
    tmp_path: Path, kafka_broker: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """A hard delete of a subject of three versions is one batch of three tombstones on Kafka: the
    registry reads the topic's end past the whole batch, keeps the state of the other subjects,
    sees no truncation, and the ids it gives next follow the topic's."""
    async with running_gateway(tmp_path, **kafka_settings(kafka_broker)) as gw:
        registry = Registry(gw.client)
        c = gw.client
        await c.put(f"{SR}/config", json={"compatibility": "NONE"})
        for i in range(3):
            await registry.id_of("gone", record(f"G{i}", "x"))
        kept = await registry.id_of("kept", record("Kept", "x"))
        assert (await c.delete(f"{SR}/subjects/gone")).json() == [1, 2, 3]
        caplog.set_level(logging.WARNING, logger="service.core.schemas.store")
        # three tombstones in one batch, then a record after them
        assert (await c.delete(f"{SR}/subjects/gone", params={"permanent": "true"})).json() == [1, 2, 3]
        for _ in range(5):
            assert (await c.get(f"{SR}/subjects")).json() == ["kept"]
            assert (await c.get(f"{SR}/schemas/ids/{kept}")).status_code == 200
        assert await registry.id_of("kept", record("Kept", "x")) == kept  # known: no new id
        assert await registry.id_of("after", record("After", "x")) == kept + 1
        assert (await c.get(f"{SR}/subjects")).json() == ["after", "kept"]
        assert not [r for r in caplog.records if "truncated" in r.getMessage()]


@pytest.mark.parametrize(
    ("fresh", "noticed"),
    [
        (["p"], "truncated"),  # fewer records than applied: none of them is left
        (["p", "q", "r", "s", "t"], "created again"),  # more: another record where the last one was
    ],
)
async def test_a_topic_deleted_and_created_again_is_read_again(
    tmp_path: Path,
    kafka_broker: KafkaBroker,
    caplog: pytest.LogCaptureFixture,
    fresh: list[str],
    noticed: str,
) -> None:
    """A real truncation: the registry's topic deleted on the broker and created again by another
    replica. This replica reads it again from its start, whether the topic now holds fewer records
    than it applied (a fetch of the last one applied comes back empty, the end below it) or more
    (the record at that offset is another one), instead of adding the new records to the old state."""
    shared = kafka_settings(kafka_broker)  # one registry topic for both replicas
    async with running_gateway(tmp_path / "a", **shared) as a:
        first = Registry(a.client)
        for name in ("x", "y", "z"):
            await first.id_of(name, record(name.upper(), "f"))
        assert (await a.client.get(f"{SR}/subjects")).json() == ["x", "y", "z"]
        broker = KafkaLog(kafka_broker.url, KafkaOptions(request_timeout_ms=5000))
        await broker.start()
        try:
            await broker.delete_topic(a.settings.schema_registry_topic)
        finally:
            await broker.stop()
        async with running_gateway(tmp_path / "b", **shared) as b:
            for i, name in enumerate(fresh, 1):  # creates it again
                assert await Registry(b.client).id_of(name, record(name.upper(), "g")) == i
        caplog.set_level(logging.WARNING, logger="service.core.schemas.store")
        assert (await a.client.get(f"{SR}/subjects")).json() == fresh
        assert (await a.client.get(f"{SR}/schemas/ids/1")).json()["schema"] == record("P", "g")
        assert await first.id_of("next", record("Next", "f")) == len(fresh) + 1  # ids follow the topic's
        assert [r for r in caplog.records if noticed in r.getMessage()]


def put(subject: str, schema_id: int) -> tuple[bytes, bytes]:
    """The registry's record of version 1 of ``subject``, schema ``schema_id``, in Confluent's format."""
    schema = Schema(SchemaType.AVRO, record(subject.upper(), "f"))
    return schema_key(subject, 1), schema_value(subject, 1, schema_id, schema, deleted=False)


class _RecreatedWhileReading:
    """The embedded log, every call its own, where another writer deletes the registry's topic
    and creates it again with one record right after a reader asked for the end offset and before
    it fetches. On the embedded log and on a broker, a fetch below the end the log just reported
    comes back empty only so: when the topic changed between the two calls."""

    def __init__(self, log: EmbeddedLog) -> None:
        self._log = log
        self.armed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)

    async def offsets(self, tp: TopicPartition) -> tuple[int, int]:
        found = await self._log.offsets(tp)
        if self.armed:
            self.armed = False
            await self._log.delete_topic(tp.topic)
            await self._log.create_topic(tp.topic, 1, 1, {})
            await self._log.append(tp, [NewRecord(*put("other", 7))])
        return found


async def test_an_empty_fetch_never_empties_the_registry(tmp_path: Path) -> None:
    """The registry's store reading its topic over a real log: a fetch that returns nothing below
    the end leaves the state as it is (never less than it served); only the next read, which finds
    the records it applied gone, reads the topic again."""
    log = EmbeddedLog(tmp_path / "log")
    await log.start()
    try:
        racing = _RecreatedWhileReading(log)
        store, writer = RegistryTopic(racing, "_schemas"), RegistryTopic(log, "_schemas")  # two replicas
        for schema_id, name in enumerate(("a", "b"), 1):
            await store.append([put(name, schema_id)])
        await writer.catch_up()
        await writer.append([put("c", 3)])
        racing.armed = True  # the end reads 3, then the topic holds one record
        assert (await store.catch_up()).subjects() == ["a", "b"]  # the fetch at 2 came back empty
        assert (await store.catch_up()).subjects() == ["other"]  # the records applied are gone
    finally:
        await log.stop()


async def test_brokergates_client_names_a_subject_holding_a_slash(gateway: RunningGateway) -> None:
    """``service.client`` sends the ``/`` of a subject as ``%2F``, which the registry reads back."""

    def calls() -> tuple[int, list[str], dict[str, Any], list[int]]:
        with GatewayClient(gateway.url) as client:
            schema = Schema(SchemaType.AVRO, record("Slashed", "x"))
            schema_id = client.register_schema("team/orders-value", schema)
            subjects = client.subjects()
            found = client.lookup_schema("team/orders-value", schema)
            return schema_id, subjects, found, client.delete_subject("team/orders-value")

    schema_id, subjects, found, deleted = await asyncio.to_thread(calls)
    assert subjects == ["team/orders-value"]
    assert (found["id"], found["subject"], found["version"]) == (schema_id, "team/orders-value", 1)
    assert deleted == [1]
