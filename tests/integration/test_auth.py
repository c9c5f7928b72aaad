"""HTTP Basic authentication: who may talk to the gateway at all, on every route the same way."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import websockets

from service.security import users as users_mod
from service.security.users import add_user, remove_user
from tests.conftest import running_gateway, start_gateway
from tests.helpers import BINARY, STRING, V2, b64, create_topic


@pytest.fixture
async def secured(tmp_path, monkeypatch):
    monkeypatch.setattr(users_mod, "_RELOAD_EVERY_S", 0.05)
    users = tmp_path / "users"
    add_user(users, "alice", "alice-pw")
    add_user(users, "bob", "bob-pw")
    async with running_gateway(tmp_path / "data", auth="basic", users_file=users) as gw:
        gw.client.auth = httpx.BasicAuth("alice", "alice-pw")
        yield gw


def refused(r: httpx.Response) -> None:
    assert r.status_code == 401, r.text
    assert r.json()["error_code"] == 40101
    assert r.headers["www-authenticate"].startswith('Basic realm="brokergate"')


async def test_without_valid_credentials_every_route_is_refused(secured):
    await create_topic(secured.client, "t", 1)
    async with httpx.AsyncClient(base_url=secured.url) as anonymous:
        for method, path in [
            ("GET", "/topics"),
            ("GET", "/v3/clusters"),
            ("POST", "/consumers/g"),
            ("GET", "/no/such/route"),  # nothing is learnt, not even which routes exist
            ("GET", "/metrics"),  # it names every topic and group
        ]:
            refused(await anonymous.request(method, path))
        body = {"records": [{"value": b64("v")}]}
        for path in ("/topics/t", "/topics/t/partitions/0"):  # the produce fast path too
            refused(await anonymous.post(path, json=body, headers={"Content-Type": BINARY}))
        for auth in (("alice", "wrong"), ("nobody", "x"), ("alice", "")):
            refused(await anonymous.get("/topics", auth=auth))
        for header in ("Bearer abc", "Basic !!!", "Basic " + b64("no-colon"), "Digest x"):
            refused(await anonymous.get("/topics", headers={"Authorization": header}))
        for path in ("/healthz", "/readyz", "/openapi.json", "/docs"):
            assert (await anonymous.get(path)).status_code == 200, path
    offsets = (await secured.client.get("/topics/t/partitions/0/offsets")).json()
    assert offsets["end_offset"] == 0  # nothing of the refused produces


async def test_a_user_of_the_file_is_served_everywhere(secured):
    client = secured.client
    await create_topic(client, "t", 1)
    r = await client.post("/topics/t", json={"records": [{"value": "hi"}]}, headers={"Content-Type": STRING})
    assert r.status_code == 200, r.text
    r = await client.post(
        "/consumers/g",
        json={"format": "string", "auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200, r.text
    assert (await client.get("/metrics")).status_code == 200


async def test_the_file_is_read_again_without_a_restart(secured, tmp_path):
    users = tmp_path / "users"
    async with httpx.AsyncClient(base_url=secured.url, auth=("carol", "carol-pw")) as carol:
        refused(await carol.get("/topics"))
        add_user(users, "carol", "carol-pw")
        await asyncio.sleep(0.2)
        assert (await carol.get("/topics")).status_code == 200
        remove_user(users, "carol")
        await asyncio.sleep(0.2)
        refused(await carol.get("/topics"))  # a remembered verdict does not outlive the user


async def test_metrics_and_docs_are_settings(tmp_path):
    users = tmp_path / "users"
    add_user(users, "alice", "pw")
    gw = await start_gateway(
        tmp_path / "data", auth="basic", users_file=users, metrics_open=True, docs_open=False
    )
    try:
        async with httpx.AsyncClient(base_url=gw.url) as anonymous:
            assert (await anonymous.get("/metrics")).status_code == 200
            refused(await anonymous.get("/openapi.json"))
            refused(await anonymous.get("/docs"))
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_quotas_count_the_principal_not_a_header_it_could_change(tmp_path):
    users = tmp_path / "users"
    add_user(users, "alice", "pw")
    gw = await start_gateway(
        tmp_path / "data",
        auth="basic",
        users_file=users,
        quota_client_produce_bytes_per_s=100,
        quota_burst_s=1,
    )
    try:
        gw.client.auth = httpx.BasicAuth("alice", "pw")
        await create_topic(gw.client, "t", 1)
        statuses = []
        for n in range(5):  # a new API key each time: the dodge of an unauthenticated gateway
            r = await gw.client.post(
                "/topics/t",
                json={"records": [{"value": "x" * 60}]},
                headers={"Content-Type": STRING, "X-API-Key": f"key-{n}"},
            )
            statuses.append(r.status_code)
        assert 429 in statuses, statuses
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_websocket_without_credentials_is_refused_before_the_handshake(secured, caplog):
    url = secured.url.replace("http://", "ws://") + "/consumers/g/instances/i/records"
    with caplog.at_level("INFO", logger="brokergate.audit"):
        with pytest.raises(websockets.exceptions.InvalidStatus) as refused_ws:
            async with websockets.connect(url, open_timeout=5):
                pass
    assert refused_ws.value.response.status_code == 401  # as the request is: see test_auth_transports.py
    lines = [r.getMessage() for r in caplog.records if r.name == "brokergate.audit"]
    assert any('"event": "authentication"' in line and "/instances/i/records" in line for line in lines)
