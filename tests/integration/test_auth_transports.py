"""Authentication on every transport: a WebSocket handshake refused exactly as a request is, every
malformed credential a 401 (audited, never a 500), names no one may have, one Authorization
header, and streams that end when the credential that opened them stops being valid.

Real gateways, real users files, a real OpenID Connect provider on loopback (``tests.oidc``), real
client certificates (trustme) over TLS.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import logging
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from jwt.algorithms import RSAAlgorithm
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from service.security import tokens as tokens_mod
from service.security import users as users_mod
from service.security.users import UsersFileError, add_user, read_users, remove_user
from tests.conftest import RunningGateway, running_gateway, start_gateway
from tests.helpers import consumer, create_topic, produce, subscribe
from tests.oidc import IdentityProvider
from tests.stream_client import events, receive, socket_url

PATH = "/consumers/g/instances/i/records"


@dataclass(frozen=True)
class Answer:
    """What a client is told when it is not let in: all of it that is the gateway's to say."""

    status: int
    body: bytes
    challenges: tuple[str, ...]
    retry_after: str | None
    content_type: str | None


async def over_http(gw: RunningGateway, headers: list[tuple[str, str]]) -> Answer:
    async with httpx.AsyncClient(base_url=gw.url) as client:
        r = await client.get(PATH, headers=headers)
    return Answer(
        r.status_code,
        r.content,
        tuple(r.headers.get_list("www-authenticate")),
        r.headers.get("retry-after"),
        r.headers.get("content-type"),
    )


async def over_websocket(gw: RunningGateway, headers: list[tuple[str, str]]) -> Answer:
    url = gw.url.replace("http://", "ws://") + PATH
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, additional_headers=headers, open_timeout=5):
            pass
    response = refused.value.response
    return Answer(
        response.status_code,
        response.body or b"",
        tuple(response.headers.get_all("www-authenticate")),
        response.headers.get("retry-after"),
        response.headers.get("content-type"),
    )


def basic(user: str, password: str) -> tuple[str, str]:
    return ("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())


def bearer(token: str) -> tuple[str, str]:
    return ("Authorization", f"Bearer {token}")


class Bearer(httpx.Auth):
    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


def handmade(idp: IdentityProvider, header: dict[str, Any], claims: dict[str, Any], *, signed: bool) -> str:
    """A token PyJWT would not make: any header, any claims, signed with the provider's key or not."""

    def part(data: Any) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=")

    signing_input = part(header) + b"." + part(claims)
    _, key = idp.keys["k1"]
    signature = RSAAlgorithm(RSAAlgorithm.SHA256).sign(signing_input, key) if signed else b"sig"
    return (signing_input + b"." + base64.urlsafe_b64encode(signature).rstrip(b"=")).decode()


def audited(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "brokergate.audit"]


@pytest.fixture
def idp() -> Iterator[IdentityProvider]:
    with IdentityProvider() as provider:
        provider.add_key("k1")
        yield provider


@pytest.fixture
async def basic_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RunningGateway]:
    monkeypatch.setattr(users_mod, "_RELOAD_EVERY_S", 0.05)
    users = tmp_path / "users"
    add_user(users, "alice", "alice-pw")
    async with running_gateway(tmp_path / "data", auth="basic", users_file=users) as gw:
        gw.client.auth = httpx.BasicAuth("alice", "alice-pw")
        yield gw


@pytest.fixture
async def jwt_gateway(tmp_path: Path, idp: IdentityProvider) -> AsyncIterator[RunningGateway]:
    async with running_gateway(
        tmp_path / "data",
        auth="jwt",
        jwt_issuer=idp.issuer,
        jwt_jwks_url=idp.jwks_url,
        jwt_audience="brokergate",
        jwt_leeway_s=0,
    ) as gw:
        gw.client.auth = Bearer(idp.token("alice"))
        yield gw


# --- finding 1: a refused handshake is the refused request ----------------------------------


async def test_a_refused_handshake_is_answered_as_the_request_would_be(basic_gateway: RunningGateway) -> None:
    for headers in (
        [],  # no credentials
        [basic("alice", "wrong")],
        [basic("nobody", "x")],
        [("Authorization", "Digest x")],
        [("Authorization", "Basic !!!")],
        [basic("alice", "alice-pw"), basic("alice", "wrong")],  # two Authorization headers
    ):
        http, ws = await over_http(basic_gateway, headers), await over_websocket(basic_gateway, headers)
        assert ws == http, headers
        assert http.status in (400, 401), http
        if http.status == 401:
            assert json.loads(http.body)["error_code"] == 40101
            assert http.challenges == ('Basic realm="brokergate", charset="UTF-8"',)


async def test_an_unreachable_provider_is_a_503_with_retry_after_on_both(tmp_path: Path, idp) -> None:
    users = tmp_path / "users"
    add_user(users, "carol", "carol-pw")
    gw = await start_gateway(
        tmp_path / "data",
        auth="basic,jwt",
        users_file=users,
        jwt_issuer=idp.issuer,
        jwt_jwks_url="http://127.0.0.1:9/jwks.json",
    )
    try:
        headers = [bearer(idp.token("alice"))]
        http, ws = await over_http(gw, headers), await over_websocket(gw, headers)
        assert ws == http
        assert (http.status, json.loads(http.body)["error_code"]) == (503, 50301)
        assert http.retry_after is not None
        http, ws = await over_http(gw, []), await over_websocket(gw, [])
        assert ws == http
        assert http.challenges == ('Basic realm="brokergate", charset="UTF-8"', 'Bearer realm="brokergate"')
    finally:
        await gw.client.aclose()
        await gw.stop()


# --- finding 4: a malformed token is a 401, audited -----------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "RS256", "crit": ["x"]},
        {"alg": "RS256", "kid": 5},
        {"alg": "RS256", "kid": None},
        {"alg": "RS256", "kid": "k1", "crit": ["b64"]},
    ],
)
async def test_a_token_with_a_header_the_verifier_trips_on_is_a_401_and_audited(
    jwt_gateway: RunningGateway,
    idp: IdentityProvider,
    header: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    for signed in (False, True):
        token = handmade(idp, header, idp.claims("mallory"), signed=signed)
        with caplog.at_level(logging.INFO, logger="brokergate.audit"):
            caplog.clear()
            http = await over_http(jwt_gateway, [bearer(token)])
            ws = await over_websocket(jwt_gateway, [bearer(token)])
        assert ws == http
        assert (http.status, json.loads(http.body)["error_code"]) == (401, 40101), http
        assert http.challenges == ('Bearer realm="brokergate", error="invalid_token"',)
        lines = [line for line in audited(caplog) if line["event"] == "authentication"]
        assert len(lines) == 2 and all(line["outcome"] == "FAILED" for line in lines), lines


# --- finding 13a: names no one may have, NumericDates, one Authorization header -------------


@pytest.mark.parametrize("reserved", ["*", "ANONYMOUS"])
def test_the_wildcard_and_anonymous_cannot_be_users(tmp_path: Path, reserved: str) -> None:
    users = tmp_path / "users"
    command = ["users", "add", reserved, "--users-file", str(users), "--password-stdin"]
    done = subprocess.run(
        [sys.executable, "-m", "service", *command],
        input="pw\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0, done.stdout
    assert "cannot be a user's name" in done.stderr
    assert not users.exists()
    add_user(users, "alice", "pw")
    hashed = read_users(users)["alice"]
    users.write_text(f"alice:{hashed}\n{reserved}:{hashed}\n")  # written by hand: refused when read
    with pytest.raises(UsersFileError, match="cannot be a user's name"):
        read_users(users)


@pytest.mark.parametrize("subject", ["*", "ANONYMOUS"])
async def test_a_token_naming_the_wildcard_or_anonymous_authenticates_no_one(
    jwt_gateway: RunningGateway, idp: IdentityProvider, subject: str
) -> None:
    http = await over_http(jwt_gateway, [bearer(idp.token(subject))])
    assert (http.status, json.loads(http.body)["error_code"]) == (401, 40101), http
    assert f"User:{subject}" in json.loads(http.body)["message"]


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
async def test_a_date_claim_that_is_a_string_is_refused(
    jwt_gateway: RunningGateway, idp: IdentityProvider, claim: str
) -> None:
    claims = idp.claims("alice")
    claims[claim] = str(int(claims["exp"] if claim == "exp" else claims["iat"]))
    token = handmade(idp, {"alg": "RS256", "kid": "k1"}, claims, signed=True)
    http = await over_http(jwt_gateway, [bearer(token)])
    assert (http.status, json.loads(http.body)["error_code"]) == (401, 40101), http
    assert "NumericDate" in json.loads(http.body)["message"]


async def test_two_authorization_headers_are_a_400(basic_gateway: RunningGateway) -> None:
    good = basic("alice", "alice-pw")
    for headers in ([good, good], [good, ("Authorization", "Bearer x")], [basic("alice", "wrong"), good]):
        async with httpx.AsyncClient(base_url=basic_gateway.url) as client:
            r = await client.get("/topics", headers=headers)
        assert (r.status_code, r.json()["error_code"]) == (400, 40001), r.text
        assert "one Authorization header" in r.json()["message"]
    async with httpx.AsyncClient(base_url=basic_gateway.url) as client:
        assert (await client.get("/topics", headers=[good])).status_code == 200


# --- finding 14: what a credential opened ends with it --------------------------------------


async def _stream_base(client: httpx.AsyncClient, topic: str) -> str:
    await create_topic(client, topic, 1)
    base = await consumer(client, f"g-{topic}")
    await subscribe(client, base, topic)
    return base


async def _ends_unauthenticated_ws(ws: Any) -> None:
    while True:
        message = await receive(ws, timeout=15)
        if message["type"] == "end":
            assert (message["reason"], message["error_code"]) == ("error", 40101), message
            return


async def _ends_unauthenticated_sse(stream: Any) -> None:
    while True:
        event = await stream.next(timeout=15)
        if event.event == "end":
            assert (event.json()["reason"], event.json()["error_code"]) == ("error", 40101), event
            return


@pytest.mark.parametrize("change", ["removed", "password changed"])
async def test_streams_of_a_user_removed_or_whose_password_changed_end(
    basic_gateway: RunningGateway, tmp_path: Path, name: str, change: str
) -> None:
    alice, users = basic_gateway.client, tmp_path / "users"
    base = await _stream_base(alice, name)
    partition = f"/topics/{name}/partitions/0/records"
    async with (
        connect(socket_url(base), additional_headers=[basic("alice", "alice-pw")]) as ws,
        events(alice, f"{base}/records") as instance_sse,
        events(alice, partition, offset=0, format="string") as partition_sse,
    ):
        await receive(ws, "hello")  # and no credit: the SSE stream of the same instance takes the records
        await produce(alice, name, [{"value": "one"}])
        assert [r["value"] for r in await instance_sse.records(1)] == ["one"]
        assert [r["value"] for r in await partition_sse.records(1)] == ["one"]
        add_user(users, "bob", "bob-pw")  # another user's change leaves alice's streams alone
        await asyncio.sleep(0.3)
        await produce(alice, name, [{"value": "two"}])
        assert [r["value"] for r in await instance_sse.records(1)] == ["two"]
        if change == "removed":
            remove_user(users, "alice")
        else:
            add_user(users, "alice", "new-pw")
        await _ends_unauthenticated_ws(ws)
        await _ends_unauthenticated_sse(instance_sse)
        await _ends_unauthenticated_sse(partition_sse)
    assert ws.close_code == 1008


async def test_streams_opened_with_a_token_end_when_it_expires(
    jwt_gateway: RunningGateway, idp: IdentityProvider, name: str
) -> None:
    base = await _stream_base(jwt_gateway.client, name)
    short = idp.token("alice", lifetime_s=3)
    async with httpx.AsyncClient(base_url=jwt_gateway.url, auth=Bearer(short)) as holder:
        async with (
            connect(socket_url(base), additional_headers=[bearer(short)]) as ws,
            events(holder, f"{base}/records") as stream,
        ):
            await receive(ws, "hello")  # no credit: an idle stream must end all the same
            await _ends_unauthenticated_ws(ws)
            await _ends_unauthenticated_sse(stream)
        r = await holder.get("/topics")
        assert r.status_code == 401  # as a request with it is refused


async def test_streams_opened_with_a_token_end_when_its_key_is_withdrawn(
    jwt_gateway: RunningGateway, idp: IdentityProvider, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokens_mod, "JWKS_MAX_AGE_S", 0.2)
    idp.add_key("k2")
    base = await _stream_base(jwt_gateway.client, name)
    token = idp.token("alice", kid="k2")
    async with connect(socket_url(base), additional_headers=[bearer(token)]) as ws:
        await receive(ws, "hello")
        idp.withdraw_key("k2")
        await _ends_unauthenticated_ws(ws)


async def test_streams_opened_with_a_certificate_end_when_it_expires(tmp_path: Path, name: str) -> None:
    server_ca, client_ca = trustme.CA(), trustme.CA()
    cert, ca, clients = (tmp_path / f"{n}.pem" for n in ("cert", "ca", "client_ca"))
    server_ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(cert))
    server_ca.cert_pem.write_to_path(str(ca))
    client_ca.cert_pem.write_to_path(str(clients))

    def presenting(leaf: trustme.LeafCert) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(ca))
        leaf.configure_cert(ctx)
        return ctx

    lasting = presenting(client_ca.issue_cert("frank@example.com", common_name="frank"))
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=4)
    brief = presenting(client_ca.issue_cert("frank@example.com", common_name="frank", not_after=soon))
    gw = await start_gateway(
        tmp_path / "data", tls_cert=cert, tls_client_ca=clients, auth="mtls", verify=lasting
    )
    try:
        base = await _stream_base(gw.client, name)  # frank's instance, by his lasting certificate
        async with httpx.AsyncClient(base_url=gw.url, verify=brief, timeout=5) as kept:

            async def until_refused() -> list[int]:
                """Requests on one connection kept alive from before the brief certificate expired."""
                statuses: list[int] = []
                while not statuses or statuses[-1] == 200:
                    statuses.append((await kept.get("/topics")).status_code)
                    await asyncio.sleep(0.5)
                return statuses

            polling = asyncio.ensure_future(until_refused())
            async with connect(socket_url(base), ssl=brief) as ws:  # frank again, until it expires
                await receive(ws, "hello")
                await _ends_unauthenticated_ws(ws)
            statuses = await asyncio.wait_for(polling, 15)
            assert statuses[0] == 200 and statuses[-1] == 401, statuses  # refused on that connection too
        assert (await gw.client.get("/topics")).status_code == 200  # his lasting certificate still does
    finally:
        await gw.client.aclose()
        await gw.stop()
