"""HTTPS and mutual TLS: the gateway serves TLS itself, and a client certificate can be the principal.

Certificates come from test CAs made here (trustme): one signs the gateway's certificate, another
the clients'. Every connection is a real TLS handshake on loopback.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trustme
from websockets.asyncio.client import connect

from service.security.users import add_user
from service.server.app import create_app, server_config
from service.settings import Settings
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import V2, consumer, create_topic, produce, subscribe
from tests.stream_client import receive, socket_url


@pytest.fixture(scope="module")
def server_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def client_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def files(tmp_path: Path, server_ca: trustme.CA, client_ca: trustme.CA) -> dict[str, Path]:
    paths = {name: tmp_path / f"{name}.pem" for name in ("cert", "ca", "client_ca")}
    server_ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(paths["cert"]))
    server_ca.cert_pem.write_to_path(str(paths["ca"]))
    client_ca.cert_pem.write_to_path(str(paths["client_ca"]))
    return paths


def context(ca: Path, client: trustme.LeafCert | None = None) -> ssl.SSLContext:
    """What a client verifies the gateway with, presenting ``client``'s certificate if given."""
    ctx = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        client.configure_cert(ctx)
    return ctx


@pytest.fixture
async def gateways() -> AsyncIterator[list[RunningGateway]]:
    started: list[RunningGateway] = []
    yield started
    for gw in started:
        await gw.client.aclose()
        await gw.stop()


async def test_the_gateway_serves_https_that_a_client_trusting_its_ca_verifies(tmp_path, files, gateways):
    gw = await start_gateway(tmp_path / "data", tls_cert=files["cert"], verify=context(files["ca"]))
    gateways.append(gw)
    assert gw.url.startswith("https://")
    await create_topic(gw.client, "t", 1)
    assert (await gw.client.get("/topics")).json() == ["t"]
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        async with httpx.AsyncClient(verify=True) as stranger:  # the system's CAs only
            await stranger.get(gw.url + "/topics")
    with pytest.raises(httpx.HTTPError):  # plain HTTP to the TLS port gets no answer
        async with httpx.AsyncClient() as plain:
            await plain.get(gw.url.replace("https://", "http://") + "/topics")


async def test_a_client_certificate_is_the_principal_with_auth_mtls(tmp_path, files, client_ca, gateways):
    alice = client_ca.issue_cert("alice@example.com", common_name="alice")
    bob = client_ca.issue_cert("bob@example.com", common_name="bob")
    gw = await start_gateway(
        tmp_path / "data",
        tls_cert=files["cert"],
        tls_client_ca=files["client_ca"],
        auth="mtls",
        authorize=True,
        super_users="User:alice",
        verify=context(files["ca"], alice),
    )
    gateways.append(gw)
    await create_topic(gw.client, "t", 1)  # alice is a super user
    async with httpx.AsyncClient(base_url=gw.url, verify=context(files["ca"], bob)) as as_bob:
        r = await as_bob.get("/topics/t")
        assert r.status_code == 403, r.text  # bob is someone, but may not describe t
        assert r.json()["error_code"] == 40301
    forged = trustme.CA().issue_cert("x", common_name="alice")  # alice's name, another CA
    for stranger in (context(files["ca"]), context(files["ca"], forged)):
        with pytest.raises(httpx.HTTPError):  # no certificate, or one another CA signed: no connection
            async with httpx.AsyncClient(base_url=gw.url, verify=stranger) as client:
                await client.get("/topics")


async def test_the_principal_may_come_from_a_subject_alternative_name(tmp_path, files, client_ca, gateways):
    carol = client_ca.issue_cert("carol@example.com", common_name="ops-laptop-7")
    gw = await start_gateway(
        tmp_path / "data",
        tls_cert=files["cert"],
        tls_client_ca=files["client_ca"],
        auth="mtls",
        tls_principal="email",
        authorize=True,
        super_users="User:carol@example.com",
        verify=context(files["ca"], carol),
    )
    gateways.append(gw)
    await create_topic(gw.client, "t", 1)  # carol@example.com is a super user
    nameless = client_ca.issue_cert("127.0.0.2", common_name="no-email")
    async with httpx.AsyncClient(base_url=gw.url, verify=context(files["ca"], nameless)) as client:
        r = await client.get("/topics")
        assert r.status_code == 401
        assert "no email name" in r.json()["message"]


async def test_with_mtls_beside_basic_a_certificate_or_a_password_does(tmp_path, files, client_ca, gateways):
    users = tmp_path / "users"
    add_user(users, "dave", "dave-pw")
    erin = client_ca.issue_cert("erin@example.com", common_name="erin")
    gw = await start_gateway(
        tmp_path / "data",
        tls_cert=files["cert"],
        tls_client_ca=files["client_ca"],
        auth="mtls,basic",
        users_file=users,
        verify=context(files["ca"], erin),
    )
    gateways.append(gw)
    assert (await gw.client.get("/topics")).status_code == 200  # by certificate
    async with httpx.AsyncClient(base_url=gw.url, verify=context(files["ca"])) as no_cert:
        assert (await no_cert.get("/topics", auth=("dave", "dave-pw"))).status_code == 200
        r = await no_cert.get("/topics")
        assert r.status_code == 401
        assert r.headers.get_list("www-authenticate") == ['Basic realm="brokergate", charset="UTF-8"']
        r = await no_cert.post("/consumers/g", json={}, headers={"Content-Type": V2}, auth=("dave", "nope"))
        assert r.status_code == 401


@pytest.mark.parametrize("auth", ["mtls", "mtls,basic"])
async def test_a_client_certificate_opens_a_websocket_stream_as_it_does_a_request(
    tmp_path, files, client_ca, gateways, auth
):
    users = tmp_path / "users"
    add_user(users, "dave", "dave-pw")
    frank = client_ca.issue_cert("frank@example.com", common_name="frank")
    frank_ctx = context(files["ca"], frank)
    gw = await start_gateway(
        tmp_path / "data",
        tls_cert=files["cert"],
        tls_client_ca=files["client_ca"],
        auth=auth,
        users_file=users,
        verify=frank_ctx,
    )
    gateways.append(gw)
    await create_topic(gw.client, "t", 1)
    await produce(gw.client, "t", [{"value": "over wss"}])
    base = await consumer(gw.client, "g")  # frank's, by his certificate
    await subscribe(gw.client, base, "t")
    async with connect(socket_url(base), ssl=frank_ctx) as ws:  # the same certificate: frank again
        await receive(ws, "hello")
        await receive(ws, "rebalance")
        await ws.send('{"v": 1, "type": "credit", "records": 10, "bytes": 10000}')
        got = await receive(ws, "records")
        assert [r["value"] for r in got["records"]] == ["over wss"]


async def test_a_tls_handshake_is_counted_from_the_accept_and_bounded_in_time(tmp_path, files, gateways):
    ca = context(files["ca"])
    gw = await start_gateway(
        tmp_path / "data",
        tls_cert=files["cert"],
        verify=ca,
        max_connections=20,
        max_connections_per_address=2,
        tls_handshake_timeout_ms=2000,
    )
    gateways.append(gw)
    port = int(gw.url.rsplit(":", 1)[1])

    async def tls_get(source: str) -> bytes:
        """A whole answer to a GET over TLS from ``source``, to the close the 503 asks for."""
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=ca, server_hostname="127.0.0.1", local_addr=(source, 0)
        )
        writer.write(b"GET /topics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        raw = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        return raw

    # Two raw TCP connections from one address: one silent, one stopping inside its ClientHello.
    stalled = [
        await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0)) for _ in range(2)
    ]
    stalled[1][1].write(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    for _ in range(50):  # they hold its address's share while they handshake, once accepted
        refused = await tls_get("127.0.0.2")
        if not refused.startswith(b"HTTP/1.1 200"):
            break
        await asyncio.sleep(0.05)
    assert refused.startswith(b"HTTP/1.1 503") and b'"error_code":50301' in refused, refused
    assert (await tls_get("127.0.0.3")).startswith(b"HTTP/1.1 200")  # another address is served
    for reader, _ in stalled:  # closed by the gateway once the handshake time is up (asyncio's own: 60 s)
        assert await asyncio.wait_for(reader.read(), 5) == b""
    assert (await tls_get("127.0.0.2")).startswith(b"HTTP/1.1 200")  # its share is free again


def test_tls_files_that_cannot_be_used_stop_the_start_with_the_setting_named(tmp_path, files):
    (tmp_path / "empty.pem").write_text("")
    for overrides, named in [
        ({"tls_cert": tmp_path / "missing.pem"}, "tls_cert"),
        ({"tls_cert": files["ca"]}, "tls_cert"),  # a certificate without its key
        ({"tls_cert": files["cert"], "tls_client_ca": tmp_path / "empty.pem"}, "tls_client_ca"),
    ]:
        settings = Settings(data_dir=tmp_path / "data", **overrides)
        with pytest.raises(ValueError, match=f"^{named}: "):
            server_config(create_app(settings), settings)


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"auth": "mtls"}, "needs tls_client_ca"),
        ({"tls_client_ca": "ca.pem"}, "needs tls_cert"),
        ({"tls_key": "key.pem"}, "without tls_cert"),
    ],
)
def test_tls_settings_that_do_not_fit_together_are_refused(overrides, says):
    with pytest.raises(ValueError, match=says):
        Settings(**overrides)
