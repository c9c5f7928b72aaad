"""A forged ``Host`` never becomes a URL the gateway hands out: every route of the app, from its
route table, answered with a ``Host`` naming another site, with and without a trailing ``/``.

The only URLs the gateway writes (consumers' ``base_uri``, v3 ``metadata.self`` and related
links) are made by ``http.public_base`` from ``ADVERTISED_URL`` or a ``Host`` in
``ALLOWED_HOSTS``; a path with a trailing ``/`` is served as its route (as Confluent's proxy
does), not redirected to a ``Location`` built from ``Host``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import RunningGateway
from tests.integration.test_authorization import (
    ALICE,
    RULES,
    SAMPLES,
    Acls,
    _names,
    _request,
    _resource_of,
    _set_up,
    acl_gateway,
)
from tests.integration.test_authorization import (
    ROUTES as ALL_ROUTES,
)

FORGED = "evil.example"
# A WebSocket session writes no URL, and a client cannot send it another Host than its URL's.
ROUTES = [key for key in ALL_ROUTES if not key.startswith("WS ")]


@pytest.fixture
async def gateway(tmp_path: Path, acl_users: Path) -> AsyncIterator[RunningGateway]:
    async with acl_gateway(tmp_path, acl_users) as gw:
        yield gw


def _other_form(path: str) -> str | None:
    """The path with a trailing ``/`` added, or taken off a route's that has one (None for ``/``)."""
    if path == "/":
        return None
    return path[:-1] if path.endswith("/") else path + "/"


def _assert_unforged(r: httpx.Response, what: str) -> None:
    assert r.status_code < 500, f"{what}: {r.status_code} {r.text}"
    for name, value in r.headers.multi_items():
        assert FORGED not in value.lower(), f"{what}: header {name}: {value}"
    assert FORGED.encode() not in r.content.lower(), f"{what}: body {r.text[:500]}"


@pytest.mark.parametrize("key", ROUTES)
async def test_no_route_hands_out_a_forged_host(gateway: RunningGateway, key: str) -> None:
    sample = SAMPLES[key]
    names = await _names(gateway.client)
    acls = Acls(gateway.client, names.cluster)
    async with httpx.AsyncClient(base_url=gateway.url, auth=httpx.BasicAuth(*ALICE), timeout=30) as alice:
        await _set_up(gateway, alice, acls, names, sample.setup)
        for need in RULES[key].needs + RULES[key].named:
            await acls.grant("User:alice", *_resource_of(need, names, sample), need.operation)
        method, path, kwargs = _request(key, sample, names)
        forged = {**kwargs, "headers": {**kwargs.get("headers", {}), "Host": FORGED}}
        other = _other_form(path)
        if other is not None:  # first: served as the route is, not redirected
            r = await alice.request(method, other, **forged)
            _assert_unforged(r, f"{method} {other}")
            if key == "GET /ui":  # the console's page, its links relative to /ui: a relative redirect
                assert (r.status_code, r.headers["location"]) == (307, "../ui"), r.headers
            else:
                assert 200 <= r.status_code < 300, f"{method} {other}: {r.status_code} {r.text}"
        r = await alice.request(method, path, **forged)  # again, maybe refused: done already
        _assert_unforged(r, f"{method} {path}")
        # Without credentials: the challenge names no host either.
        async with httpx.AsyncClient(base_url=gateway.url) as anonymous:
            r = await anonymous.request(method, path, **forged)
        _assert_unforged(r, f"{method} {path} without credentials")


async def test_a_trailing_slash_is_served_not_redirected(gateway: RunningGateway) -> None:
    """The finding as reported: ``GET /topics/secret/`` with a forged ``Host`` was a 307 to it."""
    names = await _names(gateway.client)
    r = await gateway.client.post(f"/v3/clusters/{names.cluster}/topics", json={"topic_name": names.topic})
    assert r.status_code == 201, r.text
    for path in (f"/topics/{names.topic}/", f"/topics/{names.topic}//"):
        r = await gateway.client.get(path, headers={"Host": FORGED})
        assert r.status_code == 200 and r.json()["name"] == names.topic, r.text
        assert "location" not in r.headers
    # the other way round: the route is /schema-registry/
    r = await gateway.client.get("/schema-registry", headers={"Host": FORGED})
    assert r.status_code == 200, r.text


async def test_urls_come_from_an_allowed_host_or_the_connection(gateway: RunningGateway) -> None:
    names = await _names(gateway.client)
    reached = gateway.url  # http://127.0.0.1:PORT: what the connection reached
    port = reached.rsplit(":", 1)[1]
    for host, base in ((FORGED, reached), (f"localhost:{port}", f"http://localhost:{port}")):
        r = await gateway.client.get("/v3/clusters", headers={"Host": host})
        assert r.json()["metadata"]["self"] == f"{base}/v3/clusters", r.text
        r = await gateway.client.post(
            f"/consumers/{names.group}", json={}, headers={"Host": host, "Content-Type": "application/json"}
        )
        assert r.json()["base_uri"].startswith(f"{base}/consumers/{names.group}/instances/"), r.text
