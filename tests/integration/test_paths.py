"""Paths and URIs a client cannot turn against another resource, and the codes the docs promise."""

from __future__ import annotations

import asyncio
import http.client
from urllib.parse import quote, urlsplit

import httpx

from tests.conftest import RunningGateway, start_gateway
from tests.helpers import BINARY, STRING, V2, b64, create_topic, produce


def raw_request(
    gateway: RunningGateway, method: str, path: str, body: bytes, content_type: str
) -> tuple[int, bytes]:
    """Send ``path`` exactly as written: HTTP clients would normalise dot segments away."""
    conn = http.client.HTTPConnection("127.0.0.1", gateway.settings.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": content_type})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


async def test_an_encoded_slash_or_dot_segment_never_reaches_another_topic(client, gateway, name):
    await create_topic(client, name, 1)
    body = b'{"records":[{"value":"%s"}]}' % b64("x").encode()
    for path in (
        f"/topics/{name}%2Fpartitions%2F0",
        f"/topics/{name}%2fpartitions%2f0",
        f"/topics/other%2F..%2F{name}",
        f"/topics/other/../{name}",
        f"/topics/other/%2E%2E/{name}",
        f"/topics/{name}/partitions/0/%2e",
    ):
        status, answer = await asyncio.to_thread(raw_request, gateway, "POST", path, body, BINARY)
        assert status == 422, (path, answer)
        assert httpx.Response(status, content=answer).json()["error_code"] == 42207, path
    # nothing was stored anywhere
    offsets = (await client.get(f"/topics/{name}/partitions/0/offsets")).json()
    assert offsets == {"beginning_offset": 0, "end_offset": 0}
    assert (await client.get("/topics")).json() == [name]


async def test_an_unknown_route_is_a_generic_not_found(client):
    for method, path in (("GET", "/no/such/route"), ("POST", "/topics/t/nonsense"), ("GET", "/v3/nothing")):
        r = await client.request(method, path)
        assert r.json() == {"error_code": 404, "message": "HTTP 404 Not Found"}, (method, path, r.text)


async def test_text_that_is_not_utf8_in_a_string_record_is_a_bad_request(client, name):
    await create_topic(client, name, 1)
    r = await client.post(
        f"/topics/{name}", content=b'{"records":[{"value":"caf\xe9"}]}', headers={"Content-Type": STRING}
    )
    # Confluent's JSON parser refuses it: its 400
    assert r.status_code == 400 and r.json()["error_code"] == 400, r.text
    # a consumer's body too: Jackson's JsonParseException, rest-utils' 400
    r = await client.post("/consumers/g", content=b'{"name":"\xff"}', headers={"Content-Type": V2})
    assert r.status_code == 400 and r.json()["error_code"] == 400, r.text


async def test_base_uri_is_percent_encoded_and_usable(client, name):
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": "hello"}])
    group = "team a?b#c%d"
    r = await client.post(
        f"/consumers/{quote(group, safe='')}",
        json={"name": "me", "format": "string", "auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200, r.text
    base_uri = r.json()["base_uri"]
    assert base_uri.endswith("/consumers/team%20a%3Fb%23c%25d/instances/me")
    path = urlsplit(base_uri).path  # as a client would follow it
    r = await client.post(f"{path}/subscription", json={"topics": [name]}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    got: list[dict[str, object]] = []
    for _ in range(20):
        r = await client.get(f"{path}/records", params={"timeout": 500}, headers={"Accept": STRING})
        assert r.status_code == 200, r.text
        got += r.json()
        if got:
            break
    assert [x["value"] for x in got] == ["hello"]
    assert (await client.delete(path, headers={"Content-Type": V2})).status_code == 204


async def test_base_uri_comes_from_an_allowed_host_never_a_forged_one(client, gateway):
    port = gateway.settings.port

    async def base_uri(host: str) -> str:
        r = await client.post("/consumers/g", json={}, headers={"Content-Type": V2, "Host": host})
        assert r.status_code == 200, r.text
        uri = r.json()["base_uri"]
        await client.delete(urlsplit(uri).path, headers={"Content-Type": V2})
        return str(uri)

    assert (await base_uri("localhost:9999")).startswith("http://localhost:9999/consumers/g/instances/")
    assert (await base_uri("[::1]:81")).startswith("http://[::1]:81/consumers/g/")
    for forged in ("evil.example", "evil.example:8082", "127.0.0.1@evil.example", "a b", "x:notaport"):
        assert (await base_uri(forged)).startswith(f"http://127.0.0.1:{port}/consumers/g/"), forged
    r = await client.get("/v3/clusters", headers={"Host": "evil.example"})
    assert r.json()["data"][0]["metadata"]["self"].startswith(f"http://127.0.0.1:{port}/v3/clusters/")


async def test_allowed_hosts_and_advertised_url_are_settings(tmp_path):
    for n, (overrides, host, expected) in enumerate(
        (
            ({"allowed_hosts": "gw.internal"}, "gw.internal:8082", "http://gw.internal:8082/"),
            ({"allowed_hosts": "*"}, "anything.example", "http://anything.example/"),
            ({"advertised_url": "https://rest.example.com/"}, "evil.example", "https://rest.example.com/"),
        )
    ):
        gw = await start_gateway(tmp_path / str(n), **overrides)
        try:
            r = await gw.client.post("/consumers/g", json={}, headers={"Content-Type": V2, "Host": host})
            assert r.json()["base_uri"].startswith(expected + "consumers/g/instances/"), overrides
        finally:
            await gw.client.aclose()
            await gw.stop()


async def test_an_instance_name_is_any_text_that_is_one_path_segment(client, name):
    await create_topic(client, name, 1)
    r = await client.post("/consumers/g", json={"name": "any name? #1 ü"}, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text
    path = urlsplit(r.json()["base_uri"]).path
    assert path == "/consumers/g/instances/any%20name%3F%20%231%20%C3%BC"
    r = await client.post(f"{path}/subscription", json={"topics": [name]}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    assert (await client.delete(path, headers={"Content-Type": V2})).status_code == 204
    for bad in ("a/b", ".", "..", "x" * 256):
        r = await client.post("/consumers/g", json={"name": bad}, headers={"Content-Type": V2})
        assert r.status_code == 422 and r.json()["error_code"] == 42204, bad
