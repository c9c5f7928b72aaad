"""A waiting client costs nothing until there is something for it: an idle long-poll, stateless
read, share poll or stream reads the log once for its whole wait, instead of once a slice, and
still answers as soon as a record comes. Counted through the gateway's own ``Log`` port (a wrapper
passed in as ``create_app``'s ports), so what is counted is what the gateway asked of its log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.core.models import PartitionData, TopicPartition
from service.core.ports import Log
from service.server.backends import build_ports
from service.settings import Settings
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import STRING, V2, consumer, create_topic, produce, subscribe
from tests.stream_client import events

IDLE = "idle"  # the topic nobody writes


class _CountingLog:
    """The gateway's log, counting the fetches that read topic ``IDLE``."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self.fetches = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)

    async def fetch(
        self, positions: Mapping[TopicPartition, int], **kwargs: Any
    ) -> dict[TopicPartition, PartitionData]:
        if any(tp.topic == IDLE for tp in positions):
            self.fetches += 1
        return await self._log.fetch(positions, **kwargs)


@pytest.fixture
async def counted(tmp_path: Path) -> AsyncIterator[tuple[RunningGateway, _CountingLog]]:
    log, coordinator, sessions = build_ports(Settings(data_dir=tmp_path / "data"))
    counting = _CountingLog(log)
    gw = await start_gateway(tmp_path / "data", ports=(counting, coordinator, sessions))  # type: ignore[arg-type]
    try:
        await create_topic(gw.client, IDLE, 1)
        yield gw, counting
    finally:
        await gw.client.aclose()
        await gw.stop()


async def _answered_at_a_record(client: httpx.AsyncClient, waiting: asyncio.Task[httpx.Response]) -> None:
    """The wait, still open, answers as soon as a record comes."""
    assert not waiting.done()
    await produce(client, IDLE, [{"value": "now"}])
    r = await asyncio.wait_for(waiting, 5)
    assert r.status_code == 200, r.text


async def test_an_idle_long_poll_reads_the_log_once_for_its_wait(
    counted: tuple[RunningGateway, _CountingLog],
) -> None:
    gw, log = counted
    base = await consumer(gw.client, "g-idle", reset="latest")
    await subscribe(gw.client, base, IDLE)
    await gw.client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": STRING})
    log.fetches = 0
    waiting = asyncio.create_task(
        gw.client.get(f"{base}/records", params={"timeout": 30_000}, headers={"Accept": STRING})
    )
    await asyncio.sleep(3.5)
    assert log.fetches <= 1, f"{log.fetches} reads of the log in 3.5 s of an idle long-poll"
    await _answered_at_a_record(gw.client, waiting)


async def test_an_idle_stateless_read_reads_the_log_once_for_its_wait(
    counted: tuple[RunningGateway, _CountingLog],
) -> None:
    gw, log = counted
    waiting = asyncio.create_task(
        gw.client.get(
            f"/topics/{IDLE}/partitions/0/records",
            params={"offset": 0, "timeout": 30_000},
            headers={"Accept": STRING},
        )
    )
    await asyncio.sleep(3.5)
    assert log.fetches <= 1, f"{log.fetches} reads of the log in 3.5 s of an idle stateless read"
    await _answered_at_a_record(gw.client, waiting)


async def test_an_idle_share_poll_reads_the_log_once_for_its_wait(
    counted: tuple[RunningGateway, _CountingLog],
) -> None:
    gw, log = counted
    body = {"format": "string", "share.auto.offset.reset": "latest"}
    r = await gw.client.post("/share-groups/s-idle/consumers", json=body, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text
    base = r.json()["base_uri"]
    r = await gw.client.post(f"{base}/subscription", json={"topics": [IDLE]}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    await gw.client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": STRING})
    log.fetches = 0
    waiting = asyncio.create_task(
        gw.client.get(f"{base}/records", params={"timeout": 30_000}, headers={"Accept": STRING})
    )
    await asyncio.sleep(3.5)
    # the acquisition reads what is there (nothing), then one wait on the log
    assert log.fetches <= 2, f"{log.fetches} reads of the log in 3.5 s of an idle share poll"
    await _answered_at_a_record(gw.client, waiting)


@pytest.mark.parametrize("route", ["instance", "partition"])
async def test_an_idle_stream_reads_the_log_once_while_it_waits(
    counted: tuple[RunningGateway, _CountingLog], route: str
) -> None:
    gw, log = counted
    if route == "instance":
        base = await consumer(gw.client, f"g-{route}", reset="latest")
        await subscribe(gw.client, base, IDLE)
        url = f"{base}/records"
    else:
        url = f"/topics/{IDLE}/partitions/0/records"
    async with events(gw.client, url) as stream:
        await asyncio.sleep(7.0)  # past the 5 s a stream's poll used to end at
        assert log.fetches <= 1, f"{log.fetches} reads of the log in 7 s of an idle stream"
        await produce(gw.client, IDLE, [{"value": "now"}])
        event = await stream.next(timeout=5)
        assert event.event == "records", event
