"""The schema registry, indexed by Confluent's Schema Registry API reference: every endpoint, in
the reference's order, with where it is tested or why it is not served.

``INDEX`` is the reference (the ``@Path`` resources of Confluent's registry: ``SchemasResource``,
``SubjectsResource``, ``SubjectVersionsResource``, ``ModeResource``, ``ConfigResource``,
``CompatibilityResource``, ``ContextsResource``, ``ServerMetadataResource``, ``RootResource``,
then ``AssociationsResource`` and the DEK registry's ``DekRegistryResource``), one ``Endpoint``
a row: the tests that prove the gateway's answers to it (``module::test``, this module's or the
other registry test modules'), its query parameters the gateway does not serve, and for an
endpoint not served the reason (the gateway answers it with the registry's 404 or 405). Two
tests keep the index whole: every registry route of the app is in it, and every row has a test
that exists or a reason. docs/schemas.md (the registry) and docs/api.md (the REST Proxy) list the
differences, each with the test that proves the gateway's answer; the last test here proves each
test they name exists.

The sections below, one per endpoint of Confluent's, test the parameters and error codes the
other modules do not: status and ``error_code`` always, the message where Confluent's clients
match it; then what is served otherwise than Confluent's. Each test starts a real gateway
(``gateway``; ``registry`` and the helpers are test_registry_conformance's) and speaks HTTP to
``/schema-registry``.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
from confluent_kafka.schema_registry import AsyncSchemaRegistryClient

from service.api.access import route_keys
from service.server.app import create_app
from service.settings import Settings
from tests.conftest import RunningGateway
from tests.integration import test_registry_conformance as conformance
from tests.integration.test_registry_conformance import SR, V1, Registry, error, record

registry = conformance.registry  # the fixture: a Registry over the gateway's client

HERE: Final = "test_registry_api_reference"
BASICS: Final = "test_schema_registry"
CONFORMANCE: Final = "test_registry_conformance"
PROTOBUF: Final = "test_registry_protobuf"
JSON_SCHEMA: Final = "test_registry_json_schema"
# the reason shared by the data contracts' endpoints and parameters
CONTRACTS: Final = (
    "data contracts (metadata, rule sets, tags, associations, encryption keys) are Confluent "
    "Platform's and Cloud's; the registry keeps none (docs/schemas.md)"
)
CONTEXTS: Final = "the registry has one context, the default ('.'); no tenants or other contexts"


@dataclass(frozen=True)
class Endpoint:
    """A row of Confluent's API reference: ``METHOD /path`` as its resources declare it."""

    route: str
    tested: tuple[str, ...] = ()  # "module::test" (modules of tests/integration)
    not_served: str = ""  # why the gateway does not serve it
    params_not_served: dict[str, str] = field(default_factory=dict)  # query parameter: why

    def check(self) -> None:
        """The row has a test that exists, or says why the gateway does not serve it."""
        assert self.tested or self.not_served, f"{self.route}: neither a test nor a reason"
        for where in self.tested:
            module, test = where.split("::")
            found = getattr(importlib.import_module(f"tests.integration.{module}"), test, None)
            assert callable(found), f"{self.route}: no test {where}"


INDEX: Final[tuple[Endpoint, ...]] = (
    # --- schemas (SchemasResource)
    Endpoint(
        "GET /schemas",
        (f"{CONFORMANCE}::test_get_schemas_with_its_filters",),
        params_not_served={
            "aliases": CONTEXTS,
            "ruleType": CONTRACTS,
            "resourceType": CONTRACTS,
            "associationType": CONTRACTS,
            "lifecycle": CONTRACTS,
        },
    ),
    Endpoint(
        "GET /schemas/ids/{id}",
        (
            f"{BASICS}::test_register_then_read_it_back_every_way",
            f"{CONFORMANCE}::test_schema_text_is_avros_compact_print",
            f"{CONFORMANCE}::test_error_messages_are_confluents",
            f"{PROTOBUF}::test_format_serialized_answers_the_descriptor_on_every_route",
            f"{PROTOBUF}::test_other_formats_answer_the_text_as_confluent_does",
        ),
        params_not_served={
            "referenceFormat": "references are answered as registered",
            "findTags": CONTRACTS,
            "fetchMaxId": "ids are not answered with the registry's highest",
        },
    ),
    Endpoint(
        "GET /schemas/ids/{id}/subjects",
        (
            f"{BASICS}::test_one_schema_has_one_id_in_every_subject_whatever_its_spelling",
            f"{HERE}::test_subjects_of_an_id",
        ),
        params_not_served={"subject": CONTEXTS},
    ),
    Endpoint(
        "GET /schemas/ids/{id}/versions",
        (f"{BASICS}::test_register_then_read_it_back_every_way", f"{HERE}::test_versions_of_an_id"),
        params_not_served={"subject": CONTEXTS},
    ),
    Endpoint(
        "GET /schemas/ids/{id}/schema",
        (f"{BASICS}::test_register_then_read_it_back_every_way", f"{HERE}::test_text_of_an_id"),
        params_not_served={"subject": CONTEXTS},
    ),
    Endpoint("GET /schemas/guids/{guid}", not_served=CONTRACTS),
    Endpoint("GET /schemas/guids/{guid}/ids", not_served=CONTRACTS),
    Endpoint("GET /schemas/types", (f"{BASICS}::test_register_then_read_it_back_every_way",)),
    # --- subjects (SubjectsResource)
    Endpoint(
        "POST /subjects/{subject}",
        (
            f"{BASICS}::test_register_then_read_it_back_every_way",
            f"{CONFORMANCE}::test_normalize_stores_and_returns_the_normalized_text",
            f"{CONFORMANCE}::test_a_name_on_a_primitive_is_no_part_of_it",
            f"{HERE}::test_lookup",
        ),
    ),
    Endpoint("GET /subjects/{subject}/metadata", not_served=CONTRACTS),
    Endpoint("GET /subjects", (f"{BASICS}::test_soft_then_hard_delete", f"{HERE}::test_subjects")),
    Endpoint(
        "DELETE /subjects/{subject}",
        (f"{BASICS}::test_soft_then_hard_delete", f"{CONFORMANCE}::test_error_messages_are_confluents"),
    ),
    # --- subject versions (SubjectVersionsResource)
    Endpoint(
        "GET /subjects/{subject}/versions/{version}",
        (f"{BASICS}::test_register_then_read_it_back_every_way", f"{BASICS}::test_soft_then_hard_delete"),
        params_not_served={"referenceFormat": "references are answered as registered", "findTags": CONTRACTS},
    ),
    Endpoint(
        "GET /subjects/{subject}/versions/{version}/schema",
        (f"{BASICS}::test_register_then_read_it_back_every_way", f"{HERE}::test_version_text"),
    ),
    Endpoint(
        "GET /subjects/{subject}/versions/{version}/referencedby",
        (f"{BASICS}::test_references", f"{HERE}::test_referenced_by"),
    ),
    Endpoint(
        "GET /subjects/{subject}/versions",
        (f"{BASICS}::test_soft_then_hard_delete", f"{HERE}::test_versions"),
        params_not_served={"deletedAsNegative": "soft-deleted versions are listed with ?deleted=true"},
    ),
    Endpoint(
        "POST /subjects/{subject}/versions",
        (
            f"{BASICS}::test_register_then_read_it_back_every_way",
            f"{BASICS}::test_bad_requests_get_confluent_codes",
            f"{BASICS}::test_compatibility_per_level",
            f"{CONFORMANCE}::test_a_body_in_the_charset_it_names_is_read",
        ),
        params_not_served={
            "format": "a schema is registered as sent (Protobuf: text or a base64 descriptor)",
            "force": "no IMPORT mode: a schema's id is always the registry's",
        },
    ),
    Endpoint(
        "DELETE /subjects/{subject}/versions/{version}",
        (f"{BASICS}::test_soft_then_hard_delete", f"{CONFORMANCE}::test_error_messages_are_confluents"),
    ),
    Endpoint("POST /subjects/{subject}/versions/{version}/tags", not_served=CONTRACTS),
    # --- mode (ModeResource)
    Endpoint(
        "PUT /mode/{subject}",
        (f"{BASICS}::test_read_only_mode_refuses_writes", f"{HERE}::test_put_subject_mode"),
        params_not_served={"force": "no IMPORT mode, which ?force lets a registry with schemas enter"},
    ),
    Endpoint("GET /mode/{subject}", (f"{BASICS}::test_read_only_mode_refuses_writes",)),
    Endpoint(
        "PUT /mode",
        (f"{BASICS}::test_read_only_mode_refuses_writes", f"{HERE}::test_put_mode"),
        params_not_served={"force": "no IMPORT mode, which ?force lets a registry with schemas enter"},
    ),
    Endpoint("GET /mode", (f"{BASICS}::test_read_only_mode_refuses_writes", f"{HERE}::test_get_mode")),
    Endpoint(
        "DELETE /mode",
        (f"{HERE}::test_what_is_not_served_is_the_registrys_404_or_405",),
        not_served="the global mode is set back with PUT /mode (READWRITE); no recursive delete",
    ),
    Endpoint(
        "DELETE /mode/{subject}",
        (f"{BASICS}::test_read_only_mode_refuses_writes",),
        params_not_served={"recursive": CONTEXTS},
    ),
    # --- config (ConfigResource)
    Endpoint(
        "PUT /config/{subject}",
        (f"{BASICS}::test_compatibility_per_level", f"{HERE}::test_put_subject_config"),
    ),
    Endpoint("GET /config/{subject}", (f"{BASICS}::test_config",)),
    Endpoint("PUT /config", (f"{BASICS}::test_config",)),
    Endpoint("GET /config", (f"{BASICS}::test_config", f"{HERE}::test_get_config")),
    Endpoint("DELETE /config", (f"{BASICS}::test_config",)),
    Endpoint("DELETE /config/{subject}", (f"{BASICS}::test_config",)),
    # --- compatibility (CompatibilityResource)
    Endpoint(
        "POST /compatibility/subjects/{subject}/versions/{version}",
        (f"{BASICS}::test_compatibility_per_level", f"{HERE}::test_compatibility"),
    ),
    Endpoint(
        "POST /compatibility/subjects/{subject}/versions",
        (
            f"{BASICS}::test_transitive_levels_compare_with_every_version",
            f"{JSON_SCHEMA}::test_compatibility_follows_confluents_rules_and_names_them",
        ),
    ),
    # --- contexts (ContextsResource)
    Endpoint("GET /contexts", (f"{HERE}::test_contexts",)),
    Endpoint("DELETE /contexts/{context}", not_served=CONTEXTS),
    # Confluent's ContextFilter serves every route under /contexts/{context}/ in that context
    Endpoint("GET /contexts/{context}/subjects", not_served=CONTEXTS),
    # --- server metadata (ServerMetadataResource)
    Endpoint("GET /v1/metadata/id", (f"{HERE}::test_cluster_id",)),
    Endpoint("GET /v1/metadata/version", (f"{HERE}::test_server_version",)),
    Endpoint("GET /v1/metadata/deployment", (f"{HERE}::test_deployment",)),
    # --- root (RootResource)
    Endpoint("GET /", (f"{BASICS}::test_register_then_read_it_back_every_way",)),
    Endpoint(
        "POST /",
        (f"{HERE}::test_what_is_not_served_is_the_registrys_404_or_405",),
        not_served="a no-op Confluent keeps for its own server tests",
    ),
    # --- associations (AssociationsResource) and the DEK registry (DekRegistryResource)
    Endpoint("GET /associations/subjects/{subject}", not_served=CONTRACTS),
    Endpoint("GET /associations/resources/{resourceNamespace}/{resourceName}", not_served=CONTRACTS),
    Endpoint("GET /associations/resources/{resourceId}", not_served=CONTRACTS),
    Endpoint("POST /associations", not_served=CONTRACTS),
    Endpoint("PUT /associations/resources/{resourceId}", not_served=CONTRACTS),
    Endpoint("POST /associations:batchGet", not_served=CONTRACTS),
    Endpoint("POST /associations:batchMutate", not_served=CONTRACTS),
    Endpoint("DELETE /associations/resources/{resourceId}", not_served=CONTRACTS),
    Endpoint("GET /dek-registry/v1/keks", not_served=CONTRACTS),
    Endpoint("POST /dek-registry/v1/keks", not_served=CONTRACTS),
    Endpoint("GET /dek-registry/v1/keks/{name}", not_served=CONTRACTS),
    Endpoint("PUT /dek-registry/v1/keks/{name}", not_served=CONTRACTS),
    Endpoint("DELETE /dek-registry/v1/keks/{name}", not_served=CONTRACTS),
    Endpoint("POST /dek-registry/v1/keks/{name}/test", not_served=CONTRACTS),
    Endpoint("POST /dek-registry/v1/keks/{name}/undelete", not_served=CONTRACTS),
    Endpoint("GET /dek-registry/v1/keks/{name}/deks", not_served=CONTRACTS),
    Endpoint("POST /dek-registry/v1/keks/{name}/deks", not_served=CONTRACTS),
    Endpoint("GET /dek-registry/v1/keks/{name}/deks/{subject}", not_served=CONTRACTS),
    Endpoint("POST /dek-registry/v1/keks/{name}/deks/{subject}", not_served=CONTRACTS),
    Endpoint("DELETE /dek-registry/v1/keks/{name}/deks/{subject}", not_served=CONTRACTS),
    Endpoint("POST /dek-registry/v1/keks/{name}/deks/{subject}/undelete", not_served=CONTRACTS),
    Endpoint("GET /dek-registry/v1/keks/{name}/deks/{subject}/versions", not_served=CONTRACTS),
    Endpoint("GET /dek-registry/v1/keks/{name}/deks/{subject}/versions/{version}", not_served=CONTRACTS),
    Endpoint("DELETE /dek-registry/v1/keks/{name}/deks/{subject}/versions/{version}", not_served=CONTRACTS),
    Endpoint(
        "POST /dek-registry/v1/keks/{name}/deks/{subject}/versions/{version}/undelete", not_served=CONTRACTS
    ),
)
# Confluent Platform's schema linking (exporters) is not in Confluent's public registry: not indexed.


# --- the index itself ---------------------------------------------------------------------------


def registry_routes() -> list[str]:
    """``METHOD /path`` of every route the app serves under the registry's prefix."""
    app = create_app(Settings())
    keys = [key for route in app.routes for key in route_keys(route)]
    return [f"{k.split()[0]} {k.split()[1].removeprefix(SR) or '/'}" for k in keys if f" {SR}/" in k]


def test_every_registry_route_is_an_endpoint_of_the_index() -> None:
    named = {e.route for e in INDEX}
    assert len(named) == len(INDEX), "an endpoint is named twice"
    served = registry_routes()
    assert served, "no registry route found"
    assert not [r for r in served if r not in named], "routes the index does not name"
    assert not [e.route for e in INDEX if e.route in served and e.not_served], "served, yet 'not served'"


def test_every_endpoint_has_a_test_or_a_reason() -> None:
    for endpoint in INDEX:
        endpoint.check()


@pytest.mark.parametrize(
    "endpoint", [e for e in INDEX if e.not_served], ids=lambda e: e.route if isinstance(e, Endpoint) else ""
)
async def test_what_is_not_served_is_the_registrys_404_or_405(
    gateway: RunningGateway, endpoint: Endpoint
) -> None:
    """A route of Confluent's the gateway does not serve gets the registry's error shape, nothing done."""
    method, path = endpoint.route.split()
    concrete = re.sub(r"\{[^}]+\}", "1", path)
    r = await gateway.client.request(method, SR + concrete, json={} if method in ("POST", "PUT") else None)
    assert (r.status_code, r.headers["content-type"]) in ((404, V1), (405, V1)), r.text
    assert r.json() == {
        "error_code": r.status_code,
        "message": "HTTP 404 Not Found" if r.status_code == 404 else "HTTP 405 Method Not Allowed",
    }


# --- GET /schemas/ids/{id}/subjects (SchemasResource.getSubjects) ------------------------------


async def shared_by_three(registry: Registry) -> int:
    """One schema in subjects a-, b- and c-value, b-value soft-deleted: its id."""
    await registry.client.put(f"{SR}/config", json={"compatibility": "NONE"})
    ids = {await registry.id_of(s, record("Shared", "x")) for s in ("a-value", "b-value", "c-value")}
    assert len(ids) == 1 and (await registry.client.delete(f"{SR}/subjects/b-value")).status_code == 200
    return ids.pop()


async def test_subjects_of_an_id(registry: Registry) -> None:
    subjects = f"/schemas/ids/{await shared_by_three(registry)}/subjects"
    assert (await registry.get(subjects)).json() == ["a-value", "c-value"]
    assert (await registry.get(subjects, deleted="true")).json() == ["a-value", "b-value", "c-value"]
    assert (await registry.get(subjects, deleted="true", offset=1, limit=1)).json() == ["b-value"]
    # an id no version holds: Confluent's 40403 (its message here: "Schema not found")
    error(await registry.get("/schemas/ids/99/subjects"), 404, 40403)
    # an id that is no integer: Jersey finds no resource (404)
    error(await registry.get("/schemas/ids/one/subjects"), 404, 404)


# --- GET /schemas/ids/{id}/versions (SchemasResource.getVersions) ------------------------------


async def test_versions_of_an_id(registry: Registry) -> None:
    versions = f"/schemas/ids/{await shared_by_three(registry)}/versions"
    a, b, c = ({"subject": f"{s}-value", "version": 1} for s in "abc")
    assert (await registry.get(versions)).json() == [a, c]
    assert (await registry.get(versions, deleted="true")).json() == [a, b, c]
    assert (await registry.get(versions, deleted="true", offset=2)).json() == [c]
    assert (await registry.get(versions, limit=1)).json() == [a]
    error(await registry.get("/schemas/ids/99/versions"), 404, 40403)
    error(await registry.get("/schemas/ids/one/versions"), 404, 404)


# --- GET /schemas/ids/{id}/schema (SchemasResource.getSchemaOnly) ------------------------------


async def test_text_of_an_id(registry: Registry) -> None:
    schema_id = await shared_by_three(registry)
    assert (await registry.get(f"/schemas/ids/{schema_id}/schema")).text == record("Shared", "x")
    assert error(await registry.get("/schemas/ids/99/schema"), 404, 40403) == "Schema 99 not found"


# --- POST /subjects/{subject} (SubjectsResource.lookUpSchemaUnderSubject) ----------------------


async def test_lookup(registry: Registry) -> None:
    """``deleted`` finds a soft-deleted version too; without it, such a version is not found."""
    text = record("Gone", "x")
    schema_id = await registry.id_of("gone-value", text)
    assert (await registry.client.delete(f"{SR}/subjects/gone-value/versions/1")).status_code == 200
    r = await registry.client.post(f"{SR}/subjects/gone-value", json={"schema": text})
    error(r, 404, 40401)
    r = await registry.client.post(
        f"{SR}/subjects/gone-value", params={"deleted": "true"}, json={"schema": text}
    )
    assert (r.status_code, r.json()["id"], r.json()["version"]) == (200, schema_id, 1), r.text
    error(await registry.client.post(f"{SR}/subjects/gone-value", json={"schema": "{oops"}), 422, 42201)
    error(await registry.client.post(f"{SR}/subjects/gone-value", json={}), 422, 42201)


# --- GET /subjects (SubjectsResource.list) -----------------------------------------------------


async def test_subjects(registry: Registry) -> None:
    for subject in ("a-key", "a-value", "b-value", "c-value"):
        await registry.id_of(subject, record("S", "x"))
    assert (await registry.client.delete(f"{SR}/subjects/b-value")).status_code == 200
    assert (await registry.get("/subjects")).json() == ["a-key", "a-value", "c-value"]
    assert (await registry.get("/subjects", subjectPrefix="a-")).json() == ["a-key", "a-value"]
    assert (await registry.get("/subjects", deletedOnly="true")).json() == ["b-value"]
    # both: the deleted only, as Confluent's
    assert (await registry.get("/subjects", deleted="true", deletedOnly="true")).json() == ["b-value"]
    assert (await registry.get("/subjects", deleted="true", offset=1, limit=2)).json() == [
        "a-value",
        "b-value",
    ]
    assert (await registry.get("/subjects", limit=0)).json() == ["a-key", "a-value", "c-value"]


# --- GET /subjects/{subject}/versions/{version}/schema (SubjectVersionsResource.getSchemaOnly) --


async def test_version_text(registry: Registry) -> None:
    text = record("T", "x")
    await registry.id_of("t", text)
    assert (await registry.get("/subjects/t/versions/latest/schema")).text == text
    assert (
        error(await registry.get("/subjects/nope/versions/1/schema"), 404, 40401)
        == "Subject 'nope' not found."
    )
    assert error(await registry.get("/subjects/t/versions/2/schema"), 404, 40402) == "Version 2 not found."
    error(await registry.get("/subjects/t/versions/zero/schema"), 422, 42202)
    await registry.client.put(f"{SR}/config/t", json={"compatibility": "NONE"})
    await registry.id_of("t", record("T2", "y"))
    assert (await registry.client.delete(f"{SR}/subjects/t/versions/1")).status_code == 200
    error(await registry.get("/subjects/t/versions/1/schema"), 404, 40402)
    assert (await registry.get("/subjects/t/versions/1/schema", deleted="true")).text == text


# --- GET /subjects/{subject}/versions/{version}/referencedby (SubjectVersionsResource) ---------


async def test_referenced_by(registry: Registry) -> None:
    await registry.id_of("base", record("Base", "x"))
    ref = [{"name": "Base", "subject": "base", "version": 1}]
    referrers = [
        await registry.id_of(f"r{i}", record(f"R{i}", "x").replace('"string"}]', '"Base"}]'), references=ref)
        for i in range(3)
    ]
    path = "/subjects/base/versions/1/referencedby"
    assert (await registry.get(path)).json() == referrers
    assert (await registry.get(path, offset=1, limit=1)).json() == referrers[1:2]
    error(await registry.get("/subjects/nope/versions/1/referencedby"), 404, 40401)
    error(await registry.get("/subjects/base/versions/2/referencedby"), 404, 40402)
    error(await registry.get("/subjects/base/versions/0/referencedby"), 422, 42202)


# --- GET /subjects/{subject}/versions (SubjectVersionsResource.listVersions) -------------------


async def test_versions(registry: Registry) -> None:
    await registry.client.put(f"{SR}/config", json={"compatibility": "NONE"})
    for i in range(4):
        await registry.id_of("s", record(f"V{i}", "x"))
    assert (await registry.client.delete(f"{SR}/subjects/s/versions/2")).status_code == 200
    assert (await registry.get("/subjects/s/versions")).json() == [1, 3, 4]
    assert (await registry.get("/subjects/s/versions", offset=1, limit=1)).json() == [3]
    assert (await registry.get("/subjects/s/versions", deleted="true", offset=1)).json() == [2, 3, 4]
    assert (await registry.get("/subjects/s/versions", deleted="true", deletedOnly="true")).json() == [2]
    assert error(await registry.get("/subjects/nope/versions"), 404, 40401) == "Subject 'nope' not found."


# --- PUT /mode/{subject} (ModeResource.updateMode) ---------------------------------------------


async def test_put_subject_mode(registry: Registry) -> None:
    c = registry.client
    message = error(await c.put(f"{SR}/mode/s", json={"mode": "IMPORT"}), 422, 42204)
    assert "READWRITE and READONLY" in message
    error(await c.put(f"{SR}/mode/s", json={"mode": "NOPE"}), 422, 42204)
    assert (await c.put(f"{SR}/mode/s", json={"mode": "readonly"})).json() == {"mode": "READONLY"}
    assert (await registry.get("/mode/s")).json() == {"mode": "READONLY"}


# --- PUT /mode (ModeResource.updateTopLevelMode) -----------------------------------------------


async def test_put_mode(registry: Registry) -> None:
    c = registry.client
    error(await c.put(f"{SR}/mode", json={"nomode": 1}), 422, 42204)
    error(await c.put(f"{SR}/mode", content=b"{oops", headers={"Content-Type": V1}), 400, 400)
    assert (await c.put(f"{SR}/mode", json={"mode": "READONLY"})).json() == {"mode": "READONLY"}


# --- GET /mode (ModeResource.getTopLevelMode) --------------------------------------------------


async def test_get_mode(registry: Registry) -> None:
    assert (await registry.get("/mode", defaultToGlobal="true")).json() == {"mode": "READWRITE"}


# --- PUT /config/{subject} (ConfigResource.updateSubjectLevelConfig) ---------------------------


async def test_put_subject_config(registry: Registry) -> None:
    c = registry.client
    error(await c.put(f"{SR}/config/s", json={"compatibility": "SOMETIMES"}), 422, 42203)
    error(await c.put(f"{SR}/config/s", content=b"[]", headers={"Content-Type": V1}), 400, 400)
    r = await c.put(f"{SR}/config/s", json={"compatibility": "forward_transitive"})
    assert r.json() == {"compatibility": "FORWARD_TRANSITIVE"}
    assert (await registry.get("/config/s")).json() == {"compatibilityLevel": "FORWARD_TRANSITIVE"}


# --- GET /config (ConfigResource.getTopLevelConfig) --------------------------------------------


async def test_get_config(registry: Registry) -> None:
    assert (await registry.get("/config", defaultToGlobal="true")).json() == {
        "compatibilityLevel": "BACKWARD"
    }


# --- POST /compatibility/subjects/{subject}/versions/{version} (CompatibilityResource) ---------


async def test_compatibility(registry: Registry) -> None:
    c = registry.client
    await registry.id_of("c", record("C", "x"))
    body: dict[str, Any] = {"schema": record("C", "x")}
    url = f"{SR}/compatibility/subjects/c/versions"
    r = await c.post(f"{url}/1", params={"normalize": "true", "verbose": "true"}, json=body)
    assert r.json() == {"is_compatible": True, "messages": []}
    # a version of a subject with none: Confluent's 40402, as for a version the subject lacks
    r = await c.post(f"{SR}/compatibility/subjects/none/versions/1", json=body)
    assert error(r, 404, 40402) == "Version 1 not found."
    error(await c.post(f"{url}/0", json=body), 422, 42202)
    error(await c.post(f"{url}/latest", json={"schema": "{oops"}), 422, 42201)
    error(await c.post(f"{url}/latest", content=b"{oops", headers={"Content-Type": V1}), 400, 400)


# --- GET /contexts (ContextsResource.listContexts) ---------------------------------------------


async def test_contexts(registry: Registry) -> None:
    """The registry has Confluent's default context only: ``.``, filtered and paged as Confluent's."""
    assert (await registry.get("/contexts")).json() == ["."]
    assert (await registry.get("/contexts", contextPrefix=".")).json() == ["."]
    assert (await registry.get("/contexts", contextPrefix=".other")).json() == []
    assert (await registry.get("/contexts", offset=1)).json() == []
    assert (await registry.get("/contexts", limit=1)).json() == ["."]
    r = await registry.client.get(f"{SR}/contexts", headers={"Accept": "application/json"})
    assert (r.status_code, r.headers["content-type"]) == (200, "application/json")


async def test_confluents_client_reads_the_contexts(gateway: RunningGateway) -> None:
    async with AsyncSchemaRegistryClient({"url": gateway.url + SR}) as client:
        assert await client.get_contexts() == ["."]
        assert await client.get_contexts(offset=1) == []


# --- GET /v1/metadata/id (ServerMetadataResource.getClusterId) ---------------------------------


async def test_cluster_id(gateway: RunningGateway, registry: Registry) -> None:
    """The cluster ids in Confluent's scope (its empty ``id`` left out, as its JSON leaves out empty
    values): the Kafka cluster's, as v3 gives it, and the registry's, Confluent's default group."""
    cluster = (await gateway.client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    assert (await registry.get("/v1/metadata/id")).json() == {
        "scope": {
            "path": [],
            "clusters": {"kafka-cluster": cluster, "schema-registry-cluster": "schema-registry"},
        }
    }
    error(await registry.client.get(f"{SR}/v1/metadata/id", headers={"Accept": "text/html"}), 406, 406)


# --- GET /v1/metadata/version (ServerMetadataResource.getSchemaRegistryVersion) ----------------


async def test_server_version(registry: Registry) -> None:
    """brokergate's version; no ``commitId`` (Confluent leaves an empty one out)."""
    version = (await registry.get("/v1/metadata/version")).json()
    assert list(version) == ["version"] and re.fullmatch(r"\d+\.\d+\.\d+.*", version["version"]), version


# --- GET /v1/metadata/deployment (ServerMetadataResource.getSchemaRegistryDeployment) ----------


async def test_deployment(registry: Registry) -> None:
    assert (await registry.get("/v1/metadata/deployment")).json() == {"attributes": []}


# --- what is served otherwise than Confluent's (docs/schemas.md lists each) ---------------------

READS_WITH_PARAMS_NOT_SERVED: Final = [
    (e.route.split()[1], param) for e in INDEX if e.route.startswith("GET ") for param in e.params_not_served
]


@pytest.mark.parametrize(("path", "param"), READS_WITH_PARAMS_NOT_SERVED)
async def test_parameters_not_served_are_ignored(registry: Registry, path: str, param: str) -> None:
    """A read's parameter the gateway does not serve changes nothing in its answer (Confluent's
    query parameters of the writes it does not serve, ``format`` and ``force``, are ignored too)."""
    await registry.id_of("s", record("S", "x"))
    concrete = path.replace("{id}", "1").replace("{subject}", "s").replace("{version}", "1")
    plain = await registry.get(concrete)
    assert plain.status_code == 200, plain.text
    given = await registry.get(concrete, **{param: "true"})
    assert (given.status_code, given.json()) == (200, plain.json())


async def test_data_contracts_are_accepted_not_kept(registry: Registry) -> None:
    """``metadata`` and ``ruleSet`` in a registration are taken and left out: the version has neither."""
    metadata = {"properties": {"owner": "team-a"}}
    rules = {"domainRules": [{"name": "r", "kind": "CONDITION", "mode": "WRITE", "type": "CEL", "expr": "1"}]}
    schema_id = await registry.id_of("dc", record("Dc", "x"), metadata=metadata, ruleSet=rules)
    got = (await registry.get("/subjects/dc/versions/1")).json()
    assert got == {"subject": "dc", "version": 1, "id": schema_id, "schema": record("Dc", "x")}
    r = await registry.client.post(
        f"{SR}/subjects/dc", json={"schema": record("Dc", "x"), "metadata": metadata}
    )
    assert (r.status_code, r.json()["id"]) == (200, schema_id)


async def test_avro_aliases_are_sorted_and_float_defaults_decimal(registry: Registry) -> None:
    schema = {
        "type": "record",
        "name": "R",
        "aliases": ["z", "a"],
        "fields": [{"name": "f", "type": "float", "default": 0, "aliases": ["y", "b"]}],
    }
    schema_id = await registry.id_of("al", json.dumps(schema))
    assert (await registry.get(f"/schemas/ids/{schema_id}")).json()["schema"] == (
        '{"type":"record","name":"R","fields":[{"name":"f","type":"float","default":0.0,'
        '"aliases":["b","y"]}],"aliases":["a","z"]}'
    )


async def test_a_json_schemas_key_order_makes_no_other_schema(registry: Registry) -> None:
    """Without ``normalize`` Confluent's registry finds a new schema (and version) here."""
    first = '{"type":"object","properties":{"a":{"type":"string"}}}'
    other = '{"properties":{"a":{"type":"string"}},"type":"object"}'
    schema_id = await registry.id_of("order", first, schemaType="JSON")
    assert await registry.id_of("order", other, schemaType="JSON") == schema_id
    assert (await registry.get("/subjects/order/versions")).json() == [1]


# --- the docs' list of differences ------------------------------------------------------------

DOCS: Final = Path(__file__).resolve().parents[2] / "docs"
TEST_NAMED: Final = re.compile(r"`((?:tests/unit/[\w/]+/)?test_\w+)\.py::(test_\w+)`")


def named_tests(page: str, heading: str) -> list[tuple[str, str]]:
    """The ``file.py::test`` a page's section names (tests/integration's unless a path is given)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    section = section[: section.find("\n## ", 1)] if "\n## " in section[1:] else section
    return TEST_NAMED.findall(section)


@pytest.mark.parametrize(
    ("page", "heading"),
    [("schemas.md", "## Where it differs from Confluent's registry"), ("api.md", "## Where it differs")],
)
def test_the_docs_differences_name_tests_that_exist(page: str, heading: str) -> None:
    named = named_tests(page, heading)
    assert len(named) >= 8, named
    for module, test in named:
        dotted = module.replace("/", ".") if "/" in module else f"tests.integration.{module}"
        assert callable(getattr(importlib.import_module(dotted), test, None)), f"{page}: no {module}::{test}"
