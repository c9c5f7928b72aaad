"""The checked-in openapi.yaml is what the app serves, and fuzzing it finds no server error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from service.openapi import document
from tests.e2e.gateway_process import GatewayProcess

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


def test_schemathesis_finds_no_server_error(tmp_path):
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        result = subprocess.run(
            [
                str(Path(sys.executable).parent / "schemathesis"),
                "run",
                f"{gw.url}/openapi.json",
                "--checks",
                "not_a_server_error",
                "--phases",
                "examples,coverage,fuzzing",
                "--max-examples",
                "25",
                "--workers",
                "2",
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
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:] + gw.output()[-4000:]
    finally:
        gw.stop()
