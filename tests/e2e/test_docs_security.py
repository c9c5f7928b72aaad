"""The commands of docs/security.md run as written: the two-teams walk-through, users managed
with ``brokergate users``, a gateway signing clients in with JWTs and one with client certificates."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import trustme

from deploy.local.process import free_port
from tests.e2e.docs_blocks import at, claim, shell_env
from tests.e2e.gateway_process import GatewayProcess
from tests.oidc import IdentityProvider


def test_security_walkthrough(tmp_path):
    """Users added, the gateway served as the page says, ACLs granted with the CLI, then one
    team produces and consumes while the other is refused and an anonymous client is not served."""
    with claim("docs/security.md", "A walk-through: two teams, one gateway") as section:
        setup, *rest = section.texts()
    env = shell_env()
    commands = setup.strip().splitlines()
    serve = next(line for line in commands if line.startswith("brokergate serve"))
    users = "set -euo pipefail\n" + "\n".join(line for line in commands if line != serve)
    subprocess.run(["bash", "-c", users], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=60)
    gw = GatewayProcess(tmp_path / "data", *shlex.split(serve)[2:]).start()
    try:
        script = "set -euo pipefail\n" + at("\n".join(rest), gw.url)
        env["BROKERGATE_URL"] = gw.url
        result = subprocess.run(
            ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr + gw.output()
        out = result.stdout
        for line in re.findall(r"^# ((?:GROUP|TOPIC) .*)$", rest[0], re.M):  # the table, as shown
            assert line.strip() in out, out
        assert re.search(r'"offsets":\[\{"partition":1,"offset":0,', out)  # alice produced
        assert '"key":"inv-1","value":{"amount":120}' in out  # and consumed in her team's group
        # curl prints no newline: bob's refusal, bob's empty listing and the anonymous 401 follow
        denied = "\"Not authorized: User:bob may not WRITE topic 'payments.invoices'.\"}"
        unauthenticated = (
            '{"error_code":40101,"message":"Authentication is required: send HTTP Basic credentials."}'
        )
        assert denied + "[]" + unauthenticated in out
    finally:
        gw.stop()


def joined(block: str) -> list[str]:
    """The block's commands, continuation lines joined, comments and blank lines left out."""
    return [
        line for line in block.replace("\\\n", " ").splitlines() if line.strip() and not line.startswith("#")
    ]


def serve_then(block: str, cwd: Path, env: dict[str, str], fix: dict[str, str]) -> str:
    """Start the block's ``brokergate serve`` (on a free port, with ``fix`` applied to its text),
    then run the rest of it, again until the server answers; what the rest printed."""
    port = free_port()
    fix = {"localhost:8082": f"127.0.0.1:{port}", ":8082/": f":{port}/", **fix}
    for old, new in fix.items():
        block = block.replace(old, new.replace("{port}", str(port)))
    commands = joined(block)
    serve = next(line for line in commands if "brokergate serve" in line)
    rest = "set -euo pipefail\n" + "\n".join(line for line in commands if line != serve)
    server = subprocess.Popen(
        ["bash", "-c", serve.replace("brokergate serve", f"brokergate serve --host 127.0.0.1 --port {port}")],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            result = subprocess.run(
                ["bash", "-c", rest], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
            )
            if result.returncode == 0:
                return result.stdout
            # curl's 7: the server does not listen yet
            assert result.returncode == 7 and server.poll() is None and time.monotonic() < deadline, (
                result.stderr
            )
            time.sleep(0.3)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        _, errors = server.communicate(timeout=30)
        assert server.returncode in (0, -signal.SIGTERM), errors  # it stops as SIGTERM asks


def test_security_authentication(tmp_path):
    """``users add`` asks twice and stores the user, ``list`` shows it and ``remove`` takes it
    away; a JWT of the provider is accepted; a client certificate of the clients' CA is too."""
    with claim("docs/security.md", "Authentication") as section:
        users, tokens, certificates = section.texts()
    env = shell_env()
    added = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + users],
        cwd=tmp_path,
        env=env,
        input="alice-pw\nalice-pw\n",  # no terminal: the two prompts read stdin
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    assert added.returncode == 0, added.stderr
    assert "alice" in added.stdout
    assert "alice" not in (tmp_path / "data" / "users").read_text()  # removed again

    with IdentityProvider() as provider:
        provider.add_key("k1")
        token_env = {**env, "TOKEN": provider.token("alice")}
        fix = {"https://id.example.com/realms/platform": provider.issuer}
        (tmp_path / "jwt").mkdir()
        assert serve_then(tokens, tmp_path / "jwt", token_env, fix) == "[]"

    ca = trustme.CA()
    files = tmp_path / "tls"
    files.mkdir()
    ca.cert_pem.write_to_path(str(files / "ca.pem"))
    ca.cert_pem.write_to_path(str(files / "clients-ca.pem"))
    server = ca.issue_cert("gateway.example.com")
    server.cert_chain_pems[0].write_to_path(str(files / "gateway.pem"))
    server.private_key_pem.write_to_path(str(files / "gateway.key"))
    alice = ca.issue_cert("alice.example.com", common_name="alice")
    alice.cert_chain_pems[0].write_to_path(str(files / "alice.pem"))
    alice.private_key_pem.write_to_path(str(files / "alice.key"))
    # the page's host name, pointed at the gateway the test started
    resolve = {"curl ": "curl --resolve gateway.example.com:{port}:127.0.0.1 "}
    assert serve_then(certificates, files, env, resolve) == "[]"
