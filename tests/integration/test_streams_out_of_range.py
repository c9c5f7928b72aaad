"""Streams of a consumer instance at a position past the log end reset as its polls do.

A cursor (SSE ``Last-Event-ID``) or a seek past the end is taken, and the stream's next read is
out of range: the instance resets by ``auto.offset.reset`` and the stream goes on from there,
instead of waiting at an offset no record will reach for a long time. A partition's stream, which
has no instance and so no policy, ends with the out-of-range error its read answers.
"""

from __future__ import annotations

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.helpers import V2, consumer, create_topic, produce, subscribe
from tests.stream_client import EventReader, events, receive, send, socket_url


async def _instance(client: httpx.AsyncClient, topic: str) -> str:
    await create_topic(client, topic, 1)
    await produce(client, topic, [{"value": f"v{i}"} for i in range(3)], partition=0)
    base = await consumer(client, f"g-{topic}", reset="earliest")
    await subscribe(client, base, topic)
    return base


async def test_an_sse_cursor_past_the_end_resets_the_stream(client: httpx.AsyncClient, name: str) -> None:
    base = await _instance(client, name)
    async with events(client, f"{base}/records", last_event_id=f"{name}:0:5000") as stream:
        assert [r["value"] for r in await stream.records(3)] == ["v0", "v1", "v2"]
        assert stream.last_event_id == f"{name}:0:3"


async def test_a_websocket_stream_past_the_end_resets(client: httpx.AsyncClient, name: str) -> None:
    base = await _instance(client, name)
    body = {"offsets": [{"topic": name, "partition": 0, "offset": 5000}]}
    r = await client.post(f"{base}/positions", json=body, headers={"Content-Type": V2})
    assert r.status_code == 204
    async with connect(socket_url(base)) as ws:
        await receive(ws, "hello")
        assert (await receive(ws, "rebalance"))["cursor"] == f"{name}:0:5000"  # taken, as Kafka's seek
        await send(ws, "credit", records=100, bytes=1 << 20)
        got: list[str] = []
        while len(got) < 3:
            message = await receive(ws, "records")
            got.extend(r["value"] for r in message["records"])
        assert got == ["v0", "v1", "v2"] and message["cursor"] == f"{name}:0:3"


async def _ends_out_of_range(stream: EventReader, name: str) -> None:
    event = await stream.next()
    assert event.event == "end", event
    end = event.json()
    assert (end["reason"], end["error_code"]) == ("error", 40903), end
    assert f"{name}-0" in end["message"] and "5000" in end["message"], end
    with pytest.raises(EOFError):
        await stream.next()


async def test_a_partition_stream_past_the_end_ends_with_the_out_of_range_error(
    client: httpx.AsyncClient, name: str
) -> None:
    """The stateless stream has no reset policy: it ends with what its read answers (40903)."""
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": f"v{i}"} for i in range(3)], partition=0)
    url = f"/topics/{name}/partitions/0/records"
    async with events(client, url, format="string", offset=5000) as stream:
        await _ends_out_of_range(stream, name)
    async with events(client, url, format="string", last_event_id="5000") as stream:  # a cursor likewise
        await _ends_out_of_range(stream, name)
    async with events(client, url, format="string", offset=3) as stream:  # the log end is in range
        await produce(client, name, [{"value": "v3"}], partition=0)
        assert [r["value"] for r in await stream.records(1)] == ["v3"]
