"""A position past a partition's end, as Kafka meets it: an out-of-range fetch that resets.

Kafka accepts a seek or a commit past the log end; the next fetch from there is
OFFSET_OUT_OF_RANGE and the consumer resets by ``auto.offset.reset`` (``none``:
the poll fails, naming the partition). The lag of such a position is negative,
as ``kafka-consumer-groups`` shows it. Runs on the embedded and the Kafka log.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.helpers import (
    STRING,
    V2,
    cluster_id,
    commit,
    consumer,
    create_topic,
    poll,
    poll_until,
    produce,
    subscribe,
)

# Kafka answers a fetch past the log end OFFSET_OUT_OF_RANGE; Tansu 0.6 answers it empty, as if
# at the end, so a consumer there waits instead of resetting.


async def _past_the_end(
    client: httpx.AsyncClient, name: str, *, reset: str, group: str = ""
) -> tuple[str, Any]:
    """A consumer subscribed to a 3-record topic, partition 0 sought to offset 5000."""
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": f"v{i}"} for i in range(3)], partition=0)
    base = await consumer(client, group or f"g-{name}", reset=reset)
    await subscribe(client, base, name)
    tp = {"topic": name, "partition": 0}
    r = await client.post(
        f"{base}/positions", json={"offsets": [{**tp, "offset": 5000}]}, headers={"Content-Type": V2}
    )
    assert r.status_code == 204  # Kafka's seek does not check either: the next fetch does
    return base, tp


async def test_earliest_resets_a_position_past_the_end_to_the_log_start(client, name):
    base, _ = await _past_the_end(client, name, reset="earliest")
    await produce(client, name, [{"value": "v3"}, {"value": "v4"}], partition=0)
    got = await poll_until(client, base, 5)
    assert [(r["offset"], r["value"]) for r in got] == [(i, f"v{i}") for i in range(5)]


async def test_latest_resets_a_position_past_the_end_to_the_log_end(client, name):
    base, _ = await _past_the_end(client, name, reset="latest")
    assert await poll(client, base, timeout=300) == []  # the reset: to the end, 3
    await produce(client, name, [{"value": "v3"}, {"value": "v4"}], partition=0)
    assert [r["value"] for r in await poll_until(client, base, 2)] == ["v3", "v4"]


async def test_the_log_end_itself_is_a_position_in_range(client, name):
    base, tp = await _past_the_end(client, name, reset="earliest")
    r = await client.post(
        f"{base}/positions", json={"offsets": [{**tp, "offset": 3}]}, headers={"Content-Type": V2}
    )
    assert r.status_code == 204
    await produce(client, name, [{"value": "v3"}], partition=0)
    assert [r["value"] for r in await poll_until(client, base, 1)] == ["v3"]


async def test_none_fails_the_poll_naming_the_partition(client, name):
    base, _ = await _past_the_end(client, name, reset="none")
    r = await client.get(f"{base}/records", params={"timeout": 300}, headers={"Accept": STRING})
    assert r.status_code == 409 and r.json()["error_code"] == 40903, r.text
    message = r.json()["message"]
    assert f"{name}-0" in message and "5000" in message and "out of range" in message, message


async def test_a_commit_past_the_end_is_kept_and_its_lag_is_negative(client, name):
    group = f"g-{name}"
    base, tp = await _past_the_end(client, name, reset="earliest", group=group)
    assert await commit(client, base, [{**tp, "offset": 99998}]) == [{**tp, "offset": 99999}]
    r = await client.get(f"{base}/offsets", params={"partitions": f"{name}:0"})
    assert r.status_code == 200 and r.json()["offsets"][0]["offset"] == 99999, r.text  # kept, as Kafka does
    # kafka-consumer-groups' lag: the log end minus the committed offset, never clamped to 0
    cid = await cluster_id(client)
    lags = (await client.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lags")).json()["data"]
    (lag,) = lags
    end = lag["log_end_offset"]  # 3 (Tansu 0.6 answers ListOffsets latest short of it)
    assert (lag["current_offset"], lag["lag"]) == (99999, end - 99999) and 0 < end <= 3, lag
    summary = (await client.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lag-summary")).json()
    assert (summary["max_lag"], summary["total_lag"]) == (end - 99999, 0)
    assert summary["partitions_past_end"] == 1


async def test_the_lag_summary_counts_a_commit_past_the_end_beside_one_behind(client, name):
    group = f"g-{name}"
    await create_topic(client, name, 2)
    await produce(client, name, [{"value": f"v{i}", "partition": i % 2} for i in range(6)])
    base = await consumer(client, group, reset="earliest")
    await subscribe(client, base, name)
    await commit(client, base, [{"topic": name, "partition": 0, "offset": 99998}])
    await commit(client, base, [{"topic": name, "partition": 1, "offset": 0}])
    cid = await cluster_id(client)
    summary = (await client.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lag-summary")).json()
    # max_lag and total_lag show partition 1 only; the count shows partition 0
    assert (summary["max_lag_partition_id"], summary["partitions_past_end"]) == (1, 1), summary
    # 2 (Tansu 0.6 answers ListOffsets latest short of it): never the past-end partition's -99997
    assert summary["max_lag"] == summary["total_lag"] >= 0, summary


async def test_a_member_resuming_from_a_commit_past_the_end_resets(client, name):
    group = f"g-{name}"
    base, tp = await _past_the_end(client, name, reset="earliest", group=group)
    await commit(client, base, [{**tp, "offset": 99998}])
    r = await client.delete(base, headers={"Content-Type": V2})
    assert r.status_code == 204
    again = await consumer(client, group, reset="earliest")
    await subscribe(client, again, name)
    assert [r["value"] for r in await poll_until(client, again, 3)] == ["v0", "v1", "v2"]


async def test_a_stateless_read_past_the_end_is_refused_at_once(client, name):
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": f"v{i}"} for i in range(3)], partition=0)
    url = f"/topics/{name}/partitions/0/records"
    r = await client.get(url, params={"offset": 5000, "timeout": 5000}, headers={"Accept": STRING})
    assert r.status_code == 409 and r.json()["error_code"] == 40903, r.text
    assert "5000" in r.json()["message"] and f"{name}-0" in r.json()["message"]
    r = await client.get(url, params={"offset": 3, "timeout": 100}, headers={"Accept": STRING})
    assert r.status_code == 200 and r.json()["records"] == [] and r.json()["next_offset"] == 3, r.text
