"""The descriptor budget of a real ``brokergate serve`` under a low ``ulimit -n`` (soft and hard).

Topics are created until one is refused for want of descriptors, then every partition is
written to, which opens its index files: nothing written may fail with EMFILE, and the gateway
must still answer every connection, a 503 past ``MAX_CONNECTIONS`` rather than silence. With
the default ``MAX_CONNECTIONS`` (1000) a small limit is divided so that topics still fit, and
the start-up log says how.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.gateway_process import GatewayProcess
from tests.helpers import consumer, poll_until, produce, subscribe

NOFILE = 1024
PARTITIONS = 100
CONNECTIONS = 100


class LimitedGateway(GatewayProcess):
    """``brokergate serve`` under ``prlimit --nofile``: it cannot raise its own limit."""

    def __init__(self, data_dir: Path, *, env: dict[str, str], nofile: int = NOFILE) -> None:
        super().__init__(data_dir, env=env)
        self.nofile = nofile

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={self.nofile}:{self.nofile}", "--", *super().command()]


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[LimitedGateway]:
    env = {"BROKERGATE_MAX_CONNECTIONS": str(CONNECTIONS), "BROKERGATE_MAX_CONNECTIONS_PER_ADDRESS": "1000"}
    gw = LimitedGateway(tmp_path / "data", env=env).start()
    try:
        yield gw
    finally:
        gw.stop()


def open_fds(gw: LimitedGateway) -> int:
    return len(list(Path(f"/proc/{gw.pid}/fd").iterdir()))


async def get_topics(port: int) -> bytes:
    """A whole answer to one GET on a fresh connection that asks to be closed after it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /topics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    return raw


async def test_written_partitions_and_full_connections_never_run_the_gateway_out_of_descriptors(gateway):
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as client:
        cid = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
        created: list[str] = []
        for i in range(10):
            body = {"topic_name": f"wide-{i}", "partitions_count": PARTITIONS}
            r = await client.post(f"/v3/clusters/{cid}/topics", json=body)
            if r.status_code != 201:
                assert r.status_code == 422 and r.json()["error_code"] == 42208, r.text
                assert "file descriptors" in r.json()["message"]
                break
            created.append(f"wide-{i}")
        assert created and len(created) < 10  # some fit, and the budget ends somewhere
        # One record to every partition: each opens its index files now.
        for topic in created:
            for p in range(PARTITIONS):
                await produce(client, topic, [{"value": "x"}], partition=p)
        assert open_fds(gateway) < NOFILE
        # Every connection the gateway may hold (the client's own is one), held; one more is
        # answered 503, not dropped.
        held = []
        for _ in range(CONNECTIONS - 1):
            reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
            writer.write(b"GET /topics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
            held.append(writer)
        refused = await get_topics(gateway.port)
        assert refused.startswith(b"HTTP/1.1 503") and b'"error_code":50301' in refused, refused
        assert b"retry-after: 1" in refused.lower()
        for writer in held:
            writer.close()
        await asyncio.sleep(0.2)
        assert (await get_topics(gateway.port)).startswith(b"HTTP/1.1 200")
        # Everything written is there to read.
        r = await client.get(f"/topics/{created[-1]}/partitions/{PARTITIONS - 1}/offsets")
        assert r.json()["end_offset"] == 1


@pytest.fixture
def flooded(tmp_path: Path) -> Iterator[LimitedGateway]:
    env = {
        "BROKERGATE_MAX_CONNECTIONS": str(CONNECTIONS),
        "BROKERGATE_MAX_CONNECTIONS_PER_ADDRESS": "1000",
        "BROKERGATE_HEADER_TIMEOUT_MS": "3000",
    }
    gw = LimitedGateway(tmp_path / "data", env=env).start()
    try:
        yield gw
    finally:
        gw.stop()


async def test_more_connections_than_descriptors_are_each_answered_and_accepting_never_fails(flooded):
    # More sockets than the process may open, all at once, none sending a byte: those past
    # MAX_CONNECTIONS are refused; once few descriptors are left, at once.
    flood = [await asyncio.open_connection("127.0.0.1", flooded.port) for _ in range(NOFILE + 100)]
    assert open_fds(flooded) < NOFILE
    answers = []
    for reader, writer in flood:  # each gets an answer: 408 once its headers are late, or 503
        raw = await asyncio.wait_for(reader.read(), 30)
        answers.append(raw[:12])
        writer.close()
    assert set(answers) <= {b"HTTP/1.1 408", b"HTTP/1.1 503"}, set(answers)
    assert b"HTTP/1.1 503" in answers
    assert (await get_topics(flooded.port)).startswith(b"HTTP/1.1 200")
    log = flooded.log_path.read_text()
    assert "Too many open files" not in log and "out of system resource" not in log


async def fill_with_small_topics(client: httpx.AsyncClient, most: int) -> tuple[list[str], httpx.Response]:
    """Two-partition topics created until one is refused (at most ``most``): the names, the refusal."""
    cid = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    created: list[str] = []
    for i in range(most):
        r = await client.post(
            f"/v3/clusters/{cid}/topics", json={"topic_name": f"small-{i}", "partitions_count": 2}
        )
        if r.status_code != 201:
            return created, r
        created.append(f"small-{i}")
    raise AssertionError(f"{most} topics of 2 partitions fit: the budget ends nowhere")


@pytest.mark.parametrize(
    ("nofile", "configured", "connections", "level"),
    [
        (1024, None, 384, "INFO"),  # the default 1000 lowered: half of 1024 less the 256 kept
        (4096, None, 1000, "INFO"),  # the default fits
        (1024, 2000, 384, "WARNING"),  # a configured one that does not fit is lowered, and warned of
    ],
)
async def test_a_small_limit_is_divided_so_that_small_topics_fit(
    tmp_path, nofile, configured, connections, level
):
    env = {} if configured is None else {"BROKERGATE_MAX_CONNECTIONS": str(configured)}
    gw = LimitedGateway(tmp_path / "data", env=env, nofile=nofile).start()
    try:
        async with httpx.AsyncClient(base_url=gw.url, timeout=60) as client:
            created, refused = await fill_with_small_topics(client, 1000)
            assert len(created) >= 8, refused.text
            assert refused.status_code == 422 and refused.json()["error_code"] == 42208, refused.text
            assert f"{connections} for client connections" in refused.json()["message"]
            # What is left beside the connections and the 256 kept, 3 a partition, went to topics
            # (less the files the gateway holds open of its own).
            room = nofile - 256 - connections
            assert room - 100 <= len(created) * 2 * 3 <= room, len(created)
            # Every partition of several of them written to and consumed.
            some = created[:8]
            for topic in some:
                for p in range(2):
                    await produce(client, topic, [{"value": f"{topic}/{p}"}], partition=p)
            base = await consumer(client, "small-readers")
            await subscribe(client, base, *some)
            got = await poll_until(client, base, 2 * len(some))
            assert sorted(r["value"] for r in got) == sorted(f"{t}/{p}" for t in some for p in range(2))
            assert open_fds(gw) < nofile
        # The division was said at start, in one line.
        lines = [x for x in gw.log_path.read_text().splitlines() if "file descriptors: ulimit -n" in x]
        assert len(lines) == 1 and f" {level} " in lines[0] and f"ulimit -n {nofile} " in lines[0], lines
        assert f"{connections} for client connections" in lines[0], lines
    finally:
        gw.stop()
