"""Connections a careless or hostile client opens: too many, too slow, too large, not HTTP.

Each gets a Confluent-shaped answer and its connection closed, and the gateway goes on
serving everyone else.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import orjson
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from service.server.protocol import LastResort
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import consumer, create_topic, subscribe
from tests.stream_client import receive, socket_url


@pytest.fixture
async def small_gateway(tmp_path):
    gw = await start_gateway(tmp_path / "gw", max_connections=3, header_timeout_ms=300, max_header_bytes=2048)
    try:
        yield gw
    finally:
        await gw.client.aclose()
        await gw.stop()


async def connect(
    gw: RunningGateway, source: str = "127.0.0.1"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw connection to ``gw`` from the loopback address ``source`` (any 127.x.y.z is this host)."""
    url = urlsplit(gw.url)
    return await asyncio.open_connection(url.hostname, url.port, local_addr=(source, 0))


async def answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], dict]:
    """The one response on a connection the gateway then closes: (status, headers, JSON body)."""
    raw = await asyncio.wait_for(reader.read(), 5)  # to EOF: the gateway closed the connection
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, orjson.loads(body)


def get(path: str = "/topics") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


async def test_past_max_connections_a_connection_gets_a_confluent_503_and_is_closed(small_gateway):
    held = [await connect(small_gateway) for _ in range(3)]
    for _, writer in held:  # each is in use: a request answered, the connection kept
        writer.write(get())
    for reader, _ in held:
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
    reader, writer = await connect(small_gateway)
    writer.write(get())
    status, headers, body = await answer(reader)
    assert status == 503 and headers["retry-after"] == "1" and headers["connection"] == "close"
    assert body["error_code"] == 50301 and "connections" in body["message"]
    for _, w in held:
        w.close()
    await asyncio.sleep(0.1)
    r = await small_gateway.client.get("/topics")  # room again
    assert r.status_code == 200


async def test_one_address_at_its_share_of_connections_does_not_stop_another(tmp_path):
    gw = await start_gateway(
        tmp_path / "gw", max_connections=10, max_connections_per_address=3, header_timeout_ms=5000
    )
    try:
        # Three sockets from one address that never finish their headers: its whole share.
        silent = [await connect(gw, "127.0.0.2") for _ in range(3)]
        for _, writer in silent:
            writer.write(b"GET /topics HTTP/1.1\r\n")
        await asyncio.sleep(0.1)
        reader, writer = await connect(gw, "127.0.0.2")
        writer.write(get())
        status, headers, body = await answer(reader)
        assert status == 503 and headers["retry-after"] == "1" and body["error_code"] == 50301
        assert "connections" in body["message"] and "one client" in body["message"]
        reader, writer = await connect(gw, "127.0.0.3")  # another address is served meanwhile
        writer.write(get())
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.close()
        for _, w in silent:
            w.close()
        await asyncio.sleep(0.1)
        reader, writer = await connect(gw, "127.0.0.2")  # its share is free again
        writer.write(get())
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.close()
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_websocket_keeps_the_place_of_the_connection_it_upgraded(tmp_path):
    gw = await start_gateway(tmp_path / "gw", max_connections=10, max_connections_per_address=1)
    try:
        await create_topic(gw.client, "t", 1)
        base = await consumer(gw.client, "g")
        await subscribe(gw.client, base, "t")
        source = "127.0.0.2"
        async with ws_connect(socket_url(base), local_addr=(source, 0)) as ws:
            await receive(ws, "hello")
            reader, writer = await connect(gw, source)  # the address's one place is the WebSocket's
            writer.write(get())
            status, _, body = await answer(reader)
            assert status == 503 and "one client may hold" in body["message"]
            with pytest.raises(InvalidStatus) as refused:  # and no second WebSocket gets past it
                await ws_connect(socket_url(base), local_addr=(source, 0))
            assert refused.value.response.status_code == 503
            assert refused.value.response.headers["Retry-After"] == "1"
        for _ in range(50):  # given back once the WebSocket is closed
            reader, writer = await connect(gw, source)
            writer.write(get())
            head = await reader.readuntil(b"\r\n\r\n")
            writer.close()
            if head.startswith(b"HTTP/1.1 200"):
                break
            await asyncio.sleep(0.05)
        assert head.startswith(b"HTTP/1.1 200"), head
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_trusted_proxy_is_held_to_the_whole_limit_not_to_one_address_share(tmp_path):
    # Loopback is trusted to forward its clients' addresses (uvicorn's FORWARDED_ALLOW_IPS default).
    gw = await start_gateway(tmp_path / "gw", max_connections=4, max_connections_per_address=1)
    try:
        held = [await connect(gw, "127.0.0.1") for _ in range(2)]
        for reader, writer in held:
            writer.write(get())
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        for _, writer in held:
            writer.close()
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_headers_slower_than_the_timeout_get_408_and_the_connection_is_closed(small_gateway):
    reader, writer = await connect(small_gateway)
    writer.write(b"GET /topics HTTP/1.1\r\nHost: x\r\n")  # and the rest never comes
    status, headers, body = await answer(reader)
    assert status == 408 and body["error_code"] == 40801 and headers["connection"] == "close"
    # A client that sends a byte now and then gets no more time.
    reader, writer = await connect(small_gateway)
    loop = asyncio.get_running_loop()
    start = loop.time()
    for piece in (b"GET /topics HTTP/1.1\r\n", b"Host: x\r\n", b"X-A: 1\r\n", b"X-B: 2\r\n"):
        writer.write(piece)
        await asyncio.sleep(0.1)
    status, _, _ = await answer(reader)
    assert status == 408 and loop.time() - start < 1.5


async def test_an_idle_connection_between_requests_is_held_to_the_same_timeout(small_gateway):
    reader, writer = await connect(small_gateway)
    writer.write(get())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    length = int(
        next(x for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")).split(b":")[1]
    )
    await reader.readexactly(length)
    writer.write(b"GET /topics HTTP/1.1\r\n")  # the next request starts, then stalls
    status, _, body = await answer(reader)
    assert status == 408 and body["error_code"] == 40801


async def test_a_request_that_takes_long_after_its_headers_is_not_cut_off(small_gateway):
    r = await small_gateway.client.get("/topics/nope/partitions/0/records", params={"timeout": 800})
    assert r.status_code == 404  # answered, not a 408 at 300 ms: only headers are timed


async def test_headers_over_the_limit_get_431_and_the_connection_is_closed(small_gateway):
    reader, writer = await connect(small_gateway)
    writer.write(b"GET /topics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 4096 + b"\r\n\r\n")
    status, _, body = await answer(reader)
    assert status == 431 and body["error_code"] == 43101 and "2048" in body["message"]
    reader, writer = await connect(small_gateway)
    writer.write(b"GET /" + b"a" * 4096 + b" HTTP/1.1\r\nHost: x\r\n\r\n")  # a long request line counts
    status, _, _ = await answer(reader)
    assert status == 431


async def test_bytes_that_are_not_http_get_a_confluent_400(small_gateway):
    reader, writer = await connect(small_gateway)
    writer.write(b"\x16\x03\x01 hello, is this TLS?\r\n\r\n")
    status, headers, body = await answer(reader)
    assert status == 400 and body["error_code"] == 40001
    assert headers["content-type"] == "application/vnd.kafka.v2+json"
    assert (await small_gateway.client.get("/topics")).status_code == 200


async def test_a_request_cancelled_before_it_answered_gets_a_confluent_503():
    sent: list[dict] = []

    async def cancelled(scope, receive, send):
        raise asyncio.CancelledError

    async def send(message):
        sent.append(message)

    await LastResort(cancelled)({"type": "http", "method": "GET", "path": "/"}, None, send)
    assert sent[0]["status"] == 503 and orjson.loads(sent[1]["body"])["error_code"] == 50301


async def test_an_exception_nothing_answered_gets_a_confluent_500_and_one_after_the_answer_is_kept():
    sent: list[dict] = []

    async def broken(scope, receive, send):
        raise RuntimeError("below the app's handlers")

    async def answered_then_broken(scope, receive, send):
        await send({"type": "http.response.start", "status": 500, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})
        raise RuntimeError("re-raised by Starlette after its handler answered")

    async def send(message):
        sent.append(message)

    await LastResort(broken)({"type": "http", "method": "GET", "path": "/"}, None, send)
    assert sent[0]["status"] == 500 and orjson.loads(sent[1]["body"])["error_code"] == 50001
    sent.clear()
    await LastResort(answered_then_broken)({"type": "http", "method": "GET", "path": "/"}, None, send)
    assert len(sent) == 2 and sent[1]["body"] == b"{}"
