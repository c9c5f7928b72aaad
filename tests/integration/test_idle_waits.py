"""A waiting client costs nothing until there is something for it: an idle long-poll, stateless
read, share poll or stream reads the log once for its whole wait, instead of once a slice, and
still answers as soon as a record comes. Counted through the gateway's own ``Log`` port (a wrapper
passed in as ``create_app``'s ports), so what is counted is what the gateway asked of its log."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka.protocol.fetch import FetchRequest

from deploy.local.kafka_broker import KafkaBroker
from service.adapters.kafka import KafkaLog
from service.core.models import PartitionData, TopicPartition
from service.core.ports import Log
from service.server.backends import build_ports
from service.settings import Settings
from tests.conftest import RunningGateway, kafka_settings, start_gateway
from tests.helpers import STRING, V2, consumer, create_topic, produce, subscribe
from tests.stream_client import events

IDLE = "idle"  # the topic nobody writes


class _CountingLog:
    """The gateway's log, counting the fetches that read topic ``IDLE``."""

    def __init__(self, log: Log) -> None:
        self._log = log
        self.fetches = 0
        self.listings = 0  # of every topic: one a metadata refresh (with a group to look at)
        self.descriptions = 0  # of topic ``IDLE``
        self.listed = asyncio.Event()  # set at every listing

    async def list_topics(self) -> list[str]:
        self.listings += 1
        self.listed.set()
        return await self._log.list_topics()

    async def describe_topic(self, topic: str) -> Any:
        self.descriptions += topic == IDLE
        return await self._log.describe_topic(topic)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)

    async def fetch(
        self, positions: Mapping[TopicPartition, int], **kwargs: Any
    ) -> dict[TopicPartition, PartitionData]:
        if any(tp.topic == IDLE for tp in positions):
            self.fetches += 1
        return await self._log.fetch(positions, **kwargs)


class _CountingCoordinator:
    """The gateway's coordinator, counting the looks at a group's members."""

    def __init__(self, coordinator: Any) -> None:
        self._coordinator = coordinator
        self.looks = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._coordinator, name)

    async def members(self, group: str) -> Any:
        self.looks += 1
        return await self._coordinator.members(group)


@contextlib.asynccontextmanager
async def _counting_gateway(tmp_path: Path) -> AsyncIterator[tuple[RunningGateway, _CountingLog, Any]]:
    """A gateway whose log and coordinator count what it asks of them, with topic ``IDLE``."""
    log, coordinator, sessions = build_ports(Settings(data_dir=tmp_path / "data"))
    counting_log, counting = _CountingLog(log), _CountingCoordinator(coordinator)
    gw = await start_gateway(
        tmp_path / "data",
        ports=(counting_log, counting, sessions),  # type: ignore[arg-type]
        metadata_refresh_ms=100,
    )
    try:
        await create_topic(gw.client, IDLE, 1)
        yield gw, counting_log, counting
    finally:
        await gw.client.aclose()
        await gw.stop()


@pytest.fixture
async def counted(tmp_path: Path) -> AsyncIterator[tuple[RunningGateway, _CountingLog]]:
    async with _counting_gateway(tmp_path) as (gw, log, _):
        yield gw, log


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


async def test_a_long_poll_waiting_past_its_instance_timeout_keeps_it_and_reads_the_log_once(
    counted: tuple[RunningGateway, _CountingLog],
) -> None:
    """A poll that waits longer than a third of its instance's lease neither ends its wait to renew
    it nor loses the instance: the leases of the waiting instances are renewed together."""
    gw, log = counted
    base = await consumer(gw.client, "g-lease", reset="latest", **{"consumer.instance.timeout.ms": 1000})
    await subscribe(gw.client, base, IDLE)
    await gw.client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": STRING})
    log.fetches = 0
    r = await gw.client.get(f"{base}/records", params={"timeout": 3_500}, headers={"Accept": STRING})
    assert r.status_code == 200 and r.json() == [], r.text  # three and a half instance timeouts
    assert log.fetches <= 1, f"{log.fetches} reads of the log in one 3.5 s long-poll"
    assert (await gw.client.get(f"{base}/subscription")).status_code == 200  # still there
    await asyncio.sleep(2.5)  # with no wait open nothing renews it
    assert (await gw.client.get(f"{base}/subscription")).status_code == 404


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
        # Authentication and ACLs off: nothing can revoke what it reads, so nothing asks it again.
        assert gw.app.state.gateway.streams.watched == 0
        await produce(gw.client, IDLE, [{"value": "now"}])
        event = await stream.next(timeout=5)
        assert event.event == "records", event


async def test_idle_long_polls_on_the_kafka_log_leave_the_broker_to_other_requests(
    tmp_path: Path, kafka_broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Thirty idle long-polls on the Kafka log. A broker answers one connection's requests in order:
    were each poll to keep a long fetch of its own there (half a second each), a request of
    another client behind them would wait 15 s and fail after the 5 s request timeout. One long
    fetch on a connection of its own watches them all: the other request answers, the polls
    cost the broker one fetch per slice (six in 3 s, not one each), and each still answers at
    once when a record comes."""
    shared = kafka_settings(kafka_broker)  # the ports and the gateway on them: one registry topic
    settings = Settings(data_dir=tmp_path / "data", **shared)  # type: ignore[arg-type]
    log, coordinator, sessions = build_ports(settings)
    assert isinstance(log, KafkaLog)
    fetches = 0
    cluster = log._cluster  # what the log asks the brokers, counted where it is sent
    send = cluster.send

    async def counting(node_id: int, request: Any, **kwargs: Any) -> Any:
        nonlocal fetches
        if isinstance(request, FetchRequest):
            fetches += 1
        return await send(node_id, request, **kwargs)

    monkeypatch.setattr(cluster, "send", counting)
    ports = (log, coordinator, sessions)
    gw = await start_gateway(tmp_path / "data", ports=ports, **shared)
    polls = 30
    try:
        await create_topic(gw.client, name, 1)
        bases = [await consumer(gw.client, f"g-{name}-{n}", reset="latest") for n in range(polls)]
        for base in bases:
            await subscribe(gw.client, base, name)
            await gw.client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": STRING})
        waiting = [
            asyncio.create_task(
                gw.client.get(f"{base}/records", params={"timeout": 30_000}, headers={"Accept": STRING})
            )
            for base in bases
        ]
        await asyncio.sleep(1.0)  # every poll has asked once and is waiting
        fetches = 0
        r = await gw.client.get(f"/topics/{name}/partitions/0/offsets")
        assert r.status_code == 200, r.text
        assert r.json()["end_offset"] == 0
        await asyncio.sleep(3.0)
        assert fetches < polls, f"{fetches} fetches sent to the broker in 3 s of {polls} idle long-polls"
        assert not any(w.done() for w in waiting)
        await produce(gw.client, name, [{"value": "now"}])
        for r in await asyncio.wait_for(asyncio.gather(*waiting), 5):
            assert r.status_code == 200, r.text
            assert [rec["value"] for rec in r.json()] == ["now"]
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_gateway_stopping_ends_an_idle_long_poll_at_once_with_its_answer(tmp_path: Path) -> None:
    """The drain wakes a waiting long-poll: it answers (nothing to read) as the gateway stops,
    not at its 60 s timeout, and the gateway stops without waiting for it."""
    gw = await start_gateway(tmp_path / "data")
    try:
        await create_topic(gw.client, IDLE, 1)
        base = await consumer(gw.client, "g-drain", reset="latest")
        await subscribe(gw.client, base, IDLE)
        await gw.client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": STRING})
        waiting = asyncio.create_task(
            gw.client.get(
                f"{base}/records", params={"timeout": 60_000}, headers={"Accept": STRING}, timeout=90
            )
        )
        await asyncio.sleep(1.0)
        assert not waiting.done()
        stopping = asyncio.create_task(gw.stop())
        r = await asyncio.wait_for(waiting, 30)  # well before the poll's 60 s
        assert r.status_code == 200, r.text
        assert r.json() == []
        await asyncio.wait_for(stopping, 30)
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_idle_groups_cost_the_metadata_refresh_one_look_at_their_topic_not_one_each(
    counted: tuple[RunningGateway, _CountingLog],
) -> None:
    """The refresh that rebalances a group whose topics gained partitions asks the log once a topic,
    however many groups subscribe to it (20 here, each of one idle member)."""
    gw, log = counted
    for n in range(20):
        base = await consumer(gw.client, f"g-{n}", reset="latest")
        await subscribe(gw.client, base, IDLE)
        r = await gw.client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": STRING})
        assert r.status_code == 200, r.text
    listings, descriptions = log.listings, log.descriptions
    for _ in range(3):  # three refreshes
        log.listed.clear()
        await asyncio.wait_for(log.listed.wait(), 30)
    refreshes = log.listings - listings
    assert log.descriptions - descriptions <= refreshes + 1, (refreshes, log.descriptions - descriptions)


async def test_idle_groups_cost_the_metadata_refresh_no_look_at_each_until_a_topic_changes(
    tmp_path: Path,
) -> None:
    """With nothing changed since the leader's last walk (no member joined or left, the same topics
    and partition counts), a refresh looks at no group; a partition added to their topic is still
    seen at the next refresh, and every group rebalances onto it."""
    async with _counting_gateway(tmp_path) as (gw, counting_log, counting):
        bases = []
        for n in range(20):
            base = await consumer(gw.client, f"g-{n}", reset="latest")
            await subscribe(gw.client, base, IDLE)
            bases.append(base)
        for _ in range(2):  # the walk after the last join, then one with nothing changed
            counting_log.listed.clear()
            await asyncio.wait_for(counting_log.listed.wait(), 30)
        looks, listings = counting.looks, counting_log.listings
        for _ in range(5):
            counting_log.listed.clear()
            await asyncio.wait_for(counting_log.listed.wait(), 30)
        assert counting_log.listings - listings >= 5
        assert counting.looks == looks, counting.looks - looks

        cid = (await gw.client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
        r = await gw.client.patch(f"/v3/clusters/{cid}/topics/{IDLE}", json={"partitions_count": 2})
        assert r.status_code == 200, r.text
        for base in (bases[0], bases[-1]):
            for _ in range(100):
                r = await gw.client.get(f"{base}/assignments")
                if len(r.json()["partitions"]) == 2:
                    break
                await asyncio.sleep(0.1)
            assert len(r.json()["partitions"]) == 2, r.text
