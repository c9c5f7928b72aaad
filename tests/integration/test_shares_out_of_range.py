"""A share group whose stored state is past its partition's end starts over, as a new state would.

Kafka keys a share-partition by the topic's id: a topic deleted and made again with the same name
starts a new state where ``share.auto.offset.reset`` says. The gateway keeps states by name, so
it meets the old state's offsets past the new log's end (the log answers the read out of range)
and starts it over there, dropping what was in flight, instead of acquiring nothing for good.
Until a poll does, describing shows the partition's lag negative. Runs on the embedded and the
Kafka log.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.helpers import cluster_id, create_topic, produce
from tests.integration.test_share_groups_api import ack, settle, share_consumer, share_poll, share_subscribe


async def _polled(client: httpx.AsyncClient, base: str, n: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    for _ in range(40):
        got += await share_poll(client, base, timeout=250)
        if len(got) >= n:
            break
    return got


async def _made_again(client: httpx.AsyncClient, name: str, values: list[str]) -> None:
    """Delete the topic, make it again with one partition, and produce ``values`` to it."""
    cid = await cluster_id(client)
    assert (await client.delete(f"/v3/clusters/{cid}/topics/{name}")).status_code == 204
    for _ in range(50):  # a broker may take a moment to forget the topic
        r = await client.post(f"/v3/clusters/{cid}/topics", json={"topic_name": name, "partitions_count": 1})
        if r.status_code == 201:
            break
        await asyncio.sleep(0.2)
    assert r.status_code == 201, r.text
    await produce(client, name, [{"value": v} for v in values], partition=0)


async def _done_with_five(client: httpx.AsyncClient, name: str, reset: str) -> str:
    """A share consumer of ``name`` (one partition) that acquired and accepted 5 records."""
    await create_topic(client, name, 1)
    base = await share_consumer(client, name, **{"share.auto.offset.reset": reset})
    await share_subscribe(client, base, name)
    assert await share_poll(client, base, timeout=100) == []  # the group's state starts here
    await produce(client, name, [{"value": f"old-{i}"} for i in range(5)], partition=0)
    got = await _polled(client, base, 5)
    assert [r["offset"] for r in got] == [0, 1, 2, 3, 4]
    assert await settle(client, base, *ack(got, "accept")) == []
    return base


async def test_a_topic_made_again_with_fewer_records_is_read_from_its_start(
    client: httpx.AsyncClient, name: str
) -> None:
    base = await _done_with_five(client, name, "earliest")
    await _made_again(client, name, ["new-0", "new-1"])
    cid = await cluster_id(client)
    group = (await client.get(f"/v3/clusters/{cid}/share-groups/{name}")).json()
    (part,) = group["partitions"]
    # the state is past the new end: its lag is negative, the log end minus its end, not 0
    assert (part["start_offset"], part["end_offset"], part["lag"], group["lag"]) == (5, 5, 2 - 5, 0)
    got = await _polled(client, base, 2)
    assert [(r["offset"], r["value"]) for r in got] == [(0, "new-0"), (1, "new-1")]
    assert await settle(client, base, *ack(got, "accept")) == []
    group = (await client.get(f"/v3/clusters/{cid}/share-groups/{name}")).json()
    assert [(p["start_offset"], p["lag"]) for p in group["partitions"]] == [(2, 0)]


async def test_latest_starts_a_state_past_the_end_at_the_new_end(
    client: httpx.AsyncClient, name: str
) -> None:
    base = await _done_with_five(client, name, "latest")
    await _made_again(client, name, ["new-0", "new-1"])
    assert await share_poll(client, base, timeout=300) == []  # started over at the end, 2
    await produce(client, name, [{"value": "new-2"}], partition=0)
    assert [(r["offset"], r["value"]) for r in await _polled(client, base, 1)] == [(2, "new-2")]


async def test_records_in_flight_past_the_new_end_are_dropped(client: httpx.AsyncClient, name: str) -> None:
    """Records released for delivery again, at offsets the new log does not reach: the state's
    first available record is at the new log's end, where a read finds nothing, in range."""
    await create_topic(client, name, 1)
    base = await share_consumer(client, name)  # earliest
    await share_subscribe(client, base, name)
    await produce(client, name, [{"value": f"old-{i}"} for i in range(5)], partition=0)
    got = await _polled(client, base, 5)
    assert await settle(client, base, *ack(got[:2], "accept"), *ack(got[2:], "release")) == []
    await _made_again(client, name, ["new-0", "new-1"])
    got = await _polled(client, base, 2)
    assert [(r["offset"], r["value"], r["delivery_count"]) for r in got] == [(0, "new-0", 1), (1, "new-1", 1)]
    assert await share_poll(client, base, timeout=200) == []  # old-2..old-4 were of the log that is gone
