"""Share groups across two gateway processes (one Kafka log, one ZooKeeper, one Redis), and what a
kill -9 of a replica leaves: nothing lost, nothing held by two consumers, delivery counts exact."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from deploy.local.kafka_broker import KafkaBroker
from tests.e2e.gateway_process import GatewayProcess, two_replicas
from tests.helpers import STRING, V2

LOCK_MS = 2000


async def _consumer(client: httpx.AsyncClient, group: str, name: str, topic: str) -> str:
    r = await client.post(
        f"/share-groups/{group}/consumers",
        json={"name": name, "format": "string", "share.auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200, r.text
    path = f"/share-groups/{group}/consumers/{name}"
    r = await client.post(f"{path}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    return path


async def _poll(client: httpx.AsyncClient, path: str, **params: Any) -> list[dict[str, Any]]:
    r = await client.get(f"{path}/records", params={"timeout": 500, **params}, headers={"Accept": STRING})
    assert r.status_code == 200, r.text
    return list(r.json())


async def _accept(client: httpx.AsyncClient, path: str, records: list[dict[str, Any]]) -> list[Any]:
    acks = [
        {"topic": r["topic"], "partition": r["partition"], "offsets": [r["offset"]], "type": "accept"}
        for r in records
    ]
    r = await client.post(
        f"{path}/acknowledgements", json={"acknowledgements": acks}, headers={"Content-Type": V2}
    )
    assert r.status_code == 200, r.text
    return list(r.json()["refused"])


async def test_a_replica_killed_loses_no_record_and_its_consumers_go_on_through_the_other(
    tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    env = {"BROKERGATE_SHARE_RECORD_LOCK_DURATION_MS": str(LOCK_MS)}
    jobs, workers = (
        f"jobs-{uuid.uuid4().hex[:8]}",
        f"workers-{uuid.uuid4().hex[:8]}",
    )  # the broker is the session's
    with two_replicas(tmp_path, kafka_broker, env) as replicas:
        async with (
            httpx.AsyncClient(base_url=replicas.first.url, timeout=30) as a,
            httpx.AsyncClient(base_url=replicas.second.url, timeout=30) as b,
        ):
            cid = (await a.get("/v3/clusters")).json()["data"][0]["cluster_id"]
            r = await a.post(f"/v3/clusters/{cid}/topics", json={"topic_name": jobs, "partitions_count": 2})
            assert r.status_code == 201, r.text
            r = await a.post(
                f"/topics/{jobs}",
                json={"records": [{"value": f"job-{i}", "partition": i % 2} for i in range(40)]},
                headers={"Content-Type": STRING},
            )
            assert r.status_code == 200, r.text

            # c1 (through a) takes some and settles half; c2 (through b) takes some more
            c1 = await _consumer(a, workers, "c1", jobs)
            c2 = await _consumer(b, workers, "c2", jobs)
            held = await _poll(a, c1, max_records=10)
            assert len(held) == 10
            assert await _accept(a, c1, held[:5]) == []
            taken = await _poll(b, c2, max_records=10)
            assert not {(r["partition"], r["offset"]) for r in taken} & {
                (r["partition"], r["offset"]) for r in held
            }

            replicas.first.kill()  # kill -9, with c1 holding five records

            # c1 lives on in Redis: through b it settles one more of what it held
            assert await _accept(b, c1, held[5:6]) == []
            delivered: Counter[tuple[int, int]] = Counter()
            counts: dict[tuple[int, int], int] = {}
            for record in held + taken:
                delivered[(record["partition"], record["offset"])] += 1
            assert await _accept(b, c2, taken) == []
            # c2 takes everything else; c1's last four come back once their lock expires
            idle = 0
            while idle < 3:
                got = await _poll(b, c2, max_records=8, timeout=LOCK_MS)
                if not got:
                    idle += 1
                    continue
                for record in got:
                    key = (record["partition"], record["offset"])
                    delivered[key] += 1
                    counts[key] = record["delivery_count"]
                assert await _accept(b, c2, got) == []
            late = {(r["partition"], r["offset"]) for r in held[6:]}
            assert sorted(delivered) == [(p, o) for p in (0, 1) for o in range(20)]  # none lost
            assert {k: n for k, n in delivered.items() if n > 1} == dict.fromkeys(late, 2)
            assert {k for k, n in counts.items() if n == 2} == late  # counted across replicas
            assert await _accept(b, c1, held[6:]) != []  # no longer c1's

            group = (await b.get(f"/v3/clusters/{cid}/share-groups/{workers}")).json()
            assert group["lag"] == 0
            assert [(p["start_offset"], p["acquired"]) for p in group["partitions"]] == [(20, 0), (20, 0)]


async def test_kill_9_of_the_embedded_gateway_keeps_what_was_settled_and_redelivers_what_was_held(
    tmp_path: Path,
) -> None:
    env = {"BROKERGATE_SHARE_RECORD_LOCK_DURATION_MS": str(LOCK_MS)}
    gw = GatewayProcess(tmp_path / "data", env=env).start()
    try:
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
            cid = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
            r = await client.post(f"/v3/clusters/{cid}/topics", json={"topic_name": "jobs"})
            assert r.status_code == 201, r.text
            r = await client.post(
                "/topics/jobs",
                json={"records": [{"value": f"job-{i}"} for i in range(20)]},
                headers={"Content-Type": STRING},
            )
            assert r.status_code == 200, r.text
            c1 = await _consumer(client, "workers", "c1", "jobs")
            held = await _poll(client, c1, max_records=10)
            assert await _accept(client, c1, held[:5]) == []
        gw.kill()  # kill -9: c1 (in-process sessions) is gone; what it settled is stored

        gw = GatewayProcess(tmp_path / "data", env=env).start()
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
            c2 = await _consumer(client, "workers", "c2", "jobs")
            counts: dict[int, int] = {}
            idle = 0
            while idle < 3:
                got = await _poll(client, c2, max_records=8, timeout=LOCK_MS)
                if not got:
                    idle += 1
                    continue
                for record in got:
                    assert record["offset"] not in counts, "delivered twice after it was accepted"
                    counts[record["offset"]] = record["delivery_count"]
                assert await _accept(client, c2, got) == []
            assert sorted(counts) == list(range(5, 20))  # the five accepted before the kill never come back
            assert {o for o, n in counts.items() if n == 2} == {r["offset"] for r in held[5:]}
    finally:
        gw.stop()
