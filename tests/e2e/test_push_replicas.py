"""Push across two gateway processes (one Kafka log, one ZooKeeper, one Redis): one replica delivers
a subscription at a time, and a kill -9 of it mid-delivery loses no record; the other takes over
and re-delivers at most what was in flight."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx

from deploy.local.kafka_broker import KafkaBroker
from tests.e2e.gateway_process import two_replicas
from tests.helpers import STRING
from tests.push_receiver import Answer, Received, Receiver

IN_FLIGHT = 4
RECORDS = 200


async def _delivering(client: httpx.AsyncClient, cid: str, name: str) -> bool:
    r = await client.get(f"/v3/clusters/{cid}/push-subscriptions/{name}")
    assert r.status_code == 200, r.text
    return bool(r.json()["status"]["delivering"])


async def test_a_killed_delivering_replica_loses_nothing_and_the_other_takes_over(
    tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    def slow(n: int, r: Received) -> Answer:
        return 200, {}, 0.02  # each request takes a while: some are always in flight

    receiver = await Receiver(slow).start()
    env = {"BROKERGATE_PUSH_ALLOWED_DESTINATIONS": "http://127.0.0.1", "BROKERGATE_PUSH_REFRESH_MS": "200"}
    topic, name = f"orders-{uuid.uuid4().hex[:8]}", f"push-{uuid.uuid4().hex[:8]}"
    try:
        with two_replicas(tmp_path, kafka_broker, env) as replicas:
            async with (
                httpx.AsyncClient(base_url=replicas.first.url, timeout=30) as a,
                httpx.AsyncClient(base_url=replicas.second.url, timeout=30) as b,
            ):
                cid = (await a.get("/v3/clusters")).json()["data"][0]["cluster_id"]
                r = await a.post(
                    f"/v3/clusters/{cid}/topics", json={"topic_name": topic, "partitions_count": 2}
                )
                assert r.status_code == 201, r.text
                spec = {
                    "endpoint": receiver.url,
                    "topics": [topic],
                    "start": "earliest",
                    "max_in_flight": IN_FLIGHT,
                    "ack_deadline_ms": 1000,
                    "retry": {"min_backoff_ms": 50},
                }
                r = await a.put(f"/v3/clusters/{cid}/push-subscriptions/{name}", json=spec)
                assert r.status_code == 201, r.text
                deadline = time.monotonic() + 20
                while True:  # one of the two takes it, and only one
                    on = [await _delivering(c, cid, name) for c in (a, b)]
                    if any(on):
                        break
                    assert time.monotonic() < deadline, "no replica took the subscription"
                    await asyncio.sleep(0.1)
                assert on.count(True) == 1
                delivering, survivor = (replicas.first, b) if on[0] else (replicas.second, a)
                r = await survivor.post(
                    f"/topics/{topic}",
                    json={"records": [{"value": f"r{i}", "partition": i % 2} for i in range(RECORDS)]},
                    headers={"Content-Type": STRING},
                )
                assert r.status_code == 200, r.text
                await receiver.wait_for(RECORDS // 4)
                delivering.kill()  # kill -9, mid-delivery
                killed, killed_at = time.monotonic(), len(receiver.records())
                while not await _delivering(survivor, cid, name):
                    assert time.monotonic() - killed < 30, "the other replica did not take over"
                    await asyncio.sleep(0.05)
                took_over = time.monotonic() - killed  # the session timeout (1.5 s) and a tick
                await receiver.wait_for(RECORDS, timeout=60)
                await asyncio.sleep(1.0)  # nothing more should come
                assert await _delivering(survivor, cid, name)
    finally:
        await receiver.stop()
    seen = Counter((r["partition"], r["offset"]) for r in receiver.records())
    assert set(seen) == {(p, o) for p in (0, 1) for o in range(RECORDS // 2)}  # every one, at least once
    duplicates = sum(n - 1 for n in seen.values())
    print(
        f"taken over {took_over:.1f} s after the kill; records delivered twice after it: {duplicates} "
        f"(received {killed_at} before it)"
    )
    # a request holds its slot until its settlement is stored: at most IN_FLIGHT requests of one
    # record each were answered, or not, without the coordinator knowing
    assert duplicates <= IN_FLIGHT, (duplicates, killed_at)
