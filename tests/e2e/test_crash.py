"""kill -9 under load loses no acknowledged record and no committed offset."""

from __future__ import annotations

import asyncio
import random

import httpx

from tests.e2e.gateway_process import GatewayProcess
from tests.helpers import STRING, V2

PARTITIONS = 3


async def _producer(
    client: httpx.AsyncClient, topic: str, wid: int, acked: dict, stop: asyncio.Event
) -> None:
    n = 0
    while not stop.is_set():
        records = [
            {"value": f"w{wid}-{n + i}", "key": f"k{(n + i) % 7}"} for i in range(random.randint(1, 20))
        ]
        n += len(records)
        try:
            r = await client.post(
                f"/topics/{topic}", json={"records": records}, headers={"Content-Type": STRING}
            )
        except httpx.TransportError:
            return  # the gateway died mid-request: this batch was never acknowledged
        if r.status_code != 200:
            return
        for rec, off in zip(records, r.json()["offsets"], strict=True):
            assert off["error_code"] is None
            acked[(off["partition"], off["offset"])] = rec["value"]


async def _committer(
    client: httpx.AsyncClient, base: str, topic: str, committed: dict, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        try:
            r = await client.get(f"{base}/records", params={"timeout": 100}, headers={"Accept": STRING})
            if r.status_code != 200:
                return
            last: dict[int, int] = {}
            for rec in r.json():
                last[rec["partition"]] = rec["offset"]
            if not last:
                continue
            offsets = [{"topic": topic, "partition": p, "offset": o} for p, o in last.items()]
            r = await client.post(f"{base}/offsets", json={"offsets": offsets}, headers={"Content-Type": V2})
        except httpx.TransportError:
            return
        if r.status_code == 200:
            for p, o in last.items():
                committed[p] = o + 1


async def test_kill_9_under_load_keeps_acknowledged_records_and_commits(tmp_path):
    data = tmp_path / "data"
    gw = GatewayProcess(data).start()
    topic, group = "crash-topic", "crash-group"
    acked: dict[tuple[int, int], str] = {}
    committed: dict[int, int] = {}
    try:
        async with httpx.AsyncClient(base_url=gw.url, timeout=10) as client:
            cid = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
            r = await client.post(
                f"/v3/clusters/{cid}/topics", json={"topic_name": topic, "partitions_count": PARTITIONS}
            )
            assert r.status_code == 201
            r = await client.post(
                f"/consumers/{group}",
                json={"name": "c1", "format": "string", "auto.offset.reset": "earliest"},
                headers={"Content-Type": V2},
            )
            base = r.json()["base_uri"]
            r = await client.post(
                f"{base}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2}
            )
            assert r.status_code == 204
            stop = asyncio.Event()
            tasks = [asyncio.create_task(_producer(client, topic, w, acked, stop)) for w in range(6)]
            tasks.append(asyncio.create_task(_committer(client, base, topic, committed, stop)))
            await asyncio.sleep(1.5 + random.random())
            gw.kill()  # mid-flight: requests in progress never get their acknowledgement
            stop.set()
            await asyncio.gather(*tasks)
        assert len(acked) > 100 and committed

        gw = GatewayProcess(data).start()
        async with httpx.AsyncClient(base_url=gw.url, timeout=10) as client:
            for p in range(PARTITIONS):
                want = {o: v for (pp, o), v in acked.items() if pp == p}
                got: dict[int, str] = {}
                offset = 0
                while True:
                    r = await client.get(
                        f"/topics/{topic}/partitions/{p}/records",
                        params={"offset": offset},
                        headers={"Accept": STRING},
                    )
                    body = r.json()
                    for rec in body["records"]:
                        got[rec["offset"]] = rec["value"]
                    if not body["records"]:
                        break
                    offset = body["next_offset"]
                for o, v in want.items():
                    assert got.get(o) == v, f"acknowledged record {p}/{o} lost or changed"
                # offsets stay dense after recovery
                assert sorted(got) == list(range(len(got)))
            r = await client.post(
                f"/consumers/{group}", json={"name": "c2", "format": "string"}, headers={"Content-Type": V2}
            )
            base = r.json()["base_uri"]
            r = await client.request(
                "GET",
                f"{base}/offsets",
                json={"partitions": [{"topic": topic, "partition": p} for p in range(PARTITIONS)]},
                headers={"Content-Type": V2},
            )
            stored = {o["partition"]: o["offset"] for o in r.json()["offsets"]}
            for p, off in committed.items():
                assert stored[p] >= off, f"committed offset of partition {p} lost"
            # and the group resumes there
            await client.post(f"{base}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2})
            r = await client.get(f"{base}/records", params={"timeout": 1000}, headers={"Accept": STRING})
            for rec in r.json():
                assert rec["offset"] >= stored[rec["partition"]]
    finally:
        gw.stop()
