"""Consumer-group behaviour a user relies on: queue, pub-sub, rebalance, resume at the committed offset."""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import (
    V2,
    assignment,
    cluster_id,
    commit,
    consumer,
    create_topic,
    poll,
    poll_until,
    produce,
    subscribe,
)

# In-process groups and sessions, and the stateless deployment's ZooKeeper and Redis.
pytestmark = pytest.mark.parametrize(
    ("coordinator", "sessions"), [("embedded", "embedded"), ("zookeeper", "redis")]
)


async def test_one_group_is_a_queue(client, name):
    await create_topic(client, name, 4)
    group = f"g-{name}"
    a = await consumer(client, group)
    b = await consumer(client, group)
    await subscribe(client, a, name)
    await subscribe(client, b, name)
    parts_a, parts_b = set(await assignment(client, a)), set(await assignment(client, b))
    assert len(parts_a) == 2 and len(parts_b) == 2 and not parts_a & parts_b
    await produce(client, name, [{"value": str(i)} for i in range(40)])
    got_a, got_b = await asyncio.gather(poll_until(client, a, 20), poll_until(client, b, 20))
    assert len(got_a) == 20 and len(got_b) == 20
    assert {r["value"] for r in got_a}.isdisjoint({r["value"] for r in got_b})
    assert {(r["topic"], r["partition"]) for r in got_a} <= parts_a


async def test_two_groups_are_pub_sub(client, name):
    await create_topic(client, name, 2)
    a = await consumer(client, f"g1-{name}")
    b = await consumer(client, f"g2-{name}")
    await subscribe(client, a, name)
    await subscribe(client, b, name)
    await produce(client, name, [{"value": str(i)} for i in range(10)])
    got_a, got_b = await asyncio.gather(poll_until(client, a, 10), poll_until(client, b, 10))
    assert (
        sorted(r["value"] for r in got_a) == sorted(r["value"] for r in got_b) == [str(i) for i in range(10)]
    )


async def test_more_members_than_partitions_leaves_extras_idle(client, name):
    await create_topic(client, name, 2)
    group = f"g-{name}"
    members = [await consumer(client, group) for _ in range(3)]
    for m in members:
        await subscribe(client, m, name)
    counts = sorted([len(await assignment(client, m)) for m in members])
    assert counts == [0, 1, 1]
    assigned = {m: await assignment(client, m) for m in members}
    idle = next(m for m in members if not assigned[m])
    busy = [m for m in members if m != idle]
    assert (await client.delete(busy[0])).status_code == 204
    assert len(await assignment(client, idle)) == 1  # takes over when one leaves


async def test_expired_member_is_removed_and_partitions_rebalance(client, name):
    await create_topic(client, name, 2)
    group = f"g-{name}"
    short = await consumer(client, group, **{"consumer.instance.timeout.ms": 1000})
    stay = await consumer(client, group)
    await subscribe(client, short, name)
    await subscribe(client, stay, name)
    assert len(await assignment(client, stay)) == 1
    for _ in range(40):
        await asyncio.sleep(0.1)
        await poll(client, stay, timeout=0)
        if len(await assignment(client, stay)) == 2:
            break
    assert len(await assignment(client, stay)) == 2
    assert (await client.get(f"{short}/assignments")).status_code == 404


async def test_new_member_resumes_at_committed_offset(client, name):
    await create_topic(client, name, 1)
    group = f"g-{name}"
    await produce(client, name, [{"value": f"v{i}"} for i in range(10)])
    first = await consumer(client, group)
    await subscribe(client, first, name)
    got = await poll_until(client, first, 10)
    assert len(got) == 10
    await commit(client, first, [{"topic": name, "partition": 0, "offset": 5}])
    assert (await client.delete(first)).status_code == 204
    second = await consumer(client, group)
    await subscribe(client, second, name)
    assert [r["value"] for r in await poll_until(client, second, 4)] == ["v6", "v7", "v8", "v9"]


async def test_rebalance_moves_partition_without_duplicating_committed_records(client, name):
    await create_topic(client, name, 2)
    group = f"g-{name}"
    await produce(client, name, [{"value": f"{p}-{i}", "partition": p} for p in (0, 1) for i in range(5)])
    a = await consumer(client, group)
    await subscribe(client, a, name)
    assert len(await poll_until(client, a, 10)) == 10
    await commit(client, a)
    b = await consumer(client, group)
    await subscribe(client, b, name)
    await produce(client, name, [{"value": f"{p}-new", "partition": p} for p in (0, 1)])
    got_a, got_b = await asyncio.gather(poll_until(client, a, 1), poll_until(client, b, 1))
    assert sorted(r["value"] for r in got_a + got_b) == ["0-new", "1-new"]


async def test_committed_member_cannot_commit_a_partition_it_lost(client, name):
    await create_topic(client, name, 2)
    group = f"g-{name}"
    a = await consumer(client, group)
    await subscribe(client, a, name)
    b = await consumer(client, group)
    await subscribe(client, b, name)
    owned = await assignment(client, a)
    lost = next(p for p in (0, 1) if (name, p) not in owned)
    r = await client.post(
        f"{a}/offsets",
        json={"offsets": [{"topic": name, "partition": lost, "offset": 3}]},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 409 and r.json()["error_code"] == 40903


async def test_topic_gaining_partitions_rebalances(client, name):
    await create_topic(client, name, 1)
    group = f"g-{name}"
    a = await consumer(client, group)
    b = await consumer(client, group)
    await subscribe(client, a, name)
    await subscribe(client, b, name)
    assert sorted([len(await assignment(client, a)), len(await assignment(client, b))]) == [0, 1]
    cid = await cluster_id(client)
    r = await client.patch(f"/v3/clusters/{cid}/topics/{name}", json={"partitions_count": 4})
    assert r.status_code == 200 and r.json()["partitions_count"] == 4
    assert [len(await assignment(client, a)), len(await assignment(client, b))] == [2, 2]


async def test_range_and_roundrobin_strategies(client, name):
    x, y = f"{name}-x", f"{name}-y"
    await create_topic(client, x, 3)
    await create_topic(client, y, 3)
    expected = {
        "range": ([(x, 0), (x, 1), (y, 0), (y, 1)], [(x, 2), (y, 2)]),
        "roundrobin": ([(x, 0), (x, 2), (y, 1)], [(x, 1), (y, 0), (y, 2)]),
    }
    for strategy, (want_a, want_b) in expected.items():
        group = f"g-{strategy}-{name}"
        a = await consumer(client, group, name="a", **{"partition.assignment.strategy": strategy})
        b = await consumer(client, group, name="b", **{"partition.assignment.strategy": strategy})
        await subscribe(client, a, x, y)
        await subscribe(client, b, x, y)
        assert await assignment(client, a) == want_a
        assert await assignment(client, b) == want_b


async def test_group_description_and_lag(client, name):
    await create_topic(client, name, 2)
    group = f"g-{name}"
    await produce(client, name, [{"value": str(i), "partition": i % 2} for i in range(10)])
    base = await consumer(client, group, name="m1")
    await subscribe(client, base, name)
    await poll_until(client, base, 10)
    await commit(client, base, [{"topic": name, "partition": 0, "offset": 1}])
    cid = await cluster_id(client)
    r = await client.get(f"/v3/clusters/{cid}/consumer-groups/{group}")
    assert r.status_code == 200
    body = r.json()
    assert body["consumer_group_id"] == group and body["state"] == "Stable"
    assert body["consumers"][0]["consumer_id"] == "m1"
    assert len(body["consumers"][0]["assignments"]) == 2
    lags = (await client.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lags")).json()["data"]
    by_partition = {row["partition_id"]: row for row in lags}
    assert by_partition[0]["current_offset"] == 2 and by_partition[0]["lag"] == 3
    assert by_partition[1]["current_offset"] == -1 and by_partition[1]["lag"] == 5
    await commit(client, base)
    lags = (await client.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lags")).json()["data"]
    assert [row["lag"] for row in lags] == [0, 0]
    summary = (await client.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lag-summary")).json()
    assert summary["total_lag"] == 0
    groups = (await client.get(f"/v3/clusters/{cid}/consumer-groups")).json()["data"]
    assert group in [g["consumer_group_id"] for g in groups]
