"""Bearer JWTs: tokens of an OpenID Connect provider, checked against the keys it serves.

The provider is real: its discovery document and JWKS are served over HTTP on loopback by
``tests.oidc.IdentityProvider``, and tokens are signed with its keys (RS256 and ES256).
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import jwt
import pytest

from service.security import tokens as tokens_mod
from service.security.users import add_user
from tests.conftest import RunningGateway, running_gateway, start_gateway
from tests.helpers import STRING, create_topic
from tests.oidc import IdentityProvider


@pytest.fixture
def idp() -> Iterator[IdentityProvider]:
    with IdentityProvider() as provider:
        provider.add_key("k1")
        yield provider


@pytest.fixture
async def gateway(tmp_path, idp) -> AsyncIterator[RunningGateway]:
    async with running_gateway(
        tmp_path / "data",
        auth="jwt",
        jwt_issuer=idp.issuer,
        jwt_audience="brokergate",
        jwt_algorithms="RS256,ES256",
        authorize=True,
        super_users="User:alice",
    ) as gw:
        yield gw


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def invalid(r: httpx.Response, says: str) -> None:
    assert r.status_code == 401, r.text
    assert r.json()["error_code"] == 40101
    assert says in r.json()["message"], r.json()["message"]
    assert r.headers["www-authenticate"].startswith('Bearer realm="brokergate"')


async def test_a_valid_token_names_its_principal(gateway, idp):
    client = gateway.client
    async with httpx.AsyncClient(base_url=gateway.url, headers=bearer(idp.token("alice"))) as alice:
        await create_topic(alice, "t", 1)
    r = await client.get("/topics/t", headers=bearer(idp.token("alice")))
    assert r.status_code == 200, r.text
    r = await client.get("/topics/t", headers=bearer(idp.token("bob")))
    assert r.status_code == 403  # authenticated as bob, who may not describe t
    r = await client.get("/topics")
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == 'Bearer realm="brokergate"'
    assert idp.requests["/.well-known/openid-configuration"] == 1  # the keys found by discovery


async def test_tokens_the_provider_did_not_issue_for_this_gateway_now_are_refused(gateway, idp):
    client = gateway.client
    stranger = IdentityProvider()
    stranger.add_key("k1")  # same kid, another key
    now = int(time.time())
    cases = {
        "has expired": idp.token("alice", exp=now - 120),
        "not valid yet": idp.token("alice", nbf=now + 120),
        "another issuer": idp.token("alice", iss="https://elsewhere.example"),
        "audience": idp.token("alice", aud="another-service"),
        "no 'exp' claim": idp.token("alice", exp=None),
        "no 'sub' claim": idp.token("alice", sub=None),
        "signature does not verify": stranger.token("alice"),
        "not a JWT": "not-a-token",
    }
    for says, token in cases.items():
        invalid(await client.get("/topics", headers=bearer(token)), says)
    header = json.loads(base64.urlsafe_b64decode(idp.token("alice").split(".")[0] + "=="))
    assert header["kid"] == "k1"


async def test_no_algorithm_but_the_allowed_asymmetric_ones_is_accepted(gateway, idp):
    claims = idp.claims("alice")
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": "k1"})
    invalid(await gateway.client.get("/topics", headers=bearer(unsigned)), "algorithm 'none'")
    # HS256 keyed with the provider's public key: the classic algorithm confusion
    # (PyJWT refuses to sign so, rightly: the token is made by hand)
    public_jwk = json.dumps(idp.jwks()["keys"][0]).encode()
    signing_input = b".".join(
        _b64(json.dumps(part).encode()) for part in ({"alg": "HS256", "typ": "JWT", "kid": "k1"}, claims)
    )
    confused = (signing_input + b"." + _b64(hmac.digest(public_jwk, signing_input, "sha256"))).decode()
    invalid(await gateway.client.get("/topics", headers=bearer(confused)), "algorithm 'HS256'")
    idp.add_key("ec", "ES256")
    r = await gateway.client.get("/topics", headers=bearer(idp.token("alice", kid="ec")))
    assert r.status_code == 200, r.text


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


async def test_clock_skew_within_the_leeway_is_forgiven(gateway, idp):
    now = int(time.time())
    r = await gateway.client.get("/topics", headers=bearer(idp.token("alice", exp=now - 10)))
    assert r.status_code == 200, r.text  # 10 s late, 30 s allowed


async def test_a_rotated_key_is_fetched_and_a_withdrawn_key_stops_working(gateway, idp, monkeypatch):
    monkeypatch.setattr(tokens_mod, "JWKS_MIN_REFETCH_S", 0.2)
    client = gateway.client
    old = idp.token("alice")
    assert (await client.get("/topics", headers=bearer(old))).status_code == 200
    idp.add_key("k2")
    await asyncio.sleep(0.25)
    r = await client.get("/topics", headers=bearer(idp.token("alice", kid="k2")))
    assert r.status_code == 200, r.text  # an unknown kid made the gateway fetch the keys again
    idp.withdraw_key("k1")
    await asyncio.sleep(0.25)
    fetched = idp.requests["/jwks.json"]
    unknown = jwt.encode(idp.claims("alice"), idp.keys["k2"][1], algorithm="RS256", headers={"kid": "nope"})
    invalid(await client.get("/topics", headers=bearer(unknown)), "key the identity provider does not list")
    assert idp.requests["/jwks.json"] == fetched + 1
    # the old token was remembered as good; its key withdrawn, it is checked again, and refused
    invalid(await client.get("/topics", headers=bearer(old)), "key the identity provider does not list")


async def test_made_up_key_ids_cannot_make_the_gateway_hammer_the_provider(gateway, idp):
    client = gateway.client
    assert (await client.get("/topics", headers=bearer(idp.token("alice")))).status_code == 200
    fetched = idp.requests["/jwks.json"]
    key = idp.keys["k1"][1]
    for n in range(50):
        token = jwt.encode(idp.claims("mallory"), key, algorithm="RS256", headers={"kid": f"made-up-{n}"})
        assert (await client.get("/topics", headers=bearer(token))).status_code == 401
    assert idp.requests["/jwks.json"] - fetched <= 1  # at most one fetch per JWKS_MIN_REFETCH_S


async def test_a_provider_that_cannot_be_reached_gets_503_not_401(tmp_path, idp):
    gw = await start_gateway(
        tmp_path / "data", auth="jwt", jwt_issuer=idp.issuer, jwt_jwks_url="http://127.0.0.1:9/jwks.json"
    )
    try:
        r = await gw.client.get("/topics", headers=bearer(idp.token("alice")))
        assert r.status_code == 503, r.text
        assert r.json()["error_code"] == 50301
        assert "retry-after" in r.headers
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_the_principal_claim_is_a_setting(tmp_path, idp):
    gw = await start_gateway(
        tmp_path / "data",
        auth="jwt",
        jwt_issuer=idp.issuer,
        jwt_jwks_url=idp.jwks_url,
        jwt_principal_claim="email",
        authorize=True,
        super_users="User:alice@example.com",
    )
    try:
        token = idp.token("0c9f-uuid", email="alice@example.com")
        r = await gw.client.post(
            "/topics/t",
            json={"records": [{"value": "hi"}]},
            headers={"Content-Type": STRING, **bearer(token)},
        )
        assert r.status_code == 200, r.text  # allowed as the super user the email claim names
        assert idp.requests["/.well-known/openid-configuration"] == 0  # jwt_jwks_url given
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_basic_and_bearer_side_by_side_offer_both_challenges(tmp_path, idp):
    users = tmp_path / "users"
    add_user(users, "carol", "carol-pw")
    gw = await start_gateway(tmp_path / "data", auth="basic,jwt", users_file=users, jwt_issuer=idp.issuer)
    try:
        client = gw.client
        assert (await client.get("/topics", auth=("carol", "carol-pw"))).status_code == 200
        assert (await client.get("/topics", headers=bearer(idp.token("dave")))).status_code == 200
        r = await client.get("/topics")
        assert r.status_code == 401
        assert r.headers.get_list("www-authenticate") == [
            'Basic realm="brokergate", charset="UTF-8"',
            'Bearer realm="brokergate"',
        ]
        r = await client.get("/topics", headers={"Authorization": "Digest x"})
        assert "HTTP Basic credentials or a Bearer token" in r.json()["message"]
    finally:
        await client.aclose()
        await gw.stop()
