"""``brokergate users`` and ``serve --auth basic``, as an operator runs them."""

from __future__ import annotations

import subprocess
import sys

import httpx

from deploy.local.process import free_port
from tests.e2e.gateway_process import GatewayProcess


def users(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service", "users", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_users_then_an_authenticated_gateway(tmp_path):
    data = tmp_path / "data"
    added = users("add", "alice", "--data-dir", str(data), "--password-stdin", stdin="her password\n")
    assert added.returncode == 0 and added.stdout.strip() == "added alice", added.stderr
    assert users("list", "--data-dir", str(data)).stdout.split() == ["alice"]
    missing = users("remove", "bob", "--data-dir", str(data))
    assert missing.returncode == 2 and "no user 'bob'" in missing.stderr
    bad = users("add", "a:b", "--data-dir", str(data), "--password-stdin", stdin="pw\n")
    assert bad.returncode == 2 and "':'" in bad.stderr
    gw = GatewayProcess(data, "--auth", "basic").start()
    try:
        assert httpx.get(f"{gw.url}/topics").status_code == 401
        assert httpx.get(f"{gw.url}/topics", auth=("alice", "her password")).status_code == 200
    finally:
        gw.stop()


def test_a_malformed_users_file_stops_the_start_in_one_line(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "users").write_text("alice:plaintext\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "service",
            "serve",
            "--data-dir",
            str(data),
            "--auth",
            "basic",
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("brokergate: error:") and ":1:" in result.stderr
