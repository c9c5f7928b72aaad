"""A flood of failures against a real gateway: the process log and the audit trail stay bounded, and
every line they leave out is counted, the count written once its second is over and at shutdown."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import math
import time
from pathlib import Path

import httpx
import pytest

from service.core import audit
from service.security.users import add_user
from tests.conftest import RunningGateway, start_gateway

FLOOD = 1000
INVALID = "Invalid HTTP request received."


async def _garbage(url: str) -> None:
    """A request no HTTP parser takes: uvicorn warns about each one in the process log."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"GARBAGE \x00\x01 nonsense\r\n\r\n")
    await writer.drain()
    await reader.read()  # the 400 and the close
    writer.close()


async def test_a_flood_of_bad_requests_writes_a_bounded_process_log(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="brokergate")
    gw = await start_gateway(tmp_path / "data", log_lines_per_s=20)
    handlers = [h for h in logging.getLogger("uvicorn").handlers if isinstance(h, logging.StreamHandler)]
    assert handlers, "uvicorn writes the process log through its own handler"
    out = io.StringIO()
    streams = [h.setStream(out) for h in handlers]
    try:
        started = time.monotonic()
        for batch in range(0, FLOOD, 50):
            await asyncio.gather(*(_garbage(gw.url) for _ in range(min(50, FLOOD - batch))))
        seconds = time.monotonic() - started
    finally:
        await gw.client.aclose()
        await gw.stop()
        for handler, stream in zip(handlers, streams, strict=True):
            handler.setStream(stream)  # type: ignore[arg-type]
    written = out.getvalue().count(INVALID)
    # at most 20 lines in each second the flood touched
    assert 0 < written <= 20 * (math.ceil(seconds) + 1), (written, seconds)
    told = [r.getMessage() for r in caplog.records if r.getMessage().startswith("log.suppressed")]
    counted = sum(int(message.split()[1]) for message in told)
    assert written + counted == FLOOD, (written, told)  # each line left out is counted, by shutdown


# The trail's budget in these tests: small, so that a flood passes it on a machine of any speed
# (a busy CI machine refused fewer than the shipped 200 requests a second).
LINES_PER_S = 10


@pytest.fixture
async def secured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunningGateway:
    monkeypatch.setattr(audit, "_budget", audit._Budget(LINES_PER_S))  # the gateway runs in this process
    users = tmp_path / "users"
    add_user(users, "alice", "alice-pw")
    trail = tmp_path / "audit"
    return await start_gateway(tmp_path / "data", auth="basic", users_file=users, audit_log=trail)


async def _refused_flood(gw: RunningGateway, trail: Path) -> int:
    """Refused requests, as fast as they go, past the trail's lines in a second, until lines of a
    batch are left out: the flood ends with lines of its last second counted, not written. How
    many were sent."""
    sent = 0
    async with httpx.AsyncClient(base_url=gw.url, timeout=30) as anonymous:
        while sent < 20_000:
            before = _accounted(trail)[0]
            answers = await asyncio.gather(
                *(anonymous.get("/topics", headers={"Authorization": "Basic !!!"}) for _ in range(50))
            )
            assert {r.status_code for r in answers} == {401}
            sent += len(answers)
            if sent >= 2 * LINES_PER_S and _accounted(trail)[0] - before < len(answers):
                return sent
    raise AssertionError("the audit trail wrote every line of the flood")


def _accounted(trail: Path) -> tuple[int, int]:
    """Refusals written, and refusals counted as suppressed, in the trail so far."""
    lines = [json.loads(line) for line in trail.read_text().splitlines()] if trail.exists() else []
    written = sum(1 for line in lines if line["event"] == "authentication")
    return written, sum(line["count"] for line in lines if line["event"] == "audit.suppressed")


async def test_the_suppressed_count_is_written_once_its_second_is_over(secured: RunningGateway) -> None:
    trail = secured.settings.audit_log
    assert trail is not None
    try:
        sent = await _refused_flood(secured, trail)
        for _ in range(100):  # no request meanwhile: the count comes by itself
            if sum(_accounted(trail)) == sent:
                break
            await asyncio.sleep(0.1)
        assert sum(_accounted(trail)) == sent, _accounted(trail)
    finally:
        await secured.client.aclose()
        await secured.stop()


async def test_the_suppressed_count_is_written_at_shutdown(secured: RunningGateway) -> None:
    trail = secured.settings.audit_log
    assert trail is not None
    try:
        sent = await _refused_flood(secured, trail)
    finally:
        await secured.client.aclose()
        await secured.stop()  # at once: the last second's count is written on the way out
    assert sum(_accounted(trail)) == sent, _accounted(trail)
