"""One gate for every way in: every route of the app, from its route table, on every transport
it is served by (HTTP, the produce fast path or the routed produce, Server-Sent Events, the
WebSocket, the console's files), is refused alike when its credentials are missing, wrong,
doubled or malformed: the same status, the same Confluent body and the same
``WWW-Authenticate`` challenges as a plain ``GET /topics``, and nothing done.

The other gates are proven over the same route table by their own tests: ACLs
(test_authorization.py), the cross-site guard (test_cross_site.py), a forged ``Host``
(test_forged_host.py), deep JSON (test_deep_json.py), and an instance of another principal
(test_leaks.py).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from service.security.users import add_user
from tests.conftest import RunningGateway, running_gateway
from tests.integration.test_authorization import ROUTES, SAMPLES, Names, _request
from tests.oidc import IdentityProvider

ALICE = ("alice", "alice-pw")
ADMIN = ("admin", "admin-pw")
NAMES = Names(topic="t", group="g", instance="i", new_topic="n", cluster="c")
SSE = "text/event-stream"


def _basic(name: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()


# What a client may send that authenticates no one; each must be answered as GET /topics is.
CREDENTIALS: dict[str, list[tuple[str, str]]] = {
    "none": [],
    "wrong password": [("Authorization", _basic("alice", "wrong"))],
    "unknown user": [("Authorization", _basic("nobody", "x"))],
    "not base64": [("Authorization", "Basic !!!")],
    "unsigned token": [("Authorization", "Bearer eyJhbGciOiJub25lIn0.e30.")],
    "token with crit": [("Authorization", "Bearer eyJhbGciOiJSUzI1NiIsImNyaXQiOlsieCJdfQ.e30.c2ln")],
    "unknown scheme": [("Authorization", "Digest x")],
    "two headers": [("Authorization", _basic(*ALICE)), ("Authorization", _basic(*ALICE))],
}


@pytest.fixture(scope="module")
def issuer() -> Any:
    with IdentityProvider() as provider:
        provider.add_key("k1")
        yield provider


@pytest.fixture(params=[True, False], ids=["fast-path", "routed-produce"])
async def gateway(
    request: pytest.FixtureRequest, tmp_path: Path, issuer: IdentityProvider
) -> AsyncIterator[RunningGateway]:
    users = tmp_path / "users"
    for name, password in (ALICE, ADMIN):
        add_user(users, name, password)
    async with running_gateway(
        tmp_path / "data",
        auth="basic,jwt",
        users_file=users,
        jwt_issuer=issuer.issuer,
        jwt_audience=issuer.audience,
        jwt_jwks_url=issuer.jwks_url,
        authorize=True,
        super_users="User:admin",
        docs_open=False,
        produce_fast_path=request.param,
        # the guess budgets are proven elsewhere; here every wrong password must reach the check
        password_guesses_per_address=100_000,
        password_guesses_per_user=100_000,
    ) as gw:
        yield gw


def _reference(answer: httpx.Response) -> tuple[int, bytes, list[str]]:
    return answer.status_code, answer.content, answer.headers.get_list("www-authenticate")


async def _handshake(url: str, headers: list[tuple[str, str]]) -> tuple[int, bytes, list[str]]:
    try:
        async with websockets.connect(url, additional_headers=headers, open_timeout=10):
            pass
    except InvalidStatus as exc:
        response = exc.response
        return response.status_code, bytes(response.body or b""), response.headers.get_all("www-authenticate")
    raise AssertionError(f"{url}: the handshake was accepted without credentials")


async def test_every_route_on_every_transport_refuses_bad_credentials_as_one(gateway: RunningGateway) -> None:
    http = gateway.client
    ws_base = gateway.url.replace("http", "ws", 1)
    open_routes = {"GET /healthz", "GET /readyz"}
    # the routed produce is only told apart from the fast path's on the two produce routes
    routes = [k for k in ROUTES if gateway.settings.produce_fast_path or k.startswith("POST /topics/")]
    checked = 0
    for label, headers in CREDENTIALS.items():
        expected = _reference(await http.get("/topics", headers=headers))
        assert expected[0] in (400, 401), (label, expected)
        for key in routes:
            if key in open_routes:
                continue
            method, path, kwargs = _request(key, SAMPLES[key], NAMES)
            sent = [*headers, *kwargs.pop("headers", {}).items()]
            if method == "WS":
                got = await _handshake(ws_base + path, sent)
            else:
                got = _reference(await http.request(method, path, headers=sent, **kwargs))
            assert got == expected, f"{key} with {label}: {got} != {expected}"
            checked += 1
            if key.endswith("/records") and method == "GET":  # the same route as a stream
                got = _reference(await http.get(path, headers=[*sent, ("Accept", SSE)]))
                assert got == expected, f"{key} as SSE with {label}: {got} != {expected}"
    assert checked == len(CREDENTIALS) * len(set(routes) - open_routes)

    # nothing the refused requests sent was done: no topic, group or subject came of them
    async with httpx.AsyncClient(base_url=gateway.url, auth=ADMIN) as admin:
        assert (await admin.get("/topics")).json() == []
        cluster = (await admin.get("/v3/clusters")).json()["data"][0]["cluster_id"]
        assert (await admin.get(f"/v3/clusters/{cluster}/consumer-groups")).json()["data"] == []
        assert (await admin.get("/schema-registry/subjects")).json() == []
