"""What a WebSocket may make the gateway hold: its messages read and not yet answered, within a
byte budget per socket and per principal; past it the gateway stops reading (backpressure).

Produces are held up in storing (the REST produce's ``store_records``, made to wait for the
test), so what a client sends piles up; the gateway's own count of what it parsed and of what
it holds shows how much it took off the socket. Released, every produce is answered, in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from api_schemas import streams as wire
from service.api import topics as topics_api
from service.core.acl import Caller
from service.core.streams import StreamService
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import consumer, create_topic, subscribe
from tests.stream_client import receive, send, socket_url

VALUE = "x" * (100 * 1024)  # a produce of about 100 KiB
BUDGET = 256 * 1024  # room for two of them, not three
HERE = Caller(host="127.0.0.1")  # authentication off: the principal's share is the address's


class Parses:
    """Counts the client messages the gateway parsed, i.e. took off a socket to act on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        adapter = wire.CLIENT_MESSAGE
        outer = self

        class Counting:
            def validate_python(self, data: Any) -> Any:
                outer.count += 1
                return adapter.validate_python(data)

        monkeypatch.setattr(wire, "CLIENT_MESSAGE", Counting())


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Parses:
    return Parses(monkeypatch)


@pytest.fixture
def stored(monkeypatch: pytest.MonkeyPatch) -> Iterator[asyncio.Event]:
    """Set it to let produces be stored; until then each waits in ``store_records``."""
    go = asyncio.Event()
    store_records = topics_api.store_records

    async def held_up(*args: Any, **kwargs: Any) -> bytes:
        await go.wait()
        return await store_records(*args, **kwargs)

    monkeypatch.setattr(topics_api, "store_records", held_up)
    yield go
    go.set()


@asynccontextmanager
async def gateway(tmp_path: Path, **settings: object) -> AsyncIterator[tuple[RunningGateway, StreamService]]:
    gw = await start_gateway(tmp_path / "data", **settings)
    streams: StreamService = gw.server.config.app.app.state.gateway.streams
    try:
        yield gw, streams
    finally:
        await gw.client.aclose()
        await gw.stop()


async def _instance(client: httpx.AsyncClient, topic: str, group: str) -> str:
    base = await consumer(client, group)
    await subscribe(client, base, topic)
    return base


async def _all_read(parses: Parses) -> int:
    """How many messages the gateway parsed once it stopped taking more (nothing new for 0.5 s)."""
    seen = -1
    while seen != parses.count:
        seen = parses.count
        await asyncio.sleep(0.5)
    return seen


async def test_a_socket_holds_at_most_its_budget_and_then_reads_no_more(
    tmp_path: Path, name: str, parses: Parses, stored: asyncio.Event
) -> None:
    async with gateway(tmp_path, stream_max_held_bytes=BUDGET) as (gw, streams):
        await create_topic(gw.client, name, 1)
        base = await _instance(gw.client, name, f"g-{name}")
        async with connect(socket_url(base), max_size=None) as ws:
            await receive(ws, "hello")
            await receive(ws, "rebalance")
            for n in range(12):
                await send(ws, "produce", id=n, topic=name, records=[{"value": VALUE}])
            # one produce being stored, one waiting for its turn; the ten others not read
            assert await _all_read(parses) == 2
            assert 0 < streams.held(HERE) <= BUDGET
            stored.set()
            answers = [await receive(ws, "produced") for _ in range(12)]
            assert [a["id"] for a in answers] == list(range(12))  # every one, in the order sent
            assert streams.held(HERE) == 0
        r = await gw.client.get(f"/topics/{name}/partitions/0/offsets")
        assert r.json()["end_offset"] == 12


async def test_one_principals_sockets_together_hold_at_most_its_budget(
    tmp_path: Path, name: str, parses: Parses, stored: asyncio.Event
) -> None:
    settings = {"stream_max_held_bytes": 4 * BUDGET, "stream_max_held_bytes_per_principal": BUDGET}
    async with gateway(tmp_path, **settings) as (gw, streams):
        await create_topic(gw.client, name, 1)
        first = await _instance(gw.client, name, f"g1-{name}")
        second = await _instance(gw.client, name, f"g2-{name}")
        async with connect(socket_url(first)) as a, connect(socket_url(second)) as b:
            for ws in (a, b):
                await receive(ws, "hello")
                await receive(ws, "rebalance")
            for n in range(2):
                await send(a, "produce", id=f"a{n}", topic=name, records=[{"value": VALUE}])
            assert await _all_read(parses) == 2
            await send(b, "produce", id="b0", topic=name, records=[{"value": VALUE}])
            # room on b's own budget, none left on the principal's: b's message stays unread
            assert await _all_read(parses) == 2
            assert 0 < streams.held(HERE) <= BUDGET
            stored.set()
            assert [(await receive(a, "produced"))["id"] for _ in range(2)] == ["a0", "a1"]
            assert (await receive(b, "produced"))["id"] == "b0"
        assert streams.held(HERE) == 0
