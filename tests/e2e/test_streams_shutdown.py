"""SIGTERM ends every stream with a final event (reason ``shutdown``) and the process still exits
soon: the gateway drains, each stream says where its client stood, and the client resumes
elsewhere. A Ctrl-C (SIGINT) does all the same."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.test_shutdown import STATUS
from tests.helpers import consumer, create_topic, produce, subscribe
from tests.stream_client import EventReader, events, receive, send, socket_url


async def _until_end(stream: EventReader) -> dict[str, object]:
    while True:
        event = await stream.next(timeout=10)
        if event.event == "end":
            ended: dict[str, object] = event.json()
            return ended


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_stop_ends_every_stream_with_a_shutdown_event_and_the_process_exits(
    tmp_path, sig: signal.Signals
) -> None:
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
            await create_topic(client, "t", 2)
            sse_base = await consumer(client, "g-sse", reset="earliest")
            ws_base = await consumer(client, "g-ws", reset="earliest")
            for base in (sse_base, ws_base):
                await subscribe(client, base, "t")
            await produce(client, "t", [{"value": "a", "partition": 0}])
            async with (
                events(client, f"{sse_base}/records") as instance_stream,
                events(client, "/topics/t/partitions/0/records", format="string") as partition_stream,
                connect(socket_url(ws_base)) as ws,
            ):
                assert len(await instance_stream.records(1)) == 1
                assert len(await partition_stream.records(1)) == 1
                await receive(ws, "hello")
                await receive(ws, "rebalance")
                await send(ws, "credit", records=10, bytes=1000)
                assert len((await receive(ws, "records"))["records"]) == 1

                signalled = time.monotonic()
                assert gw.proc is not None
                gw.proc.send_signal(sig)
                ended = await asyncio.gather(
                    _until_end(instance_stream), _until_end(partition_stream), receive(ws, "end")
                )
                answered_in = time.monotonic() - signalled
                cursor = instance_stream.last_event_id
                with_cursor = ended[2]
        assert [e["reason"] for e in ended] == ["shutdown", "shutdown", "shutdown"], ended
        assert cursor == "t:0:1,t:1:0"  # where the SSE client resumes, through any replica
        assert with_cursor["cursor"] == "t:0:1,t:1:0"  # and the WebSocket client
        assert answered_in < 5, answered_in
        assert gw.proc.wait(timeout=15) == STATUS[sig], gw.output()
        assert "Traceback" not in gw.output()
    finally:
        gw.stop()
