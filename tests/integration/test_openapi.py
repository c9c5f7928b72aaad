"""The checked-in openapi.yaml is what the app serves, its answers are the gateway's (media types,
statuses, 401 and 403), and fuzzing it finds no server error."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from service.api.access import RULES
from service.api.auth import ALWAYS_OPEN
from service.security.users import add_user
from service.server.openapi import document
from service.wire.formats import V2
from tests.conftest import running_gateway
from tests.e2e.gateway_process import GatewayProcess
from tests.helpers import BINARY, JSON, b64, cluster_id

ROOT = Path(__file__).resolve().parents[2]


def test_openapi_yaml_equals_the_served_document():
    checked_in = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    assert checked_in == document(), "openapi.yaml is stale: run `make openapi`"


async def test_served_openapi_json_equals_openapi_yaml(client):
    served = (await client.get("/openapi.json")).json()
    assert served == yaml.safe_load((ROOT / "openapi.yaml").read_text())


def test_every_operation_is_documented_for_generators():
    doc = document()
    seen = set()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            assert op.get("operationId"), f"{method} {path} has no operationId"
            assert op["operationId"] not in seen
            seen.add(op["operationId"])
            assert op.get("tags"), f"{method} {path} has no tag"
            codes = set(op["responses"])
            assert codes & {"200", "201", "204"}, f"{method} {path} documents no success"


METHODS = ("get", "put", "post", "delete", "patch")


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if method in METHODS:
                yield path, method, op


def test_every_operation_lists_a_4xx_and_the_refusals_of_authentication_and_authorization():
    for path, method, op in operations(document()):
        codes = set(op["responses"])
        assert any(code.startswith("4") for code in codes), f"{method} {path} lists no 4xx"
        assert "401" in codes, f"{method} {path}"
        error = {V2: {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
        assert op["responses"]["401"]["content"] == error
        key = f"{method.upper()} {path}"
        rule = RULES.get(key) or RULES[f"{key}/"]  # the registry's root is listed without its /
        if rule.needs or rule.named or rule.changes(key):
            assert op["responses"]["403"]["content"] == error, key
        else:
            assert "403" not in codes, key
        if path in ALWAYS_OPEN:
            assert op["security"] == []


def test_optional_fields_have_no_default_a_generator_would_require():
    doc = document()
    schemas = doc["components"]["schemas"]
    for name, schema in schemas.items():
        for prop, value in schema.get("properties", {}).items():
            assert value.get("default", 0) is not None, f"{name}.{prop} has default: null"
    for name in ("CreateConsumerRequest", "SubscriptionRequest", "CreateTopicRequest", "SeekRequest"):
        for prop, value in schemas[name]["properties"].items():
            assert "default" not in value, f"{name}.{prop}"
    assert schemas["CreateConsumerRequest"].get("required", []) == []
    assert schemas["CreateTopicRequest"]["required"] == ["topic_name"]
    assert {"type": "null"} in schemas["SubscriptionRequest"]["properties"]["topic_pattern"]["anyOf"]
    assert "Default: `binary`" in schemas["CreateConsumerRequest"]["properties"]["format"]["description"]


def test_records_are_described_per_format():
    doc = document()
    schemas = doc["components"]["schemas"]
    for base in ("ConsumerRecord", "ShareRecord", "ReadRecords"):
        assert base not in schemas
    for fmt in ("Binary", "String"):
        for part in ("key", "value"):
            assert schemas[f"{fmt}ConsumerRecord"]["properties"][part]["anyOf"][1] == {"type": "null"}
            assert schemas[f"{fmt}ConsumerRecord"]["properties"][part]["anyOf"][0]["type"] == "string"
    poll = doc["paths"]["/consumers/{group}/instances/{instance}/records"]["get"]["responses"]["200"]
    content = poll["content"]
    assert V2 not in content  # the gateway answers in the format's type, never the generic one
    assert content[BINARY]["schema"]["items"] == {"$ref": "#/components/schemas/BinaryConsumerRecord"}
    assert content[JSON]["schema"]["items"] == {"$ref": "#/components/schemas/JsonConsumerRecord"}
    assert "text/event-stream" in content  # the poll answers SSE to Accept: text/event-stream


def test_the_document_names_the_server_and_the_license_of_pyproject():
    doc = document()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert doc["info"]["license"]["identifier"] == project["license"]
    assert doc["servers"] == [{"url": "/", "description": "The gateway serving this document."}]
    assert not [path for path in doc["paths"] if path != "/" and path.endswith("/")]


def documented(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    """The operation of ``doc`` a request for ``path`` is answered by (a literal segment beats a
    parameter, as routing does)."""
    found = []
    for template, ops in doc["paths"].items():
        pattern = re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path) and method.lower() in ops:
            found.append((template.count("{"), ops[method.lower()]))
    assert found, f"{method} {path} is not in the document"
    return min(found, key=lambda f: f[0])[1]


def check_answer(doc: dict[str, Any], r: httpx.Response) -> None:
    """``r``'s status is listed for its operation, with the media type it came in."""
    op = documented(doc, r.request.method, r.request.url.path)
    where = f"{r.request.method} {r.request.url.path} -> {r.status_code}"
    response = op["responses"].get(str(r.status_code))
    assert response is not None, f"{where} is not listed: {r.text[:300]}"
    if r.content:
        served = r.headers["content-type"].split(";")[0].strip()
        assert served in response.get("content", {}), (
            f"{where} in {served}, listed: {list(response['content'])}"
        )


async def test_every_answer_is_listed_with_the_media_type_it_comes_in(client, name):
    doc = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    answers: list[httpx.Response] = []

    async def send(method: str, path: str, **kwargs: Any) -> httpx.Response:
        r = await client.request(method, path, **kwargs)
        answers.append(r)
        return r

    cluster = await cluster_id(client)
    v3 = f"/v3/clusters/{cluster}"
    assert (await send("GET", "/")).json() == {}
    for path in (
        "/healthz",
        "/readyz",
        "/metrics",
        "/brokers",
        "/topics",
        "/v3/clusters",
        v3,
        f"{v3}/brokers",
    ):
        assert (await send("GET", path)).status_code == 200, path
    r = await send("POST", f"{v3}/topics", json={"topic_name": name, "partitions_count": 2})
    assert r.status_code == 201
    for path in ("", "/partitions"):
        assert (await send("GET", f"{v3}/topics/{name}{path}")).status_code == 200
        assert (await send("GET", f"/topics/{name}{path}")).status_code == 200
    await send("GET", f"/topics/{name}/partitions/0")
    await send("GET", f"/topics/{name}/partitions/0/offsets")
    r = await send("PATCH", f"{v3}/topics/{name}", json={"partitions_count": 3})
    assert r.status_code == 200, r.text
    produced = await send(
        "POST",
        f"/topics/{name}",
        json={"records": [{"value": b64("v"), "partition": 0}]},
        headers={"Content-Type": BINARY},
    )
    assert produced.status_code == 200
    await send(
        "POST",
        f"/topics/{name}/partitions/1",
        json={"records": [{"value": 1}]},
        headers={"Content-Type": JSON},
    )
    for fmt in (BINARY, JSON):
        r = await send("GET", f"/topics/{name}/partitions/1/records", headers={"Accept": fmt})
        assert r.status_code == 200 and r.headers["content-type"] == fmt
    group = f"g-{name}"
    for fmt in ("binary", "json", "string"):
        r = await send("POST", f"/consumers/{group}", json={"name": fmt, "format": fmt})
        base = f"/consumers/{group}/instances/{fmt}"
        await send("POST", f"{base}/assignments", json={"partitions": [{"topic": name, "partition": 1}]})
        await send("GET", f"{base}/assignments")
        await send(
            "POST", f"{base}/positions/beginning", json={"partitions": [{"topic": name, "partition": 1}]}
        )
        r = await send("GET", f"{base}/records", params={"timeout": 1000})
        assert r.status_code == 200 and r.headers["content-type"] == f"application/vnd.kafka.{fmt}.v2+json"
        await send("POST", f"{base}/offsets")
        await send("GET", f"{base}/offsets", params={"partitions": f"{name}:1"})
        await send(
            "POST", f"{base}/positions", json={"offsets": [{"topic": name, "partition": 1, "offset": 0}]}
        )
        await send("POST", f"{base}/positions/end", json={"partitions": [{"topic": name, "partition": 1}]})
        await send("GET", f"{base}/subscription")
        await send("DELETE", f"{base}/subscription")
        await send("POST", f"{base}/subscription", json={"topics": [name]})
        await send("DELETE", base)
    for path in ("/consumer-groups", f"/consumer-groups/{group}", f"/consumer-groups/{group}/lags"):
        await send("GET", f"{v3}{path}")
    await send("GET", f"{v3}/consumer-groups/{group}/lag-summary")
    await send("GET", f"{v3}/topics")
    acl = {"resource_type": "TOPIC", "resource_name": name, "pattern_type": "LITERAL"}
    acl |= {"principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"}
    assert (await send("POST", f"{v3}/acls", json=acl)).status_code == 201
    await send("GET", f"{v3}/acls")
    assert (
        await send("DELETE", f"{v3}/acls", params={"resource_type": "TOPIC", "principal": "User:alice"})
    ).status_code == 200
    await send("GET", f"{v3}/share-groups/no-such-group")
    await send("GET", f"{v3}/share-groups")
    # errors: v2, v3 and the registry's
    await send("GET", "/topics/no-such-topic")
    await send("GET", "/brokers", headers={"Accept": "text/html"})
    await send("GET", f"{v3}/topics/no-such-topic")
    await send("POST", f"{v3}/topics", json={"topic_name": "bad name"})
    await send("GET", "/readyz", params={"backend": "nothing"})
    await send("GET", "/schema-registry/schemas/ids/999999")
    # the registry, in each type Accept picks
    subject = f"{name}-value"
    schema = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
    for accept in (None, "application/json", "application/vnd.schemaregistry+json"):
        headers = {"Accept": accept} if accept else {}
        assert (await send("GET", "/schema-registry", headers=headers)).json() == {}
        r = await send(
            "POST", f"/schema-registry/subjects/{subject}/versions", json={"schema": schema}, headers=headers
        )
        assert r.status_code == 200, r.text
        await send("GET", f"/schema-registry/schemas/ids/{r.json()['id']}", headers=headers)
        await send("GET", f"/schema-registry/subjects/{subject}/versions/latest", headers=headers)
        await send("GET", "/schema-registry/subjects", headers=headers)
        await send("GET", "/schema-registry/config", headers=headers)
    await send("DELETE", f"{v3}/topics/{name}")
    assert len(answers) > 80
    for r in answers:
        check_answer(doc, r)


@pytest.fixture
async def secured(tmp_path):
    users = tmp_path / "users"
    add_user(users, "admin", "admin-pw")
    add_user(users, "bob", "bob-pw")
    settings = {"auth": "basic", "users_file": users, "authorize": True, "super_users": "User:admin"}
    async with running_gateway(tmp_path / "data", **settings) as gw:
        yield gw


def _url(path: str) -> str:
    return re.sub(
        r"\{([^/]+?)\}", lambda m: {"version": "1", "partition": "0", "id": "1"}.get(m[1], "x"), path
    )


async def test_every_operation_answers_the_401_and_403_it_lists(secured):
    doc = document()
    async with (
        httpx.AsyncClient(base_url=secured.url) as anonymous,
        httpx.AsyncClient(base_url=secured.url, auth=("bob", "bob-pw")) as bob,
    ):
        for path, method, _ in operations(doc):
            if path == "/metrics" or path in ALWAYS_OPEN:
                wrong = await anonymous.request(method, _url(path), auth=("bob", "wrong"))
            else:
                wrong = await anonymous.request(method, _url(path))
            assert wrong.status_code == 401, (method, path, wrong.text)
            check_answer(doc, wrong)
            key = f"{method.upper()} {path}"
            rule = RULES.get(key) or RULES[f"{key}/"]
            if rule.needs:  # refused before the route, whatever the request holds
                refused = await bob.request(method, _url(path))
            elif rule.changes(key):  # from a page of another site
                refused = await bob.request(method, _url(path), headers={"Sec-Fetch-Site": "cross-site"})
            else:
                continue
            assert refused.status_code == 403, (method, path, refused.text)
            assert refused.json()["error_code"] == 40301
            check_answer(doc, refused)


def _schemathesis(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "schemathesis"),
            *args,
            "run",
            f"{url}/openapi.json",
            "--checks",
            "not_a_server_error",
            "--phases",
            "examples,coverage,fuzzing",
            "--max-examples",
            "25",
            # One worker: hypothesis's lambda-source parsing is not thread-safe on Python 3.11.
            "--workers",
            "1",
            "--request-timeout",
            "20",
            "--suppress-health-check",
            "all",
            "--exclude-path",
            "/metrics",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_schemathesis_finds_no_server_error(tmp_path):
    # Short long-polls so that fuzzed timeouts do not make the run crawl.
    gw = GatewayProcess(tmp_path / "data", env={"BROKERGATE_CONSUMER_MAX_TIMEOUT_MS": "100"}).start()
    try:
        # 1. Everything random, names included.
        result = _schemathesis(gw.url)
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:] + gw.output()[-4000:]

        # 2. Against a real topic and a live consumer instance, so bodies reach the core logic.
        cid = httpx.get(f"{gw.url}/v3/clusters").json()["data"][0]["cluster_id"]
        httpx.post(f"{gw.url}/v3/clusters/{cid}/topics", json={"topic_name": "fuzz", "partitions_count": 2})
        httpx.post(
            f"{gw.url}/topics/fuzz",
            json={"records": [{"value": "eA=="}] * 10},
            headers={"Content-Type": "application/vnd.kafka.binary.v2+json"},
        )
        r = httpx.post(
            f"{gw.url}/consumers/fuzz-group",
            json={"name": "fuzzer", "format": "binary"},
            headers={"Content-Type": "application/vnd.kafka.v2+json"},
        )
        assert r.status_code == 200
        config = tmp_path / "schemathesis.toml"
        config.write_text(
            "[parameters]\n"
            '"path.group" = "fuzz-group"\n'
            '"path.instance" = "fuzzer"\n'
            '"path.topic" = "fuzz"\n'
            f'"path.cluster_id" = "{cid}"\n'
        )
        result = _schemathesis(gw.url, "--config-file", str(config))
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:] + gw.output()[-4000:]
    finally:
        gw.stop()
