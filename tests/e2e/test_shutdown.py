"""SIGTERM drains: open long-polls answer at once, produces in flight finish, the process exits soon."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.e2e.gateway_process import GatewayProcess
from tests.helpers import STRING, V2

LONG_MS = 30_000  # far longer than the drain may take


async def test_sigterm_answers_open_long_polls_and_exits_well_inside_a_grace_period(tmp_path):
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        async with httpx.AsyncClient(base_url=gw.url, timeout=LONG_MS / 1000 + 10) as client:
            cid = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
            r = await client.post(
                f"/v3/clusters/{cid}/topics", json={"topic_name": "t", "partitions_count": 1}
            )
            assert r.status_code == 201
            r = await client.post(
                "/consumers/g",
                json={"name": "c", "format": "string", "auto.offset.reset": "latest"},
                headers={"Content-Type": V2},
            )
            base = r.json()["base_uri"]
            r = await client.post(
                f"{base}/subscription", json={"topics": ["t"]}, headers={"Content-Type": V2}
            )
            assert r.status_code == 204
            await client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": STRING})

            poll = asyncio.create_task(
                client.get(f"{base}/records", params={"timeout": LONG_MS}, headers={"Accept": STRING})
            )
            read = asyncio.create_task(
                client.get(
                    "/topics/t/partitions/0/records",
                    params={"offset": 0, "timeout": LONG_MS},
                    headers={"Accept": STRING},
                )
            )
            await asyncio.sleep(0.5)  # both are waiting now
            assert not poll.done() and not read.done()
            signalled = time.monotonic()
            gw.terminate()
            polled, stateless = await asyncio.wait_for(asyncio.gather(poll, read), timeout=10)
            answered_in = time.monotonic() - signalled
        # Both answered, in the Confluent shape (empty: nothing was produced), not a plain-text 500.
        assert polled.status_code == 200 and polled.json() == [], polled.text
        assert stateless.status_code == 200 and stateless.json()["records"] == [], stateless.text
        assert answered_in < LONG_MS / 1000 / 2, answered_in  # they did not wait out their timeout
        assert gw.proc is not None
        gw.proc.wait(timeout=15)
    finally:
        gw.stop()
