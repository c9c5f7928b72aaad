"""JSON Schema in the registry as Confluent serves it, over HTTP on a real gateway: compatibility by
Confluent's rules with their names in the answers, ``$schema`` URLs it does not know read as
draft-07, and the schema text answered in Confluent's canonical form (compact JSON).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.conftest import RunningGateway

SR = "/schema-registry"


async def register(client: httpx.AsyncClient, subject: str, schema: Any, **params: Any) -> httpx.Response:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return await client.post(
        f"{SR}/subjects/{subject}/versions", json={"schema": text, "schemaType": "JSON"}, params=params
    )


async def check(client: httpx.AsyncClient, subject: str, schema: Any) -> dict[str, Any]:
    r = await client.post(
        f"{SR}/compatibility/subjects/{subject}/versions/latest",
        json={"schema": json.dumps(schema), "schemaType": "JSON"},
        params={"verbose": "true"},
    )
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


async def test_compatibility_follows_confluents_rules_and_names_them(gateway: RunningGateway) -> None:
    client = gateway.client
    tags = {"type": "array", "items": {"type": "string"}}
    assert (await register(client, "tags-value", tags)).status_code == 200
    # one schema for every item becomes a schema for the first one: the reader's open content
    # model has an item the writer's data may hold anything at (BACKWARD, the default)
    first_only = {"type": "array", "items": [{"type": "string"}]}
    answer = await check(client, "tags-value", first_only)
    assert answer["is_compatible"] is False
    assert any('errorType:"ITEM_ADDED_TO_OPEN_CONTENT_MODEL"' in m for m in answer["messages"]), answer
    r = await register(client, "tags-value", first_only)
    assert (r.status_code, r.json()["error_code"]) == (409, 409), r.text
    assert "ITEM_ADDED_TO_OPEN_CONTENT_MODEL" in r.json()["message"]
    assert "'#/items/0'" in r.json()["message"]

    # propertyNames is not compared: a reader that adds it is compatible
    person = {"type": "object", "properties": {"name": {"type": "string"}}}
    assert (await register(client, "person-value", person)).status_code == 200
    named = {**person, "propertyNames": {"pattern": "a*"}}
    assert (await check(client, "person-value", named))["is_compatible"] is True
    assert (await register(client, "person-value", named)).json()["id"] > 0


async def test_a_schema_url_the_registry_does_not_know_is_read_as_draft_07(gateway: RunningGateway) -> None:
    client = gateway.client
    schema = {
        "$schema": "https://json.schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"id": {"type": "integer", "exclusiveMinimum": 0}},
    }
    r = await register(client, "orders-value", schema)
    assert r.status_code == 200, r.text
    stored = await client.get(f"{SR}/schemas/ids/{r.json()['id']}")
    assert json.loads(stored.json()["schema"]) == schema


async def test_the_text_is_answered_in_confluents_canonical_form(gateway: RunningGateway) -> None:
    client = gateway.client
    sent = '{\n  "type": "object",\n  "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}\n}'
    compact = '{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}'
    r = await register(client, "text-value", sent)
    assert r.status_code == 200, r.text
    schema_id = r.json()["id"]
    assert (await client.get(f"{SR}/schemas/ids/{schema_id}")).json()["schema"] == compact
    version = (await client.get(f"{SR}/subjects/text-value/versions/1")).json()
    assert version["schema"] == compact
    # a lookup by the text as first sent, or as answered, finds the version
    for text in (sent, compact):
        found = await client.post(f"{SR}/subjects/text-value", json={"schema": text, "schemaType": "JSON"})
        assert (found.status_code, found.json()["id"]) == (200, schema_id), found.text
    # ?normalize=true stores the keys sorted, as Confluent's normalize() does
    r = await register(client, "sorted-value", {"type": "string", "maxLength": 3}, normalize="true")
    stored = (await client.get(f"{SR}/schemas/ids/{r.json()['id']}")).json()["schema"]
    assert stored == '{"maxLength":3,"type":"string"}'
