"""SIGTERM drains: open long-polls answer at once, produces in flight finish, the process exits soon.
A Ctrl-C (SIGINT) stops it the same way, then exits 0 without a word more than uvicorn's own
lines, under ``brokergate serve`` as under ``make run``."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import httpx
import pytest

from deploy.local.process import free_port
from tests.e2e.docs_blocks import ROOT
from tests.e2e.gateway_process import GatewayProcess, make_run
from tests.helpers import STRING, V2

LONG_MS = 30_000  # far longer than the drain may take
# How each stop ends the process: SIGTERM's death by the signal (uvicorn raises it again once it
# shut down), a Ctrl-C's 0 (the stop asked for is done, as uvicorn's command and gunicorn say).
STATUS = {signal.SIGTERM: -signal.SIGTERM, signal.SIGINT: 0}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_stop_answers_open_long_polls_and_exits_well_inside_a_grace_period(tmp_path, sig):
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
            assert gw.proc is not None
            gw.proc.send_signal(sig)
            polled, stateless = await asyncio.wait_for(asyncio.gather(poll, read), timeout=10)
            answered_in = time.monotonic() - signalled
        # Both answered, in the Confluent shape (empty: nothing was produced), not a plain-text 500.
        assert polled.status_code == 200 and polled.json() == [], polled.text
        assert stateless.status_code == 200 and stateless.json()["records"] == [], stateless.text
        assert answered_in < LONG_MS / 1000 / 2, answered_in  # they did not wait out their timeout
        assert gw.proc.wait(timeout=15) == STATUS[sig], gw.output()
        assert "Traceback" not in gw.output() and "Application shutdown complete." in gw.output()
    finally:
        gw.stop()


def test_ctrl_c_closes_the_backends_and_says_nothing_more(tmp_path):
    """What the terminal shows after a Ctrl-C is uvicorn's four lines of shutting down, status 0,
    and the embedded log was closed cleanly: the next start reads it as such."""
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        with httpx.Client(base_url=gw.url, timeout=10) as client:
            r = client.post("/topics/t", json={"records": [{"value": "YQ=="}]}, headers={"Content-Type": V2})
            assert r.status_code == 200, r.text  # a topic made by its first record, on disk
        assert gw.proc is not None
        gw.proc.send_signal(signal.SIGINT)
        assert gw.proc.wait(timeout=15) == 0, gw.output()
        said = gw.output().splitlines()
        assert not [line for line in said if "Traceback" in line or "ERROR" in line.upper()], said
        assert said[-1].startswith("INFO:     Finished server process"), said
        assert "Application shutdown complete." in said[-2], said
        gw.stop()
        gw.start()
        opened = [line for line in gw.output().splitlines() if "embedded log open at" in line]
        assert len(opened) == 2 and opened[0].endswith("0 topic(s), a new data dir"), opened
        assert opened[-1].endswith("1 topic(s), stopped cleanly last time"), opened
    finally:
        gw.stop()


def test_the_start_after_a_kill_9_says_the_log_was_recovered(tmp_path):
    """A new data dir says it is new; the start after a kill -9 says the last stop was not clean
    and what was done about it, not a bare flag."""
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        with httpx.Client(base_url=gw.url, timeout=10) as client:
            r = client.post("/topics/t", json={"records": [{"value": "YQ=="}]}, headers={"Content-Type": V2})
            assert r.status_code == 200, r.text
        gw.kill()
        gw.start()
        opened = [line for line in gw.output().splitlines() if "embedded log open at" in line]
        assert len(opened) == 2 and opened[0].endswith("0 topic(s), a new data dir"), opened
        assert "1 topic(s), not stopped cleanly last time: recovered" in opened[-1], opened
    finally:
        gw.stop()


def test_ctrl_c_in_the_terminal_of_make_run_stops_it_in_silence(tmp_path):
    """A terminal sends Ctrl-C's SIGINT to the whole foreground group, make and the gateway: make
    says nothing (no "*** [run] Interrupt", which it prints for a child that died of the signal,
    nor "Error 130"), no traceback, and make ends by the signal as a shell expects (status 130)."""
    with make_run(ROOT, free_port(), {"BROKERGATE_DATA_DIR": str(tmp_path / "data")}) as serve:
        os.killpg(serve.pid, signal.SIGINT)
        out, errors = serve.communicate(timeout=30)
    said = (out + errors).decode()
    assert serve.returncode == -signal.SIGINT, said
    assert "Traceback" not in said and "make: ***" not in said, said
    assert said.rstrip().splitlines()[-1].startswith("INFO:     Finished server process"), said
