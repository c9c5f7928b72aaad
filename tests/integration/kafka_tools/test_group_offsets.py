"""A gateway group's committed offsets are Kafka's own: Kafka's tools and native consumers agree.

``kafka-consumer-groups --describe`` shows what HTTP consumers committed, with its lag; native
consumers (aiokafka, Kafka's console consumer) that join the group later resume there; and an
HTTP consumer of the group starts from what native consumers committed.
"""

from __future__ import annotations

import time

from aiokafka import AIOKafkaConsumer

from deploy.local.kafka_broker import KafkaBroker
from deploy.local.kafka_tools import run_tool
from tests.conftest import RunningGateway
from tests.helpers import V2, cluster_id, commit, consumer, create_topic, poll_until, produce, subscribe


def describe_rows(out: str, group: str) -> dict[int, tuple[int | None, int, int | None]]:
    """partition -> (current offset, log end, lag) from ``kafka-consumer-groups --describe``."""
    rows: dict[int, tuple[int | None, int, int | None]] = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[0] == group:
            current, end, lag = cells[3:6]
            rows[int(cells[2])] = (
                None if current == "-" else int(current),
                int(end),
                None if lag == "-" else int(lag),
            )
    return rows


async def lags(gw: RunningGateway, group: str) -> dict[int, tuple[int, int, int]]:
    cid = await cluster_id(gw.client)
    r = await gw.client.get(f"/v3/clusters/{cid}/consumer-groups/{group}/lags")
    assert r.status_code == 200, r.text
    return {
        row["partition_id"]: (row["current_offset"], row["log_end_offset"], row["lag"])
        for row in r.json()["data"]
    }


async def test_http_commits_are_kafkas_and_native_consumers_resume_there(
    kafka_gateway: RunningGateway, kafka_broker: KafkaBroker, name: str
) -> None:
    client = kafka_gateway.client
    group = f"g-{name}"
    await create_topic(client, name, 2)
    for p in (0, 1):
        await produce(client, name, [{"value": f"{p}-{i}"} for i in range(5)], partition=p)

    # HTTP consumers commit: 3 of partition 0 processed, all 5 of partition 1
    base = await consumer(client, group, name="http-1")
    await subscribe(client, base, name)
    assert len(await poll_until(client, base, 10)) == 10
    await commit(
        client,
        base,
        [{"topic": name, "partition": 0, "offset": 2}, {"topic": name, "partition": 1, "offset": 4}],
    )
    assert (await client.delete(base, headers={"Content-Type": V2})).status_code == 204

    # Kafka's own tool reads those commits, and their lag, from Kafka's group coordinator
    out = await run_tool(
        "kafka-consumer-groups", "--bootstrap-server", kafka_broker.bootstrap, "--describe", "--group", group
    )
    assert describe_rows(out, group) == {0: (3, 5, 2), 1: (5, 5, 0)}, out
    # the gateway's own routes answer the same, with no member of the group left
    assert await lags(kafka_gateway, group) == {0: (3, 5, 2), 1: (5, 5, 0)}

    # a native consumer joining the group resumes where HTTP consumers committed, and commits
    native = AIOKafkaConsumer(
        name, bootstrap_servers=kafka_broker.bootstrap, group_id=group, enable_auto_commit=False
    )
    await native.start()
    try:
        got: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            for tp, records in (await native.getmany(timeout_ms=500)).items():
                got += [(tp.partition, r.offset, r.value) for r in records]
        assert sorted(got) == [(0, 3, b"0-3"), (0, 4, b"0-4")]
        await native.commit()
    finally:
        await native.stop()

    # Kafka's console consumer in the group resumes too (and commits as it closes)
    await produce(client, name, [{"value": "1-5"}], partition=1)
    out = await run_tool(
        "kafka-console-consumer",
        *("--bootstrap-server", kafka_broker.bootstrap, "--topic", name, "--group", group),
        *("--max-messages", "1", "--timeout-ms", "20000"),
        *("--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true"),
    )
    assert out.splitlines() == ["Partition:1\tOffset:5\t1-5"], out

    # an HTTP consumer of the group starts from what the native consumers committed
    await produce(client, name, [{"value": "0-5"}], partition=0)
    await produce(client, name, [{"value": "1-6"}], partition=1)
    base = await consumer(client, group, name="http-2")
    await subscribe(client, base, name)
    fresh = await poll_until(client, base, 2)
    assert sorted((r["partition"], r["offset"], r["value"]) for r in fresh) == [(0, 5, "0-5"), (1, 6, "1-6")]
    assert await lags(kafka_gateway, group) == {0: (5, 6, 1), 1: (6, 7, 1)}


async def test_no_http_commit_while_native_consumers_hold_the_group(
    kafka_gateway: RunningGateway, kafka_broker: KafkaBroker, name: str
) -> None:
    client = kafka_gateway.client
    group = f"g-{name}"
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": str(i)} for i in range(3)])
    base = await consumer(client, group, name="manual")
    r = await client.post(
        f"{base}/assignments",
        json={"partitions": [{"topic": name, "partition": 0}]},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 204, r.text
    offsets = {"offsets": [{"topic": name, "partition": 0, "offset": 1}]}

    native = AIOKafkaConsumer(name, bootstrap_servers=kafka_broker.bootstrap, group_id=group)
    await native.start()
    try:
        await native.getmany(timeout_ms=2000)  # joined: Kafka coordinates the group now
        r = await client.post(f"{base}/offsets", json=offsets, headers={"Content-Type": V2})
        assert r.status_code == 409, r.text
        assert "native Kafka consumers" in r.json()["message"]
    finally:
        await native.stop()
    # once they left, the gateway's commits are taken again
    r = await client.post(f"{base}/offsets", json=offsets, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text
    r = await client.request(
        "GET",
        f"{base}/offsets",
        json={"partitions": [{"topic": name, "partition": 0}]},
        headers={"Content-Type": V2},
    )
    assert [(o["partition"], o["offset"]) for o in r.json()["offsets"]] == [(0, 2)], r.text
