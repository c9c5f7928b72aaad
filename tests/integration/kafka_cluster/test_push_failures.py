"""Push subscriptions on a three-broker Kafka cluster while its brokers fail: restarted one by
one, a leader killed (kill -9), and all of them stopped for a while.

A real HTTP gateway on the cluster pushes a topic (three partitions, three replicas) to a real
receiver on loopback, batched, several requests in flight, while HTTP producers write to it and
the brokers fail. The receiver refuses (400) every request that carries one of
a few marked records, so those requests' records go to a dead-letter topic on the same cluster,
whose leaders move too. What users are promised: every record a producer was told was stored is
delivered with a 2xx or found in the dead-letter topic; nothing is delivered that nobody sent;
a record comes again only when a request met a broker gone; the subscription ends with nothing
held and nothing in flight.
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from deploy.local.kafka_cluster import KafkaCluster
from tests.helpers import cluster_id, create_topic
from tests.integration.kafka_cluster.test_failures import (
    Producers,
    _true,
    check_acknowledged,
    gateway_on,
    in_sync,
    read_topic,
    until,
)
from tests.push_receiver import Answer, Received, Receiver

IN_FLIGHT = 4
STOPPED_S = 7.0  # longer than a deliverer's refresh interval (5 s)
BATCH = 20


def marked(value: str) -> bool:
    """The records the receiver refuses: about one in fifty."""
    return value.endswith("-3") and value.split("-")[1].endswith("7")


Failure = Callable[[KafkaCluster, str, Producers], Awaitable[str]]


async def rolling_restart(cluster: KafkaCluster, topic: str, producers: Producers) -> str:
    restarts: list[float] = []
    for node_id, node in cluster.brokers.items():
        began = time.monotonic()
        await asyncio.to_thread(node.restart)
        await until(functools.partial(in_sync, cluster, topic, 3, node_id), f"broker {node_id} back in sync")
        restarts.append(time.monotonic() - began)
        await producers.until_acked(30)
    return f"a rolling restart ({', '.join(f'{s:.1f}' for s in restarts)} s per broker)"


async def killed_leader(cluster: KafkaCluster, topic: str, producers: Producers) -> str:
    victim = await cluster.leader_of(topic, 0)
    await asyncio.to_thread(cluster.broker(victim).kill)
    await until(lambda: _led_by_another(cluster, topic, victim), "a new leader elected")
    await producers.until_acked(100)  # and on through the new leader
    await asyncio.to_thread(cluster.broker(victim).start)
    await until(lambda: in_sync(cluster, topic, 3), f"broker {victim} back in sync")
    return f"kill -9 of broker {victim}, the leader of partition 0"


async def stopped_cluster(cluster: KafkaCluster, topic: str, producers: Producers) -> str:
    await asyncio.to_thread(cluster.stop_all)
    await asyncio.sleep(STOPPED_S)  # past the deliverer's next look at the topics and the backlog
    await asyncio.to_thread(cluster.start_all)
    await until(lambda: in_sync(cluster, topic, 3), "the cluster back in sync")
    await producers.until_acked(100)
    return f"the whole cluster stopped for {STOPPED_S:g} s"


async def _led_by_another(cluster: KafkaCluster, topic: str, old: int) -> bool:
    return await cluster.leader_of(topic, 0) not in (old, -1)


@pytest.mark.parametrize(
    "failure", [rolling_restart, killed_leader, stopped_cluster], ids=lambda f: f.__name__
)
async def test_push_through_broker_failures_delivers_or_dead_letters_every_record(
    cluster: KafkaCluster, tmp_path: Path, failure: Failure
) -> None:
    topic, dlq = f"push-roll-{uuid.uuid4().hex[:8]}", f"push-dlq-{uuid.uuid4().hex[:8]}"
    accepted: Counter[str] = Counter()  # values of records in a request answered 2xx
    refused: Counter[str] = Counter()

    def answer(n: int, r: Received) -> Answer:
        values = [rec["value"] for rec in r.records]
        if any(marked(v) for v in values):
            refused.update(values)
            return 400, {}, 0.0
        accepted.update(values)
        return 200, {}, 0.005

    receiver = await Receiver(answer).start()
    try:
        async with gateway_on(
            cluster, tmp_path, push_allowed_destinations="http://127.0.0.1", push_refresh_ms=200
        ) as gw:
            client = gw.client
            await create_topic(client, topic, 3)
            await create_topic(client, dlq, 1)
            await until(lambda: in_sync(cluster, topic, 3), "the topic fully replicated")
            await until(lambda: in_sync(cluster, dlq, 1), "the dead-letter topic fully replicated")
            cid = await cluster_id(client)
            spec = {
                "endpoint": receiver.url,
                "topics": [topic],
                "format": "string",
                "start": "earliest",
                "batching": {"max_records": BATCH},
                "max_in_flight": IN_FLIGHT,
                "ack_deadline_ms": 5000,
                # a broker away is retried, never a reason to give up
                "retry": {"min_backoff_ms": 100, "max_backoff_ms": 1000, "max_attempts": 100},
                "dead_letter_topic": dlq,
            }
            r = await client.put(f"/v3/clusters/{cid}/push-subscriptions/sub", json=spec)
            assert r.status_code == 201, r.text
            producers = Producers(client, topic, 3, workers=2)
            async with producers.running():
                await producers.until_acked(50)
                what = await failure(cluster, topic, producers)
            acked = set(producers.acked)
            await until(lambda: _true(acked <= set(accepted) | set(refused)), "every record pushed")
            status: dict[str, Any] = {}

            async def settled() -> bool:
                nonlocal status
                r = await client.get(f"/v3/clusters/{cid}/push-subscriptions/sub")
                status = r.json()["status"]
                return status["held"] == 0 and status["in_flight"] == 0 and status["backlog"] == 0

            await until(settled, "nothing held, in flight or behind")
            found = await read_topic(cluster, topic, 3)
            dead = await read_topic(cluster, dlq, 1)
    finally:
        await receiver.stop()
    twice = sum(n - 1 for n in accepted.values())
    print(
        f"\npush through {what}: produce {dict(producers.statuses)}, {len(acked)} acknowledged; "
        f"{len(receiver.received)} requests, {sum(accepted.values())} records accepted ({twice} again), "
        f"{len(refused)} refused, {len(dead)} dead-lettered; status {status}"
    )
    assert not producers.wrong, producers.wrong[:5]
    check_acknowledged(producers, found)
    assert set(accepted) | set(refused) <= set(found)  # nothing delivered that nobody sent
    assert refused and set(refused) == set(dead), "every refused record is in the dead-letter topic"
    assert not set(refused) & set(accepted), "a refused request's records were also accepted"
    assert all(len(at) == 1 for at in dead.values()), "a record dead-lettered twice"
    # the deliverer rode the failure out: one deliverer, whose counts ran on, sent every request
    assert status["requests"] == len(receiver.received), status
    # again only what was in flight when a broker went: requests are settled through the log
    # (the share group's state is the coordinator's), so each restart can cost a few requests
    assert twice <= 3 * IN_FLIGHT * BATCH, twice
