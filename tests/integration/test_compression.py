"""Compressed bodies through a real gateway: request bodies coded gzip or zstd are taken as if
sent plain, under the same limits on their decoded bytes; a bomb, a body that is not its coding,
or a coding not decoded here get a clear 4xx; record reads answer coded by ``Accept-Encoding``
(stateless reads, long-polls, share-group polls, Server-Sent Events) when ``COMPRESSION`` is on,
small answers plain."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import zstandard

from service.client import GatewayClient
from service.wire.codings import Coding
from tests.conftest import RunningGateway, running_gateway
from tests.helpers import JSON, STRING, V2, consumer, create_topic, produce, subscribe
from tests.integration.test_share_groups_api import share_consumer, share_subscribe
from tests.stream_client import EVENT_STREAM

CODINGS: list[Coding] = ["gzip", "zstd"]


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """A gateway that codes record reads' answers (``COMPRESSION``, off by default)."""
    async with running_gateway(tmp_path / "data", compression=True) as gw:
        yield gw


def coded(coding: Coding, data: bytes) -> bytes:
    return gzip.compress(data, mtime=0) if coding == "gzip" else zstandard.ZstdCompressor().compress(data)


def plain(coding: str, data: bytes) -> bytes:
    """An answer's bytes as they came over the wire, decoded here (not by httpx)."""
    if coding == "gzip":
        return gzip.decompress(data)
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def records_body(n: int, pad: int = 40) -> bytes:
    return json.dumps({"records": [{"value": {"n": i, "pad": "x" * pad}} for i in range(n)]}).encode()


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast path", "routes"])
@pytest.mark.parametrize("coding", CODINGS)
async def test_a_coded_produce_is_stored_as_if_sent_plain(
    tmp_path: Path, coding: Coding, fast_path: bool, name: str
) -> None:
    async with running_gateway(tmp_path / "data", produce_fast_path=fast_path) as gw:
        body = records_body(300)
        r = await gw.client.post(
            f"/topics/{name}",
            content=coded(coding, body),
            headers={"Content-Type": JSON, "Content-Encoding": coding},
        )
        assert r.status_code == 200, r.text
        assert [o["offset"] for o in r.json()["offsets"]] == list(range(300))
        r = await gw.client.get(
            f"/topics/{name}/partitions/0/records",
            params={"offset": 0},
            headers={"Accept": JSON},
        )
        assert [rec["value"]["n"] for rec in r.json()["records"]] == list(range(300))


@pytest.mark.parametrize("coding", CODINGS)
async def test_control_bodies_may_be_coded_too(client: httpx.AsyncClient, coding: Coding, name: str) -> None:
    await create_topic(client, name)
    body = json.dumps({"format": "string", "auto.offset.reset": "earliest"}).encode()
    r = await client.post(
        f"/consumers/g-{name}",
        content=coded(coding, body),
        headers={"Content-Type": V2, "Content-Encoding": coding},
    )
    assert r.status_code == 200, r.text
    base = r.json()["base_uri"]
    body = json.dumps({"topics": [name]}).encode()
    r = await client.post(
        f"{base}/subscription",
        content=coded(coding, body),
        headers={"Content-Type": V2, "Content-Encoding": coding},
    )
    assert r.status_code == 204, r.text


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast path", "routes"])
@pytest.mark.parametrize("coding", CODINGS)
async def test_a_bomb_gets_413_at_once_and_the_gateway_goes_on(
    tmp_path: Path, coding: Coding, fast_path: bool, name: str
) -> None:
    async with running_gateway(
        tmp_path / "data", produce_fast_path=fast_path, max_request_bytes=1 << 20
    ) as gw:
        bomb = coded(coding, b'{"records": [{"value": "' + b"A" * (512 << 20) + b'"}]}')  # 512 MiB
        assert len(bomb) < 2 << 20
        started = time.monotonic()
        r = await gw.client.post(
            f"/topics/{name}", content=bomb, headers={"Content-Type": STRING, "Content-Encoding": coding}
        )
        spent = time.monotonic() - started
        assert r.status_code == 413, r.text
        assert r.json() == {
            "error_code": 41301,
            "message": f"Request body decodes ({coding}) to more than the limit of 1048576 bytes.",
        }
        print(f"{coding} bomb of {len(bomb)} bytes refused in {spent * 1000:.0f} ms")
        # what the limit allows still goes, coded or not
        await produce(gw.client, name, [{"value": "after"}])
        r = await gw.client.post(
            f"/topics/{name}",
            content=coded(coding, records_body(100)),
            headers={"Content-Type": JSON, "Content-Encoding": coding},
        )
        assert r.status_code == 200, r.text


async def test_the_limit_counts_decoded_bytes(tmp_path: Path, name: str) -> None:
    async with running_gateway(tmp_path / "data", max_request_bytes=4096) as gw:
        body = records_body(200)  # some 13 KB, coded in a few hundred bytes
        r = await gw.client.post(
            f"/topics/{name}",
            content=coded("gzip", body),
            headers={"Content-Type": JSON, "Content-Encoding": "gzip"},
        )
        assert r.status_code == 413 and r.json()["error_code"] == 41301, r.text


@pytest.mark.parametrize(
    ("encoding", "content", "status", "message"),
    [
        ("br", b"{}", 415, "may be coded gzip or zstd (one of them), not 'br'"),
        ("gzip, zstd", b"{}", 415, "one of them"),
        ("gzip", b'{"records": []}', 400, "not valid gzip"),
        ("zstd", b'{"records": []}', 400, "not valid zstd"),
        (
            "gzip",
            gzip.compress(b'{"records": [{"value": "a"}]}', mtime=0)[:-6],
            400,
            "ends before its gzip stream does",
        ),
    ],
    ids=["br", "two codings", "not gzip", "not zstd", "gzip cut short"],
)
async def test_a_body_not_its_coding_or_a_coding_not_decoded_is_refused(
    client: httpx.AsyncClient, name: str, encoding: str, content: bytes, status: int, message: str
) -> None:
    r = await client.post(
        f"/topics/{name}", content=content, headers={"Content-Type": STRING, "Content-Encoding": encoding}
    )
    assert r.status_code == status, r.text
    assert r.json()["error_code"] in (status, 41301) and message in r.json()["message"], r.text


async def test_identity_is_no_coding(client: httpx.AsyncClient, name: str) -> None:
    body = json.dumps({"records": [{"value": "a"}]}).encode()
    r = await client.post(
        f"/topics/{name}", content=body, headers={"Content-Type": STRING, "Content-Encoding": "identity"}
    )
    assert r.status_code == 200, r.text


async def _read_raw(
    client: httpx.AsyncClient, method: str, url: str, accept_encoding: str, **kw: Any
) -> httpx.Response:
    """The answer with its body as it came over the wire (httpx decodes nothing of it)."""
    headers = {"Accept-Encoding": accept_encoding, **kw.pop("headers", {})}
    async with client.stream(method, url, headers=headers, **kw) as response:
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
    response._content = raw  # what .json() and .content read (after decoding it in the test)
    return response


@pytest.mark.parametrize("coding", CODINGS)
async def test_record_reads_answer_coded_when_big_and_plain_when_small(
    client: httpx.AsyncClient, coding: Coding, name: str
) -> None:
    await create_topic(client, name)
    await produce(client, name, [{"value": {"n": i, "pad": "x" * 40}} for i in range(200)], fmt=JSON)
    url = f"/topics/{name}/partitions/0/records"
    wanted = {"Accept": JSON}
    big = await _read_raw(client, "GET", url, coding, params={"offset": 0}, headers=wanted)
    assert big.headers["content-encoding"] == coding and big.headers["vary"] == "Accept-Encoding"
    assert int(big.headers["content-length"]) == len(big.content)
    decoded = json.loads(plain(coding, big.content))
    assert [rec["value"]["n"] for rec in decoded["records"]] == list(range(200))
    assert len(big.content) * 5 < len(plain(coding, big.content))  # repetitive records: far smaller
    small = await _read_raw(client, "GET", url, coding, params={"offset": 0, "max_bytes": 1}, headers=wanted)
    assert "content-encoding" not in small.headers and small.headers["vary"] == "Accept-Encoding"
    assert json.loads(small.content)["records"][0]["value"]["n"] == 0
    unasked = await _read_raw(client, "GET", url, "identity", params={"offset": 0}, headers=wanted)
    assert (
        "content-encoding" not in unasked.headers
        and json.loads(unasked.content)["records"][199]["value"]["n"] == 199
    )
    # an answer other than a record read is left as it is
    listing = await _read_raw(client, "GET", "/topics", coding)
    assert "content-encoding" not in listing.headers and name in json.loads(listing.content)


@pytest.mark.parametrize("coding", CODINGS)
async def test_long_polls_and_share_polls_answer_coded(
    client: httpx.AsyncClient, coding: Coding, name: str
) -> None:
    await create_topic(client, name)
    values = [f"value-{i:04d}-" + "y" * 30 for i in range(300)]
    await produce(client, name, [{"value": v} for v in values])
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, name)
    got: list[str] = []
    codings: set[str | None] = set()
    while len(got) < 300:
        r = await _read_raw(
            client, "GET", f"{base}/records", coding, params={"timeout": 1000}, headers={"Accept": STRING}
        )
        assert r.status_code == 200
        codings.add(r.headers.get("content-encoding"))
        body = plain(coding, r.content) if r.headers.get("content-encoding") == coding else r.content
        got += [rec["value"] for rec in json.loads(body)]
    assert got == values and coding in codings
    share = await share_consumer(client, f"s-{name}")
    await share_subscribe(client, share, name)
    shared: list[str] = []
    coded_methods: set[str] = set()
    for method, kw in [("GET", {}), ("POST", {"json": {"acknowledgements": []}})] * 5:
        r = await _read_raw(
            client,
            method,
            f"{share}/records",
            coding,
            params={"timeout": 1000},
            headers={"Accept": STRING},
            **kw,
        )
        assert r.status_code == 200
        if r.headers.get("content-encoding") == coding:
            coded_methods.add(method)
            shared += [rec["value"] for rec in json.loads(plain(coding, r.content))]
        else:
            assert len(r.content) < 1024, r.headers  # only a small answer goes plain
            shared += [rec["value"] for rec in json.loads(r.content)]
    assert sorted(shared) == values  # every record, acquired once (none acknowledged: all held)
    assert coded_methods, "no share poll answered coded"


@pytest.mark.parametrize("coding", CODINGS)
async def test_a_stream_comes_coded_event_by_event(
    client: httpx.AsyncClient, coding: Coding, name: str
) -> None:
    await create_topic(client, name)
    base = await consumer(client, f"g-{name}", reset="latest")
    await subscribe(client, base, name)
    reader: Any = zstandard.ZstdDecompressor().decompressobj() if coding == "zstd" else zlib.decompressobj(31)
    headers = {"Accept": EVENT_STREAM, "Accept-Encoding": coding}
    async with client.stream("GET", f"{base}/records", headers=headers) as response:
        assert response.headers["content-encoding"] == coding and "content-length" not in response.headers
        chunks = response.aiter_raw()
        text = b""
        while b"\nid:" not in text and not text.startswith(b"id:"):  # the stream's cursor, at once
            chunk = await anext(chunks)
            text += reader.decompress(chunk)
        await produce(client, name, [{"value": "first"}])
        while b'"first"' not in text:  # decoded as soon as it came: each event is flushed
            chunk = await anext(chunks)
            text += reader.decompress(chunk)
    assert b"event: records" in text


async def test_compression_off_by_default_answers_plain(tmp_path: Path, name: str) -> None:
    async with running_gateway(tmp_path / "data") as gw:  # COMPRESSION is off by default
        await produce(gw.client, name, [{"value": "z" * 100} for _ in range(100)])
        r = await _read_raw(
            gw.client,
            "GET",
            f"/topics/{name}/partitions/0/records",
            "gzip, zstd",
            params={"offset": 0},
            headers={"Accept": STRING},
        )
        assert "content-encoding" not in r.headers and len(json.loads(r.content)["records"]) == 100
        r = await gw.client.post(  # request bodies are decoded all the same
            f"/topics/{name}",
            content=coded("zstd", records_body(3)),
            headers={"Content-Type": JSON, "Content-Encoding": "zstd"},
        )
        assert r.status_code == 200, r.text


@pytest.mark.parametrize("coding", CODINGS)
async def test_the_python_client_sends_coded_bodies_when_asked(
    gateway: RunningGateway, coding: Coding, name: str
) -> None:
    def calls() -> list[int]:
        with GatewayClient(gateway.url, compress=coding) as gc:
            gc.create_topic(name)  # a control body, coded too
            return [o.offset for o in gc.produce(name, [{"value": f"v{i}"} for i in range(50)])]

    assert await asyncio.to_thread(calls) == list(range(50))
    with pytest.raises(ValueError, match="compress is one of"):
        GatewayClient(gateway.url, compress="br")
    r = await gateway.client.get(
        f"/topics/{name}/partitions/0/records", params={"offset": 0}, headers={"Accept": STRING}
    )
    assert [rec["value"] for rec in r.json()["records"]] == [f"v{i}" for i in range(50)]


async def test_metrics_count_the_coded_bodies_and_their_bytes(client: httpx.AsyncClient, name: str) -> None:
    body = records_body(100)
    r = await client.post(
        f"/topics/{name}",
        content=coded("zstd", body),
        headers={"Content-Type": JSON, "Content-Encoding": "zstd"},
    )
    assert r.status_code == 200, r.text
    r = await _read_raw(
        client,
        "GET",
        f"/topics/{name}/partitions/0/records",
        "gzip",
        params={"offset": 0},
        headers={"Accept": JSON},
    )
    wire = len(r.content)
    metrics = (await client.get("/metrics")).text
    assert 'brokergate_http_coded_bodies_total{coding="zstd",direction="request"} 1.0' in metrics
    plain = 'brokergate_http_coded_bytes_total{coding="zstd",direction="request",form="plain"}'
    assert f"{plain} {float(len(body))}" in metrics
    assert 'brokergate_http_coded_bodies_total{coding="gzip",direction="answer"} 1.0' in metrics
    assert (
        f'brokergate_http_coded_bytes_total{{coding="gzip",direction="answer",form="coded"}} {float(wire)}'
        in metrics
    )
