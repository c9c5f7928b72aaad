"""A page of another site cannot make a browser change anything on the gateway (``CrossSiteGuard``).

Every route that changes state, from the app's route table (``access.RULES``), whatever its
method: a GET poll included, and the WebSocket stream."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from service.api.access import RULES
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import BINARY, V2, create_topic
from tests.integration.test_authorization import (
    ALICE,
    INSTANCE,
    ROUTES,
    SAMPLES,
    SHARE,
    Acls,
    _call,
    _names,
    _request,
    _resource_of,
    _set_up,
    acl_gateway,
)


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # another port or subdomain is another origin too
        {"Origin": "https://evil.example"},
        {"Origin": "null"},  # a sandboxed frame, a file: page
    ],
)
async def test_state_changes_from_another_site_are_refused(gateway: RunningGateway, name: str, headers):
    client = gateway.client
    await create_topic(client, name, 1)
    # a "simple" request a form or fetch() can send without a preflight: no Content-Type
    r = await client.post(f"/topics/{name}", content=b'{"records":[{"value":"eA=="}]}', headers=headers)
    assert (r.status_code, r.json()["error_code"]) == (403, 40301), r.text
    cluster = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    r = await client.delete(f"/v3/clusters/{cluster}/topics/{name}", headers=headers)
    assert r.status_code == 403
    r = await client.get(f"/topics/{name}/partitions/0/offsets", headers=headers)
    assert r.json()["end_offset"] == 0  # nothing was produced; reading is not refused
    assert (await client.get(f"/topics/{name}", headers=headers)).status_code == 200


async def test_same_origin_browsers_and_programs_are_served(gateway: RunningGateway, name: str):
    client = gateway.client
    host = gateway.url.split("://", 1)[1]
    for headers in (
        {},  # curl, client libraries: no Origin, no Sec-Fetch-Site
        {"Sec-Fetch-Site": "same-origin", "Origin": f"http://{host}"},  # the web console
        {"Sec-Fetch-Site": "none"},  # typed in the address bar
    ):
        r = await client.post(
            f"/topics/{name}",
            json={"records": [{"value": "eA=="}]},
            headers={"Content-Type": BINARY, **headers},
        )
        assert r.status_code == 200, r.text


async def test_an_advertised_origin_is_the_gateways_own(tmp_path, name: str):

    gw = await start_gateway(tmp_path / "data", advertised_url="https://gateway.example:9443")
    try:
        r = await gw.client.post(
            "/consumers/g", json={}, headers={"Content-Type": V2, "Origin": "https://gateway.example:9443"}
        )
        assert r.status_code == 200, r.text
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_websocket_from_another_site_is_refused(gateway: RunningGateway):
    url = gateway.url.replace("http://", "ws://") + "/consumers/g/instances/i/records"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, origin="https://evil.example"):  # type: ignore[arg-type]
            pass
    assert refused.value.response.status_code == 403


# --- every route that changes state, from the route table -------------------------------------

CROSS_SITE = (
    {"Sec-Fetch-Site": "cross-site"},
    {"Origin": "http://evil.example"},
)  # the second: no Sec-Fetch-Site
# GETs that change state, written out apart from the rule table: a rule reverted by mistake fails here
GETS_THAT_CHANGE_STATE = {f"GET {INSTANCE}/records", f"GET {SHARE}/{{instance}}/records"}
CHANGING = [key for key in ROUTES if RULES[key].changes(key)]


def test_every_route_says_whether_it_changes_state() -> None:
    for key in ROUTES:
        method = key.split(" ", 1)[0]
        expected = method != "GET" or key in GETS_THAT_CHANGE_STATE
        assert RULES[key].changes(key) is expected, key


@pytest.fixture
async def guarded(tmp_path: Path, acl_users: Path) -> AsyncIterator[RunningGateway]:
    async with acl_gateway(tmp_path, acl_users) as gw:
        yield gw


async def _refused_socket(url: str, headers: dict[str, str]) -> int:
    credentials = base64.b64encode(f"{ALICE[0]}:{ALICE[1]}".encode()).decode()
    origin = headers.pop("Origin", None)
    with pytest.raises(InvalidStatus) as refused:
        async with connect(
            url,
            origin=origin,  # type: ignore[arg-type]
            additional_headers={"Authorization": f"Basic {credentials}", **headers},
        ):
            pass
    assert refused.value.response.status_code == 403
    return int(json.loads(refused.value.response.body or b"{}")["error_code"])


@pytest.mark.parametrize("key", CHANGING)
async def test_no_route_that_changes_state_takes_a_request_from_another_site(
    guarded: RunningGateway, key: str
) -> None:
    """Refused (403, 40301) with ``Sec-Fetch-Site: cross-site`` and with a foreign ``Origin`` alone,
    with every operation granted; then the same request from no site (a program) succeeds, as it
    could not if the refused ones had done it (created, deleted, produced, polled…)."""
    sample = SAMPLES[key]
    names = await _names(guarded.client)
    acls = Acls(guarded.client, names.cluster)
    async with httpx.AsyncClient(base_url=guarded.url, auth=httpx.BasicAuth(*ALICE), timeout=30) as alice:
        await _set_up(guarded, alice, acls, names, sample.setup)
        for need in RULES[key].needs + RULES[key].named:
            await acls.grant("User:alice", *_resource_of(need, names, sample), need.operation)
        method, path, kwargs = _request(key, sample, names)
        for headers in CROSS_SITE:
            if method == "WS":
                url = guarded.url.replace("http", "ws", 1) + path
                assert await _refused_socket(url, dict(headers)) == 40301
                continue
            sent = {**kwargs, "headers": {**kwargs.get("headers", {}), **headers}}
            r = await alice.request(method, path, **sent)
            assert r.status_code == 403, f"{key} {headers}: {r.status_code} {r.text}"
            assert r.json()["error_code"] == 40301, r.text
        r = await _call(alice, method, path, kwargs)
        assert 200 <= r.status_code < 300, f"{key} after the refusals: {r.status_code} {r.text}"
        if key.startswith("POST /topics/"):  # nothing was produced before
            assert r.json()["offsets"][0]["offset"] == 0, r.text


async def test_a_poll_from_another_site_neither_reads_nor_commits(gateway: RunningGateway, name: str):
    """An ``<img>`` or a link (``Sec-Fetch-Site`` only) and an ``EventSource`` (``Origin``, asking
    for SSE) polling a consumer with auto-commit: refused, and the records are all still ahead."""
    client = gateway.client
    await create_topic(client, name, 1)
    base = f"/consumers/g-{name}/instances/i"
    r = await client.post(
        f"/consumers/g-{name}",
        json={"name": "i", "format": "binary", "auto.offset.reset": "earliest", "auto.commit.enable": "true"},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200, r.text
    await client.post(f"{base}/subscription", json={"topics": [name]}, headers={"Content-Type": V2})
    r = await client.post(
        f"/topics/{name}", json={"records": [{"value": "eA=="}]}, headers={"Content-Type": BINARY}
    )
    assert r.status_code == 200, r.text
    for headers in (
        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"},
        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"},
        {"Origin": "http://evil.example", "Accept": "text/event-stream"},
        {"Origin": "http://evil.example", "Accept": BINARY},
    ):
        r = await client.get(f"{base}/records", params={"timeout": "0"}, headers=headers)
        assert r.status_code == 403, (headers, r.status_code, r.text)
        assert r.json()["error_code"] == 40301, r.text
    committed = await client.request(
        "GET",
        f"{base}/offsets",
        json={"partitions": [{"topic": name, "partition": 0}]},
        headers={"Content-Type": V2},
    )
    assert all(o["offset"] < 1 for o in committed.json()["offsets"]), committed.text
    records: list[dict[str, object]] = []
    for _ in range(20):  # the first polls may be spent joining the group
        r = await client.get(f"{base}/records", params={"timeout": "200"}, headers={"Accept": BINARY})
        records += r.json()
        if records:
            break
    assert [rec["offset"] for rec in records] == [0]


async def test_an_acquisition_from_another_site_locks_nothing(gateway: RunningGateway, name: str):
    """A share consumer's GET from another site acquires nothing: the record's first delivery is
    the same-site poll's."""
    client = gateway.client
    await create_topic(client, name, 1)
    base = f"/share-groups/s-{name}/consumers/c"
    r = await client.post(
        f"/share-groups/s-{name}/consumers",
        json={"name": "c", "format": "binary", "share.auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200, r.text
    r = await client.post(f"{base}/subscription", json={"topics": [name]}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    r = await client.post(
        f"/topics/{name}", json={"records": [{"value": "eA=="}]}, headers={"Content-Type": BINARY}
    )
    assert r.status_code == 200, r.text
    for headers in CROSS_SITE:
        r = await client.get(f"{base}/records", params={"timeout": "0"}, headers=headers)
        assert r.status_code == 403, (headers, r.status_code, r.text)
        assert r.json()["error_code"] == 40301, r.text
    r = await client.get(f"{base}/records", params={"timeout": "1000"}, headers={"Accept": BINARY})
    assert [(rec["offset"], rec["delivery_count"]) for rec in r.json()] == [(0, 1)], r.text
