"""The gateway's own credentials to Redis: a password, an ACL user, TLS with a client certificate.

Three real redis-servers of this module's own: one with ``requirepass``, one whose only user
is ``alice`` (the default user off), one that speaks only TLS and asks for a client
certificate. With the right credentials a gateway serves consumer instances (and quotas)
through them; with wrong or missing ones ``brokergate serve``, configured through the
environment alone, refuses to start in one line that names Redis and never the password.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import trustme

from deploy.local.process import free_port
from deploy.local.redis_server import RedisServer
from service.adapters.redis import RedisSessions
from service.adapters.redis.security import RedisSecurity
from service.errors import BackendUnavailable
from tests.conftest import start_gateway
from tests.helpers import consumer, create_topic, poll_until, produce, serve_until_exit, subscribe

from .conftest import CONNECT_TIMEOUT_MS, SOCKET_TIMEOUT_MS

PASSWORD = "right-password"
ALICE = ("alice", "alice-secret")


class SecuredRedis(RedisServer):
    """A redis-server with extra directives on its command line, probed with the credentials it
    wants (redis-py's ``Redis`` keyword arguments)."""

    def __init__(
        self, base_dir: Path, directives: list[str], credentials: dict[str, Any], *, port: int | None = None
    ) -> None:
        super().__init__(base_dir, port=port)
        self.directives = directives
        self.credentials = credentials

    def command(self) -> list[str]:
        return [*super().command(), *self.directives]  # later directives win: --port 0 turns TCP off

    def _probe(self, timeout: float) -> None:
        client = redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            **self.credentials,
        )
        try:
            client.ping()
        finally:
            client.close()

    def host_url(self, scheme: str = "redis") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/0"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A CA, Redis's certificate for 127.0.0.1, and the gateway's client certificate and key."""
    base = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    gateway = ca.issue_cert("brokergate")
    files = {
        "ca": base / "ca.pem",
        "server_cert": base / "redis.pem",
        "server_key": base / "redis.key",
        "client_cert": base / "gateway.pem",
        "client_key": base / "gateway.key",
        "other_ca": base / "other-ca.pem",
    }
    ca.cert_pem.write_to_path(str(files["ca"]))
    server.cert_chain_pems[0].write_to_path(str(files["server_cert"]))
    server.private_key_pem.write_to_path(str(files["server_key"]))
    gateway.cert_chain_pems[0].write_to_path(str(files["client_cert"]))
    gateway.private_key_pem.write_to_path(str(files["client_key"]))
    trustme.CA().cert_pem.write_to_path(str(files["other_ca"]))
    return files


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, pki: dict[str, Path]
) -> Iterator[dict[str, SecuredRedis]]:
    base = tmp_path_factory.mktemp("secured-redis")
    tls_port = free_port()
    started = {
        "password": SecuredRedis(base / "password", ["--requirepass", PASSWORD], {"password": PASSWORD}),
        "acl": SecuredRedis(
            base / "acl",
            ["--user", ALICE[0], "on", f">{ALICE[1]}", "~*", "&*", "+@all", "--user", "default", "off"],
            {"username": ALICE[0], "password": ALICE[1]},
        ),
        "tls": SecuredRedis(
            base / "tls",
            [
                *("--port", "0", "--tls-port", str(tls_port)),
                *("--tls-cert-file", str(pki["server_cert"]), "--tls-key-file", str(pki["server_key"])),
                *("--tls-ca-cert-file", str(pki["ca"]), "--tls-auth-clients", "yes"),
            ],
            {
                "ssl": True,
                "ssl_ca_certs": str(pki["ca"]),
                "ssl_certfile": str(pki["client_cert"]),
                "ssl_keyfile": str(pki["client_key"]),
            },
            port=tls_port,
        ),
    }
    for server in started.values():
        server.spawn()
    try:
        for server in started.values():
            server.wait_ready()
        yield started
    finally:
        for server in started.values():
            server.stop()


def _gateway_settings(
    kind: str, servers: dict[str, SecuredRedis], pki: dict[str, Path], tmp_path: Path
) -> dict[str, Any]:
    """Settings that sign in to ``servers[kind]`` rightly, each kind its own way of giving them."""
    server = servers[kind]
    common: dict[str, Any] = {
        "redis_key_prefix": f"cred-{kind}:",
        "redis_connect_timeout_ms": CONNECT_TIMEOUT_MS,
        "redis_socket_timeout_ms": SOCKET_TIMEOUT_MS,
        "quota_client_requests_per_s": 1000,  # the quota store signs in too, or the gateway does not start
    }
    if kind == "password":
        return {**common, "sessions": server.host_url(), "redis_password": PASSWORD}
    if kind == "acl":
        password_file = tmp_path / "redis-password"  # as a mounted Kubernetes Secret
        password_file.write_text(ALICE[1] + "\n")
        return {
            **common,
            "sessions": server.host_url(),
            "redis_username": ALICE[0],
            "redis_password_file": password_file,
        }
    return {
        **common,
        "sessions": server.host_url("rediss"),
        "redis_ssl_cafile": pki["ca"],
        "redis_ssl_certfile": pki["client_cert"],
        "redis_ssl_keyfile": pki["client_key"],
    }


@pytest.mark.parametrize("kind", ["password", "acl", "tls"])
async def test_a_gateway_with_the_right_credentials_serves_consumers(
    kind: str, servers: dict[str, SecuredRedis], pki: dict[str, Path], tmp_path: Path, name: str
) -> None:
    settings = _gateway_settings(kind, servers, pki, tmp_path)
    gw = await start_gateway(tmp_path / "data", **settings)
    try:
        client = gw.client
        await create_topic(client, name, 1)
        base = await consumer(client, f"g-{name}", name="c1")
        await subscribe(client, base, name)
        await produce(client, name, [{"value": "one"}, {"value": "two"}])
        assert [r["value"] for r in await poll_until(client, base, 2)] == ["one", "two"]
    finally:
        await gw.client.aclose()
        await gw.stop()

    # the instance and its positions are in that Redis, under the gateway's prefix
    server = servers[kind]
    direct = redis.Redis(host="127.0.0.1", port=server.port, **server.credentials)
    try:
        assert direct.exists(f"cred-{kind}:instance:g-{name}/c1") == 1
    finally:
        direct.close()


@pytest.mark.parametrize(
    ("kind", "env", "refusal"),
    [
        ("password", {}, "authenticated"),
        ("password", {"BROKERGATE_REDIS_PASSWORD": "wrong-password"}, "invalid username-password pair"),
        ("acl", {"BROKERGATE_REDIS_PASSWORD": ALICE[1]}, "invalid username-password pair"),
        ("acl", {"BROKERGATE_REDIS_USERNAME": "alice", "BROKERGATE_REDIS_PASSWORD": "nope"}, "invalid"),
    ],
    ids=["none", "wrong-password", "no-user", "wrong-user-password"],
)
def test_wrong_or_missing_credentials_stop_the_start_in_one_line(
    kind: str, env: dict[str, str], refusal: str, servers: dict[str, SecuredRedis], tmp_path: Path
) -> None:
    started = time.monotonic()
    env = {
        "BROKERGATE_SESSIONS": servers[kind].host_url(),
        "BROKERGATE_REDIS_CONNECT_TIMEOUT_MS": "5000",
        **env,
    }
    result = serve_until_exit(tmp_path, env)
    assert time.monotonic() - started < 30  # at once, not after the connect timeout
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert f"brokergate: cannot start: Redis at {servers[kind].host_url()} refused the credentials" in line
    assert refusal in line
    assert "wrong-password" not in result.stderr and "nope" not in result.stderr


async def test_tls_refuses_a_server_its_ca_does_not_vouch_for(
    servers: dict[str, SecuredRedis], pki: dict[str, Path]
) -> None:
    url = servers["tls"].host_url("rediss")
    security = RedisSecurity(
        ssl_cafile=pki["other_ca"], ssl_certfile=pki["client_cert"], ssl_keyfile=pki["client_key"]
    )
    sessions = RedisSessions(url, connect_timeout_ms=10_000, security=security)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable) as caught:
        await sessions.start()
    assert time.monotonic() - started < 5  # a certificate does not get better by waiting
    message = str(caught.value)
    assert message.startswith(f"Redis at {url} failed the TLS handshake (") and "certificate" in message


async def test_tls_without_a_client_certificate_is_refused_by_redis(
    servers: dict[str, SecuredRedis], pki: dict[str, Path]
) -> None:
    url = servers["tls"].host_url("rediss")
    sessions = RedisSessions(
        url, connect_timeout_ms=CONNECT_TIMEOUT_MS, security=RedisSecurity(ssl_cafile=pki["ca"])
    )
    with pytest.raises(BackendUnavailable) as caught:
        await sessions.start()
    assert (
        str(caught.value) == f"Redis at {url} failed the TLS handshake (tlsv13 alert certificate required)."
    )
