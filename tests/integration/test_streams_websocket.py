"""The WebSocket stream of a consumer instance: push under credit, acknowledgement, produce.

What a client sees, careful or not: never more records or bytes than it granted, commits and
seeks answered in order with the records, produce with offsets back, an answer to every bad
message without losing the connection, a too-large message refused, a client that never reads
holding one batch and then dropped, the bound on open streams, the handshake refused as a poll
would be, a rebalance, a resume from a cursor, the lifetime, ACLs taken away mid-stream, and the
produce quota.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from service.api import topics as topics_api
from service.security.users import add_user
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import BINARY, STRING, V2, consumer, create_topic, produce, subscribe
from tests.stream_client import receive, send, socket_url


async def _instance(client: httpx.AsyncClient, topic: str, **config: Any) -> str:
    base = await consumer(client, f"g-{topic}", **config)
    await subscribe(client, base, topic)
    return base


async def _opened(ws: ClientConnection) -> dict[str, Any]:
    """Past ``hello``: the first ``rebalance``, which names the partitions and where each starts."""
    await receive(ws, "hello")
    return await receive(ws, "rebalance")


async def _quiet(ws: ClientConnection, seconds: float = 0.4) -> list[dict[str, Any]]:
    """Every message that comes until none has for ``seconds``."""
    got = []
    while True:
        try:
            got.append(await receive(ws, timeout=seconds))
        except TimeoutError:
            return got


@pytest.mark.parametrize("log_backend", ["embedded", "kafka"])
async def test_the_gateway_never_sends_more_than_the_credit_granted(
    client: httpx.AsyncClient, name: str
) -> None:
    await create_topic(client, name, 2)
    sizes = [10 + (i * 37) % 90 for i in range(60)]
    await produce(client, name, [{"value": "x" * size, "partition": i % 2} for i, size in enumerate(sizes)])
    base = await _instance(client, name, reset="earliest")
    async with connect(socket_url(base)) as ws:
        opened = await _opened(ws)
        assert opened["cursor"] == f"{name}:0:0,{name}:1:0"
        assert await _quiet(ws) == []  # no credit, no records
        outstanding_records = outstanding_bytes = 0
        seen: list[tuple[int, int]] = []
        blocked = 0
        for _ in range(100):
            if len(seen) == len(sizes):
                break
            await send(ws, "credit", records=5, bytes=250)
            outstanding_records += 5
            outstanding_bytes += 250
            for message in await _quiet(ws, 0.2):
                if message["type"] == "error":  # the next record alone weighs more than is left
                    assert message["error_code"] == 41301 and "grant more bytes" in message["message"]
                    assert "id" not in message
                    blocked += 1
                    continue
                assert message["type"] == "records", message
                weight = sum(len(r["value"]) for r in message["records"])
                assert message["bytes"] == weight
                assert len(message["records"]) <= outstanding_records and weight <= outstanding_bytes
                outstanding_records -= len(message["records"])
                outstanding_bytes -= weight
                seen.extend((r["partition"], r["offset"]) for r in message["records"])
        assert sorted(seen) == sorted((i % 2, i // 2) for i in range(len(sizes)))  # each once
        assert blocked  # some record came when what was left did not hold it
        assert message["cursor"] == f"{name}:0:30,{name}:1:30"


async def test_commit_seek_and_produce_over_one_socket(client: httpx.AsyncClient, name: str) -> None:
    await create_topic(client, name, 2)
    base = await _instance(client, name, fmt="json", reset="earliest")
    async with connect(socket_url(base)) as ws:
        await _opened(ws)
        await send(ws, "credit", records=100, bytes=1 << 20)
        records = [{"value": {"n": i}, "partition": 0} for i in range(3)]
        await send(ws, "produce", id="p1", topic=name, records=records)  # the instance's format: json
        produced = await receive(ws, "produced")
        assert produced["id"] == "p1" and [o["offset"] for o in produced["offsets"]] == [0, 1, 2]
        got = await receive(ws, "records")
        assert [r["value"] for r in got["records"]] == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert got["positions"] == [
            {"topic": name, "partition": 0, "offset": 3},
            {"topic": name, "partition": 1, "offset": 0},
        ]

        # A produce the REST route would refuse is refused alike, answered by its id.
        value = base64.b64encode(b"raw").decode()
        await send(ws, "produce", id=7, topic=name, partition=9, format="binary", records=[{"value": value}])
        refused = await receive(ws, "error")
        assert (refused["id"], refused["error_code"]) == (7, 40402)
        text = [{"value": '{"n": 9}'}]  # a format of the message's own: JSON text in it
        await send(ws, "produce", id="p2", topic=name, partition=1, format="string", records=text)
        assert (await receive(ws, "produced"))["offsets"][0]["partition"] == 1
        assert (await receive(ws, "records"))["records"][0]["value"] == {"n": 9}  # the instance's format

        # Commit what was processed; without offsets, everything sent.
        await send(ws, "commit", id="c1", offsets=[{"topic": name, "partition": 0, "offset": 1}])
        assert (await receive(ws, "committed"))["offsets"] == [{"topic": name, "partition": 0, "offset": 2}]
        await send(ws, "commit", id="c2")
        done = await receive(ws, "committed")
        assert done["id"] == "c2" and [o["offset"] for o in done["offsets"]] == [3, 1]
        r = await client.request("GET", f"{base}/offsets", headers={"Content-Type": V2})
        assert sorted(o["offset"] for o in r.json()["offsets"]) == [1, 3]

        # Seek back: answered with where it stands, then the records from there.
        await send(ws, "seek", id="s1", beginning=[{"topic": name, "partition": 0}])
        sought = await receive(ws, "seeked")
        assert sought["id"] == "s1" and sought["cursor"] == f"{name}:0:0,{name}:1:1"
        assert [r["offset"] for r in (await receive(ws, "records"))["records"]] == [0, 1, 2]
        await send(ws, "seek", id="s2", offsets=[{"topic": name, "partition": 0, "offset": 2}])
        assert (await receive(ws, "seeked"))["cursor"] == f"{name}:0:2,{name}:1:1"
        assert [r["offset"] for r in (await receive(ws, "records"))["records"]] == [2]
        await send(ws, "seek", id="s3", offsets=[{"topic": "elsewhere", "partition": 0, "offset": 0}])
        assert (await receive(ws, "error"))["error_code"] == 40903  # not its partition

        # A record the instance's format cannot show ends the stream, saying where it stood.
        binary = [{"value": value}]
        await send(ws, "produce", id="p3", topic=name, partition=0, format="binary", records=binary)
        await receive(ws, "produced")
        end = await receive(ws, "end")
        assert (end["reason"], end["error_code"]) == ("error", 42203)
        assert end["cursor"] == f"{name}:0:3,{name}:1:1"


async def test_a_bad_message_is_answered_and_the_stream_goes_on(client: httpx.AsyncClient, name: str) -> None:
    await create_topic(client, name, 1)
    base = await _instance(client, name, reset="earliest")
    await produce(client, name, [{"value": "v"}])
    async with connect(socket_url(base)) as ws:
        await _opened(ws)
        for bad in (
            "not json",
            "[1, 2]",
            '{"type": "fly", "id": "q1"}',
            '{"v": 2, "type": "credit", "records": 1}',
            '{"type": "credit", "records": -5, "bytes": 10}',
            '{"type": "credit", "records": 1000000000, "bytes": 10}',
            '{"type": "commit", "id": 3, "offsets": [{"topic": "t", "partition": 0, "offset": -1}]}',
            '{"type": "seek", "id": "s"}',
            '{"type": "produce", "id": "p", "topic": "no/such", "records": [{"value": "x"}]}',
            '{"type": "produce", "id": "p", "topic": "t", "records": "none"}',
        ):
            await ws.send(bad)
            answer = await receive(ws, "error")
            # 400: records that are no list, as Confluent's JSON binding refuses them in a produce
            assert answer["error_code"] in (42206, 42207, 400), (bad, answer)
            request = json.loads(bad).get("id") if bad.startswith("{") else None
            assert answer.get("id") == request, (bad, answer)
        await ws.send(b"\xff\xfe binary garbage")
        assert (await receive(ws, "error"))["error_code"] == 42206
        await send(ws, "credit", records=10, bytes=1000)  # still streaming
        assert [r["value"] for r in (await receive(ws, "records"))["records"]] == ["v"]


async def test_a_seek_to_a_timestamp_out_of_range_is_refused(client: httpx.AsyncClient, name: str) -> None:
    await create_topic(client, name, 1)
    base = await _instance(client, name, reset="earliest")
    await produce(client, name, [{"value": "v"}])
    async with connect(socket_url(base)) as ws:
        await _opened(ws)
        for request, timestamp in (
            ("past-int64", 1 << 63),  # what the log stores a timestamp in cannot hold it
            ("before-1970", "1969-12-31T23:59:59.999Z"),  # -1 ms: Kafka's "latest"
        ):
            at = [{"topic": name, "partition": 0, "timestamp": timestamp}]
            await send(ws, "seek", id=request, timestamps=at)
            refused = await receive(ws, "error")
            assert (refused["id"], refused["error_code"]) == (request, 42206), refused
        await send(ws, "credit", records=10, bytes=1000)  # the stream goes on, from where it was
        assert [r["offset"] for r in (await receive(ws, "records"))["records"]] == [0]


async def test_a_produce_that_fails_unexpectedly_is_answered_and_the_stream_goes_on(
    client: httpx.AsyncClient, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(client, name, 1)
    base = await _instance(client, name)

    async def broken(*args: Any, **kwargs: Any) -> bytes:
        raise RuntimeError("a bug of the gateway's")

    async with connect(socket_url(base)) as ws:
        await _opened(ws)
        with monkeypatch.context() as patched:
            patched.setattr(topics_api, "store_records", broken)
            await send(ws, "produce", id="p1", topic=name, records=[{"value": "x"}])
            failed = await receive(ws, "error")
        assert (failed["id"], failed["error_code"]) == ("p1", 50001)  # as the REST produce's 500
        await send(ws, "produce", id="p2", topic=name, records=[{"value": "y"}])
        assert (await receive(ws, "produced"))["id"] == "p2"


async def test_a_produce_being_stored_when_the_stream_ends_is_stored_and_answered_first(
    client: httpx.AsyncClient, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(client, name, 2)
    base = await _instance(client, name)
    storing, stored = asyncio.Event(), asyncio.Event()
    store_records = topics_api.store_records

    async def slow(*args: Any, **kwargs: Any) -> bytes:
        storing.set()
        await stored.wait()
        return await store_records(*args, **kwargs)

    monkeypatch.setattr(topics_api, "store_records", slow)
    async with connect(socket_url(base)) as ws:
        await _opened(ws)
        records = [{"value": "a", "partition": 0}, {"value": "b", "partition": 1}]
        await send(ws, "produce", id="p", topic=name, records=records)
        await storing.wait()
        await send(ws, "produce", id="queued", topic=name, records=[{"value": "c"}])
        assert (await client.delete(base)).status_code == 204  # the stream ends at its next look
        await asyncio.sleep(1.5)
        stored.set()
        produced = await receive(ws)
        assert (produced["type"], produced["id"]) == ("produced", "p"), produced
        assert (await receive(ws, "end"))["reason"] == "deleted"
    for partition, value in ((0, "a"), (1, "b")):  # stored whole; the one queued behind it not at all
        r = await client.get(f"/topics/{name}/partitions/{partition}/records", headers={"Accept": STRING})
        assert [record["value"] for record in r.json()["records"]] == [value]


async def test_a_message_over_the_limit_closes_the_socket(tmp_path: Path, name: str) -> None:
    gw = await start_gateway(tmp_path / "data", stream_max_message_bytes=2048)
    try:
        await create_topic(gw.client, name, 1)
        base = await _instance(gw.client, name)
        async with connect(socket_url(base), max_size=None) as ws:
            await _opened(ws)
            await send(ws, "produce", topic=name, records=[{"value": "x" * 4096}])
            with pytest.raises(ConnectionClosed) as closed:
                await _quiet(ws, 5)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    finally:
        await gw.client.aclose()
        await gw.stop()


@pytest.mark.parametrize("protocol", ["gateway", "uvicorn"])
async def test_messages_of_every_length_arrive_whole(tmp_path: Path, name: str, protocol: str) -> None:
    """A batch of a few bytes, of more than 125 and of more than 65535 (the three lengths a frame's
    header encodes), on the gateway's WebSocket protocol, which writes a batch's parts as they are,
    and on uvicorn's own, under which the stream sends ASGI's ``text``."""
    gw = await start_gateway(tmp_path / "data", ws=None if protocol == "gateway" else "websockets-sansio")
    try:
        await create_topic(gw.client, name, 1)
        sizes = (1, 200, 70_000)
        await produce(gw.client, name, [{"value": "x" * size} for size in sizes])
        base = await _instance(gw.client, name, reset="earliest")
        async with connect(socket_url(base), max_size=None) as ws:
            await _opened(ws)
            for size in sizes:  # one record at a time: each its own message
                await send(ws, "credit", records=1, bytes=size)
                message = await receive(ws, "records")
                assert [len(r["value"]) for r in message["records"]] == [size]
            await send(ws, "commit", id="c")
            assert (await receive(ws, "committed"))["id"] == "c"
    finally:
        await gw.client.aclose()
        await gw.stop()


@pytest.fixture
async def bounded(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """One stream at most, and a client that takes nothing for a second is dropped."""
    gw = await start_gateway(
        tmp_path / "data", max_open_streams=1, stream_send_timeout_ms=1000, flush="never"
    )
    try:
        yield gw
    finally:
        await gw.client.aclose()
        await gw.stop()


def _consumed(metrics: str, topic: str) -> int:
    found = re.search(rf'brokergate_consumed_records_total{{topic="{re.escape(topic)}"}} (\S+)', metrics)
    return int(float(found.group(1))) if found else 0


async def _never_reading(port: int, path: str) -> asyncio.StreamWriter:
    """A WebSocket client that grants all the credit it may, then reads nothing: a raw socket with a
    small receive buffer, reading paused after the handshake (a WebSocket library would read on)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1024)
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    key = base64.b64encode(b"never-reads-key!").decode()
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: gateway\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 101")
    credit = json.dumps({"v": 1, "type": "credit", "records": 10_000, "bytes": 64 << 20}).encode()
    writer.write(bytes([0x81, 0x80 | len(credit)]) + b"\0\0\0\0" + credit)  # a masked text frame, mask 0
    await writer.drain()
    writer.transport.pause_reading()
    return writer


async def test_a_client_that_never_reads_holds_one_batch_and_is_dropped(
    bounded: RunningGateway, name: str
) -> None:
    client = bounded.client
    await create_topic(client, name, 1)
    value = base64.b64encode(b"x" * 10_000).decode()
    for _ in range(24):  # 24 MB, far more than the connection's buffers hold
        r = await client.post(
            f"/topics/{name}/partitions/0",
            content=json.dumps({"records": [{"value": value}] * 100}),
            headers={"Content-Type": BINARY},
        )
        assert r.status_code == 200, r.text
    base = await _instance(client, name, fmt="binary", reset="earliest")
    writer = await _never_reading(bounded.settings.port, "/" + base.split("/", 3)[3] + "/records")
    try:
        await asyncio.sleep(1.0)
        early = _consumed((await client.get("/metrics")).text, name)
        await asyncio.sleep(1.5)
        late = _consumed((await client.get("/metrics")).text, name)
        assert late == early, "the gateway went on polling for a client that reads nothing"
        assert 0 < late < 1200, late  # what the buffers of one connection hold, not the 2400 there are
        # Dropped after the send timeout: its place among the open streams is free again.
        other = await _instance(client, f"{name}-x")
        async with connect(socket_url(other)) as second:
            assert (await receive(second))["type"] == "hello"
    finally:
        writer.close()


async def test_streams_past_the_bound_are_refused(bounded: RunningGateway, name: str) -> None:
    client = bounded.client
    await create_topic(client, name, 1)
    base = await _instance(client, name)
    async with connect(socket_url(base)) as ws:
        await _opened(ws)
        with pytest.raises(InvalidStatus) as refused:
            async with connect(socket_url(base)):
                pass
        response = refused.value.response
        assert response.status_code == 503 and int(response.headers["Retry-After"]) >= 1
        assert json.loads(response.body)["error_code"] == 50301


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def test_a_handshake_is_refused_as_the_poll_would_be(client: httpx.AsyncClient, name: str) -> None:
    await create_topic(client, name, 1)
    base = await _instance(client, name)
    server_log = _Lines()
    logging.getLogger("uvicorn.error").addHandler(server_log)
    for url, status, code in (
        (socket_url(base.rsplit("/", 1)[0] + "/nobody"), 404, 40403),
        (socket_url(base, cursor="garbage"), 422, 42206),
    ):
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url):
                pass
        assert refused.value.response.status_code == status
        assert json.loads(refused.value.response.body)["error_code"] == code
    await asyncio.sleep(0.3)  # the server is done with the connections it refused
    logging.getLogger("uvicorn.error").removeHandler(server_log)
    assert not server_log.lines  # answered, and the server knows it: nothing to log


async def test_a_second_member_rebalances_and_a_cursor_resumes_exactly(
    client: httpx.AsyncClient, name: str
) -> None:
    await create_topic(client, name, 2)
    await produce(client, name, [{"value": f"v{i}", "partition": i % 2} for i in range(6)])
    base = await _instance(client, name, reset="earliest")
    async with connect(socket_url(base)) as ws:
        await _opened(ws)
        await send(ws, "credit", records=2, bytes=1000)
        first = await receive(ws, "records")
        processed = first["cursor"]
        await send(ws, "credit", records=2, bytes=1000)
        await receive(ws, "records")  # lost before it was processed
    async with connect(socket_url(base, cursor=processed)) as ws:
        assert (await _opened(ws))["cursor"] == processed
        await send(ws, "credit", records=100, bytes=1000)
        rest = [r["value"] for r in (await receive(ws, "records"))["records"]]
        seen = [r["value"] for r in first["records"]]
        assert sorted(seen + rest) == [f"v{i}" for i in range(6)]  # nothing lost, nothing twice

        second = await consumer(client, f"g-{name}")
        await subscribe(client, second, name)
        rebalance = await receive(ws, "rebalance")
        assert len(rebalance["partitions"]) == 1
        [kept] = rebalance["partitions"]
        assert rebalance["cursor"] == f"{name}:{kept['partition']}:3"


async def test_a_stream_without_credit_still_ends_at_its_lifetime(tmp_path: Path, name: str) -> None:
    gw = await start_gateway(tmp_path / "data", stream_max_lifetime_ms=600)
    try:
        await create_topic(gw.client, name, 1)
        base = await _instance(gw.client, name)
        async with connect(socket_url(base)) as ws:
            await _opened(ws)  # and no credit: the gateway waits for some
            end = await receive(ws, "end", timeout=5)
            assert (end["reason"], end["error_code"]) == ("error", 50301)
            assert "longest time" in end["message"]
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            assert ws.close_code == 1011
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_acls_taken_away_mid_stream_refuse_commands_and_end_it(tmp_path: Path, name: str) -> None:
    users = tmp_path / "users"
    add_user(users, "alice", "alice-pw")
    add_user(users, "admin", "admin-pw")
    gw = await start_gateway(
        tmp_path / "data", auth="basic", users_file=users, authorize=True, super_users="User:admin"
    )
    admin = gw.client
    admin.auth = httpx.BasicAuth("admin", "admin-pw")
    alice = httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth("alice", "alice-pw"))
    acls = f"/v3/clusters/{(await admin.get('/v3/clusters')).json()['data'][0]['cluster_id']}/acls"
    try:
        await create_topic(admin, name, 1)
        for resource, what in (("GROUP", f"g-{name}"), ("TOPIC", name)):
            binding = {
                "resource_type": resource,
                "resource_name": what,
                "pattern_type": "LITERAL",
                "principal": "User:alice",
                "host": "*",
                "operation": "READ",
                "permission": "ALLOW",
            }
            assert (await admin.post(acls, json=binding)).status_code == 201
        base = await _instance(alice, name, reset="earliest")
        credentials = {"Authorization": "Basic " + base64.b64encode(b"alice:alice-pw").decode()}
        async with connect(socket_url(base), additional_headers=credentials) as ws:
            await _opened(ws)
            await send(ws, "commit", id="c1")
            assert (await receive(ws, "committed"))["id"] == "c1"
            # READ on the group, which the REST poll and commit need, taken away mid-stream
            await admin.request("DELETE", acls, params={"resource_type": "GROUP", "principal": "User:alice"})
            await send(ws, "commit", id="c2")
            refused = await receive(ws, "error")
            assert (refused["id"], refused["error_code"]) == ("c2", 40301), refused
            end = await receive(ws, "end")
            assert (end["reason"], end["error_code"]) == ("error", 40301), end
    finally:
        await alice.aclose()
        await admin.aclose()
        await gw.stop()


async def test_authentication_and_the_produce_quota_hold_for_sockets(tmp_path: Path, name: str) -> None:
    users = tmp_path / "users"
    add_user(users, "alice", "alice-pw")
    add_user(users, "bob", "bob-pw")
    gw = await start_gateway(
        tmp_path / "data",
        auth="basic",
        users_file=users,
        quota_client_produce_bytes_per_s=100,
        quota_burst_s=1,
    )
    alice = httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth("alice", "alice-pw"))

    def credentials(user: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{user}-pw".encode()).decode()}

    try:
        await create_topic(alice, name, 1)
        base = await _instance(alice, name)
        with pytest.raises(InvalidStatus) as refused:  # no credentials
            async with connect(socket_url(base)):
                pass
        assert refused.value.response.status_code == 401
        with pytest.raises(InvalidStatus) as refused:  # alice's instance is not there for bob
            async with connect(socket_url(base), additional_headers=credentials("bob")):
                pass
        assert refused.value.response.status_code == 404
        async with connect(socket_url(base), additional_headers=credentials("alice")) as ws:
            await _opened(ws)
            await send(ws, "produce", id=1, topic=name, records=[{"value": "x" * 300}])
            assert (await receive(ws, "produced"))["id"] == 1
            await send(ws, "produce", id=2, topic=name, records=[{"value": "y"}])
            throttled = await receive(ws, "error")
            assert (throttled["id"], throttled["error_code"]) == (2, 42901)
    finally:
        await alice.aclose()
        await gw.client.aclose()
        await gw.stop()
