"""The checked-in openapi.yaml is what the app serves, and fuzzing it finds no server error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import yaml

from service.server.openapi import document
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
