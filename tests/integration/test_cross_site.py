"""A page of another site cannot make a browser change anything on the gateway (``CrossSiteGuard``)."""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.conftest import RunningGateway
from tests.helpers import BINARY, V2, create_topic


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
    from tests.conftest import start_gateway

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
