"""The gateway's AsyncAPI document, judged by the AsyncAPI project's own tools.

A gateway process with topics of each kind: values in Avro (with an Avro key), JSON Schema and
Protobuf, registered through produce, and one without a schema. ``brokergate asyncapi`` writes
the document; ``tests/asyncapi/validate.mjs`` parses it with ``@asyncapi/parser`` (Avro and
Protobuf payloads by AsyncAPI's schema parsers) and generates TypeScript models of its messages
with Modelina. The npm packages are pinned in ``tests/asyncapi/package-lock.json`` and installed
by ``npm ci`` once per session.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e.docs_blocks import claim, run_sh, said, shell_env
from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.test_typescript_client import ENV
from tests.e2e.tool_process import bg, ok

PACKAGE = Path(__file__).resolve().parents[1] / "asyncapi"
AVRO = json.dumps(
    {
        "type": "record",
        "name": "Payment",
        "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "double"}],
    }
)
AVRO_KEY = '{"type":"record","name":"PaymentKey","fields":[{"name":"account","type":"string"}]}'
JSON_SCHEMA = json.dumps(
    {
        "title": "Order",
        "type": "object",
        "properties": {"id": {"type": "string"}, "lines": {"type": "integer"}},
        "required": ["id"],
    }
)
PROTO = 'syntax = "proto3";\nmessage Shipment {\n  string id = 1;\n  int32 grams = 2;\n}\n'


def npm(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["npm", *args], cwd=PACKAGE, env=ENV, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="session")
def asyncapi_tools() -> Path:
    installed = npm("ci")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return PACKAGE / "validate.mjs"


def produce(gw: GatewayProcess, topic: str, fmt: str, body: dict[str, object]) -> None:
    r = httpx.post(
        f"{gw.url}/topics/{topic}",
        json=body,
        headers={"Content-Type": f"application/vnd.kafka.{fmt}.v2+json"},
    )
    assert r.status_code == 200, r.text


def test_the_asyncapi_document_is_valid_to_asyncapis_parser_and_generates_models(
    asyncapi_tools: Path, tmp_path: Path
) -> None:
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        produce(
            gw,
            "payments",
            "avro",
            {
                "key_schema": AVRO_KEY,
                "value_schema": AVRO,
                "records": [{"key": {"account": "a1"}, "value": {"id": "p1", "amount": 2.5}}],
            },
        )
        produce(
            gw, "orders", "jsonschema", {"value_schema": JSON_SCHEMA, "records": [{"value": {"id": "o1"}}]}
        )
        produce(gw, "shipments", "protobuf", {"value_schema": PROTO, "records": [{"value": {"id": "s1"}}]})
        produce(gw, "clicks", "json", {"records": [{"value": {"page": "/"}}]})
        document = tmp_path / "asyncapi.json"
        ok(bg(gw, "asyncapi", "--file", str(document)))
        served = httpx.get(f"{gw.url}/asyncapi.json").json()
        assert json.loads(document.read_text()) == served
        checked = subprocess.run(
            ["node", str(asyncapi_tools), str(document)], env=ENV, capture_output=True, text=True, timeout=120
        )
        assert checked.returncode == 0, checked.stderr
        found = json.loads(checked.stdout)
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()
    assert found["errors"] == [] and found["warnings"] == [], found
    channels = found["channels"]
    assert sorted(channels) == ["clicks", "orders", "payments", "shipments"]  # not the registry's own topic
    assert channels["payments"] == {
        "address": "/topics/payments",
        "payloads": ["object"],
        "bindings": ["kafka", "ws"],
    }
    assert channels["orders"]["payloads"] == ["object"] and channels["clicks"]["payloads"] == [None]
    assert (
        found["operations"]["produce.orders"] == "receive" and found["operations"]["consume.orders"] == "send"
    )
    models = found["models"]
    assert "amount?: number" in models["Payment"] and "id?: string" in models["Payment"]
    # the JSON Schema's and the Protobuf message's fields, in models of their own
    assert any("interface" in text and "lines?: number" in text for text in models.values()), models
    assert any("interface" in text and "grams?: number" in text for text in models.values()), models
    assert served["channels"]["payments"]["bindings"]["kafka"]["partitions"] == 1
    assert "Avro schema of the subject payments-key" in str(served["components"]["messages"]["payments"])


def test_the_pages_asyncapi_commands_run_as_written(tmp_path: Path) -> None:
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        with claim("docs/api.md", "The AsyncAPI document") as section:
            [script] = section.texts()
            printed = run_sh(script, gw.url, tmp_path, shell_env(BROKERGATE_URL=gw.url))
        assert printed.splitlines() == said(script), printed
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()
