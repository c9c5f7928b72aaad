"""`brokergate serve` as a user runs it: flags, environment, one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from service.client import V2, GatewayClient
from tests.e2e.gateway_process import GatewayProcess


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (["--log", "kafka://"], {}, "kafka"),
        (["--coordinator", "zookeeper://127.0.0.1:0"], {}, "coordinator URL"),
        (["--sessions", "redis://127.0.0.1:port/0"], {}, "sessions URL"),
        (["--log", "cassandra"], {}, "log must be"),
        ([], {"BROKERGATE_PORT": "not-a-port"}, "port"),
        ([], {"BROKERGATE_SESSIONS": "memcached://x"}, "sessions must be"),
        (["--tls-cert", "/nonexistent/gateway.pem"], {}, "tls_cert: cannot load the certificate"),
        (["--auth", "mtls"], {}, "auth=mtls needs tls_client_ca"),
        (["--auth", "jwt"], {}, "auth=jwt needs jwt_issuer"),
        (["--auth", "kerberos"], {}, "unknown auth method"),
        ([], {"BROKERGATE_AUTH": "jwt", "BROKERGATE_JWT_ISSUER": "id.example"}, "http(s)://"),
        ([], {"BROKERGATE_JWT_ALGORITHMS": "HS256"}, "jwt_algorithms must be some of"),
        ([], {"BROKERGATE_SCHEMA_REGISTRY_USERNAME": "gw"}, "set, but schema_registry is 'embedded'"),
        ([], {"BROKERGATE_SCHEMA_REGISTRY": "https://gw:pw@registry:8081"}, "not in the URL"),
        (
            [],
            {
                "BROKERGATE_SCHEMA_REGISTRY": "http://registry:8081",
                "BROKERGATE_SCHEMA_REGISTRY_SSL_CAFILE": "/ca",
            },
            "schema_registry is http://; use https://",
        ),
        (
            [],
            {
                "BROKERGATE_SCHEMA_REGISTRY": "https://registry:8081",
                "BROKERGATE_SCHEMA_REGISTRY_USERNAME": "gw",
            },
            "schema_registry_username needs schema_registry_password",
        ),
        (
            [],
            {
                "BROKERGATE_SCHEMA_REGISTRY": "https://registry:8081",
                "BROKERGATE_SCHEMA_REGISTRY_REQUEST_TIMEOUT_MS": "0",
            },
            "schema_registry_request_timeout_ms",
        ),
    ],
)
def test_bad_configuration_fails_in_one_line(tmp_path, args, env, needle):
    result = serve("--data-dir", str(tmp_path / "d"), *args, env=env)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("brokergate: error:") and needle in lines[0]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ["--log", "kafka://127.0.0.1:1"],
            {"BROKERGATE_KAFKA_REQUEST_TIMEOUT_MS": "1000"},
            "Cannot reach the Kafka cluster at 127.0.0.1:1",
        ),
        (
            ["--sessions", "redis://127.0.0.1:1/0"],
            {"BROKERGATE_REDIS_CONNECT_TIMEOUT_MS": "500"},
            "Cannot reach Redis at redis://127.0.0.1:1/0",
        ),
        (
            ["--coordinator", "zookeeper://127.0.0.1:1"],
            {"BROKERGATE_ZOOKEEPER_CONNECT_TIMEOUT_MS": "1000"},
            "Cannot reach ZooKeeper at 127.0.0.1:1",
        ),
    ],
)
def test_an_unreachable_backend_fails_to_start_in_one_line(tmp_path, args, env, message):
    result = serve("--data-dir", str(tmp_path / "d"), *args, env=env)
    assert result.returncode == 3
    assert f"brokergate: cannot start: {message}" in result.stderr
    assert "Traceback" not in result.stderr


def test_flags_and_environment(tmp_path):
    gw = GatewayProcess(
        tmp_path / "data",
        "--advertised-url",
        "http://gw.example:9999",
        env={"BROKERGATE_DEFAULT_PARTITIONS": "4"},
    ).start()
    try:
        with GatewayClient(gw.url) as client:
            client.produce("auto", [{"value": "x"}])
            assert client.topic("auto")["partitions_count"] == 4
            assert client.consumer("g", name="c").instance == "c"
            body = client.request("POST", "/consumers/g", json={"name": "d"}, headers={"Content-Type": V2})
            assert body["base_uri"] == "http://gw.example:9999/consumers/g/instances/d"
    finally:
        gw.stop()
    assert (tmp_path / "data" / "topics" / "auto").is_dir()


def test_second_process_on_the_same_data_dir_is_refused_in_one_line(tmp_path):
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        second = GatewayProcess(tmp_path / "data")
        with pytest.raises(RuntimeError) as failed:
            second.start()
        output = second.output()
        assert "in use by another brokergate process" in output
        assert "Traceback" not in output
        assert "exited" in str(failed.value)
    finally:
        gw.stop()


def test_sigterm_stops_cleanly(tmp_path):
    gw = GatewayProcess(tmp_path / "data").start()
    gw.stop()
    # uvicorn drains, shuts the app down, then re-raises the signal as its exit status
    assert gw.proc is not None and gw.proc.returncode in (0, -15)
    assert (tmp_path / "data" / "topics.clean").exists(), "the log was not closed cleanly"
    assert "Traceback" not in gw.output()
