"""One careless or hostile client against a real ``brokergate serve`` with a low ``ulimit -n``.

Each test is one thing such a client did (the table of the hardening issue), and asserts what
the client gets (a Confluent-shaped 4xx or 503, never a 500), that the gateway keeps serving a
well-behaved client meanwhile, and, at the end, that it restarts with everything it
acknowledged.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
import orjson
import pytest

from tests.e2e.gateway_process import GatewayProcess
from tests.helpers import (
    BINARY,
    JSON,
    STRING,
    V2,
    b64,
    commit,
    consumer,
    create_topic,
    poll_until,
    produce,
    subscribe,
)

NOFILE = 512  # soft and hard: what a careless deployment gives a service
LIMITS = {
    "BROKERGATE_MAX_CONNECTIONS": "64",
    "BROKERGATE_HEADER_TIMEOUT_MS": "1000",
    "BROKERGATE_MAX_INSTANCES_PER_GROUP": "5",
    "BROKERGATE_MAX_INSTANCES": "20",
    "BROKERGATE_MAX_OPEN_POLLS": "8",
    "BROKERGATE_SEALED_FDS": "4",
    "BROKERGATE_IDEMPOTENCY_MAX_KEYS": "100",
    "BROKERGATE_REAPER_INTERVAL_MS": "200",
    "BROKERGATE_METADATA_REFRESH_MS": "200",
}


class LimitedGateway(GatewayProcess):
    """``brokergate serve`` under ``prlimit --nofile``: it cannot raise its own limit."""

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={NOFILE}:{NOFILE}", "--", *super().command()]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LimitedGateway]:
    gw = LimitedGateway(tmp_path_factory.mktemp("abuse") / "data", env=LIMITS).start()
    try:
        yield gw
    finally:
        gw.stop()


@pytest.fixture
async def client(gateway: LimitedGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as c:
        yield c


async def still_serving(client: httpx.AsyncClient) -> None:
    """A well-behaved client's request is answered."""
    r = await client.get("/topics")
    assert r.status_code == 200, r.text


def error(r: httpx.Response, status: int, code: int) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error_code"] == code, body
    return str(body["message"])


def proc_file(gw: LimitedGateway, name: str) -> str:
    return Path(f"/proc/{gw.pid}/{name}").read_text()


def open_fds(gw: LimitedGateway) -> int:
    return len(list(Path(f"/proc/{gw.pid}/fd").iterdir()))


async def test_the_gateway_runs_at_the_low_limit(gateway):
    limits = proc_file(gateway, "limits")
    line = next(x for x in limits.splitlines() if x.startswith("Max open files"))
    assert line.split()[3:5] == [str(NOFILE), str(NOFILE)]


async def test_partitions_beyond_the_fd_budget_are_refused_whole(gateway, client):
    cid = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    r = await client.post(f"/v3/clusters/{cid}/topics", json={"topic_name": "huge", "partitions_count": 400})
    assert "file descriptors" in error(r, 422, 42208)
    assert not (gateway.data_dir / "huge").exists() and not any(gateway.data_dir.glob("huge-*"))
    assert (await client.get("/topics/huge")).status_code == 404
    await create_topic(client, "fits", 8)
    r = await client.patch(f"/v3/clusters/{cid}/topics/fits", json={"partitions_count": 400})
    error(r, 422, 42208)
    assert len((await client.get("/topics/fits/partitions")).json()) == 8
    await still_serving(client)


async def test_a_tiny_segment_size_is_refused(client):
    cid = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    body = {"topic_name": "tiny", "partitions_count": 1, "configs": [{"name": "segment.bytes", "value": "1"}]}
    r = await client.post(f"/v3/clusters/{cid}/topics", json=body)
    assert "segment.bytes" in error(r, 422, 42208)


async def test_many_produces_to_many_segments_hold_no_more_descriptors(gateway, client):
    await create_topic(client, "rolling", 1, segment_bytes=str(1 << 20))
    value = b64(b"x" * 100_000)
    before = open_fds(gateway)
    for _ in range(6):  # about 12 segments
        await produce(client, "rolling", [{"value": value}] * 20, fmt=BINARY)
    r = await client.get(
        "/topics/rolling/partitions/0/records", params={"offset": 0}, headers={"Accept": BINARY}
    )
    assert r.status_code == 200 and r.json()["records"]
    # The active segment's two index files, and at most SEALED_FDS sealed segments, whatever was read.
    assert open_fds(gateway) <= before + 2 + 4


async def test_a_body_over_the_limit_is_refused_and_others_are_served(gateway, client):
    await create_topic(client, "bodies", 1)
    big = b'{"records":[' + b",".join([b'{"value":{"n":1}}'] * 1_100_000) + b"]}"  # about 19 MiB
    slow = asyncio.create_task(client.post("/topics/bodies", content=big, headers={"Content-Type": JSON}))
    await still_serving(client)
    error(await slow, 413, 41301)
    tiny = orjson.dumps({"records": [{"value": i} for i in range(10_001)]})  # small body, too many records
    error(await client.post("/topics/bodies", content=tiny, headers={"Content-Type": JSON}), 413, 41301)
    assert (await client.get("/topics/bodies/partitions/0/offsets")).json()["end_offset"] == 0
    vm_hwm_kib = next(
        int(x.split()[1]) for x in proc_file(gateway, "status").splitlines() if x.startswith("VmHWM")
    )
    assert vm_hwm_kib < 1024 * 1024  # what a 16-31 MiB body once cost: 6-11 GiB


async def test_a_backtracking_pattern_does_not_stall_anyone(client):
    await create_topic(client, "a" * 48 + "-", 1)
    base = await consumer(client, "patterns")
    r = await asyncio.wait_for(
        client.post(f"{base}/subscription", json={"topic_pattern": "(a+)+$"}, headers={"Content-Type": V2}),
        10,
    )
    assert r.status_code == 204, r.text  # a backtracking engine would take days on 48 characters
    await asyncio.sleep(0.5)  # the metadata watcher re-evaluates it a few times meanwhile
    await still_serving(client)
    r = await client.post(
        f"{base}/subscription", json={"topic_pattern": "a" * 1001}, headers={"Content-Type": V2}
    )
    error(r, 422, 42204)
    await client.delete(base, headers={"Content-Type": V2})


async def test_idempotency_keys_are_bounded_and_scoped_to_their_client(client):
    await create_topic(client, "idem", 1)
    body = {"records": [{"value": "v"}]}
    for n in range(300):  # three times the bound
        r = await client.post(
            "/topics/idem", json=body, headers={"Content-Type": STRING, "Idempotency-Key": f"k{n}"}
        )
        assert r.status_code == 200, r.text
    mine = {"Content-Type": STRING, "Idempotency-Key": "shared", "X-API-Key": "team-a"}
    theirs = {**mine, "X-API-Key": "team-b"}
    first = (await client.post("/topics/idem", json=body, headers=mine)).json()
    other = await client.post("/topics/idem", json=body, headers=theirs)
    assert other.headers["Idempotency-Replayed"] == "false"  # another client's key answers nothing of mine
    again = await client.post("/topics/idem", json=body, headers=mine)
    assert again.headers["Idempotency-Replayed"] == "true" and again.json() == first


async def test_only_members_move_a_groups_offsets(client):
    await create_topic(client, "fenced", 1)
    await produce(client, "fenced", [{"value": str(i)} for i in range(5)])
    member = await consumer(client, "fenced-group")
    await subscribe(client, member, "fenced")
    assert len(await poll_until(client, member, 5)) == 5
    await commit(client, member)
    outsider = await consumer(client, "fenced-group")  # never subscribed: not a member
    r = await client.post(
        f"{outsider}/offsets",
        json={"offsets": [{"topic": "fenced", "partition": 0, "offset": 0}]},
        headers={"Content-Type": V2},
    )
    error(r, 409, 40903)
    r = await client.request(
        "GET",
        f"{member}/offsets",
        json={"partitions": [{"topic": "fenced", "partition": 0}]},
        headers={"Content-Type": V2},
    )
    assert r.json()["offsets"][0]["offset"] == 5
    for base in (member, outsider):
        await client.delete(base, headers={"Content-Type": V2})


async def test_json_values_are_kept_exactly(client):
    await create_topic(client, "exact", 1)
    value = b'{"big":123456789012345678901234567890,"pi":3.14159265358979323846,"z":1,"a":2}'
    body = b'{"records":[{"value":' + value + b"}]}"
    r = await client.post("/topics/exact", content=body, headers={"Content-Type": JSON})
    assert r.status_code == 200, r.text
    r = await client.get("/topics/exact/partitions/0/records", params={"offset": 0}, headers={"Accept": JSON})
    assert b'"value":' + value in r.content  # the digits, the key order: as sent


async def test_a_huge_header_counts_toward_the_record_limit(client):
    await create_topic(client, "headers", 1)
    header = {"name": "h", "value": base64.b64encode(b"x" * (9 << 20)).decode()}
    r = await client.post(
        "/topics/headers",
        json={"records": [{"value": b64("v"), "headers": [header]}]},
        headers={"Content-Type": BINARY},
    )
    assert r.status_code == 413, r.text


async def test_odd_names_are_usable_or_refused_never_misrouted(gateway, client):
    for group in ("g?x", "g#x", "g%x y"):
        base = await consumer(client, quote(group, safe=""))
        assert urlsplit(base).path.startswith(f"/consumers/{quote(group, safe='')}/instances/")
        assert (await client.get(f"{urlsplit(base).path}/subscription")).status_code == 200
        await client.delete(urlsplit(base).path, headers={"Content-Type": V2})
    for raw in ("/consumers/%2E%2E", "/consumers/a%2Fb", "/topics/x%2Fpartitions%2F0"):
        r = await client.post(raw, json={}, headers={"Content-Type": V2})
        error(r, 422, 42207)
    r = await client.post("/consumers/g", json={"name": "a/b"}, headers={"Content-Type": V2})
    error(r, 422, 42204)
    r = await client.post("/consumers/g", json={}, headers={"Content-Type": V2, "Host": "evil.example"})
    assert r.json()["base_uri"].startswith(gateway.url + "/")
    await client.delete(urlsplit(r.json()["base_uri"]).path, headers={"Content-Type": V2})


async def test_instances_and_their_timeouts_are_bounded(client):
    for timeout, codes in ((10**15, {42204}), (2**70, {42204, 422})):  # 2**70 is no integer a config holds
        r = await client.post(
            "/consumers/timeouts",
            json={"consumer.instance.timeout.ms": timeout},
            headers={"Content-Type": V2},
        )
        assert r.status_code == 422 and r.json()["error_code"] in codes, r.text
    made = [await consumer(client, "crowd") for _ in range(5)]
    r = await client.post("/consumers/crowd", json={}, headers={"Content-Type": V2})
    error(r, 409, 40903)
    for base in made:
        await client.delete(base, headers={"Content-Type": V2})


async def test_unknown_routes_and_bad_text_get_the_documented_codes(client):
    error(await client.get("/no/such/route"), 404, 404)
    await create_topic(client, "text", 1)
    body = b'{"records":[{"value":"\xff\xfe"}]}'
    error(await client.post("/topics/text", content=body, headers={"Content-Type": STRING}), 400, 400)


async def test_too_many_connections_get_a_503_and_slow_headers_are_cut_off(gateway, client):
    host, port = "127.0.0.1", gateway.port
    held = []
    for _ in range(64):
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET /topics HTTP/1.1\r\nHost: x\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")
        held.append(writer)
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"GET /topics HTTP/1.1\r\nHost: x\r\n\r\n")
    raw = await asyncio.wait_for(reader.read(), 5)
    assert (
        raw.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in raw.lower() and b'"error_code":50301' in raw
    )
    for w in held:
        w.close()
    await asyncio.sleep(0.2)
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"GET /topics HTTP/1.1\r\n")  # and never the rest
    start = time.monotonic()
    raw = await asyncio.wait_for(reader.read(), 5)
    assert raw.startswith(b"HTTP/1.1 408") and time.monotonic() - start < 3
    await still_serving(client)


async def test_sigterm_answers_open_polls_and_a_restart_keeps_every_acknowledged_record(gateway):
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
        await create_topic(client, "kept", 2)
        acknowledged = await produce(client, "kept", [{"value": str(i)} for i in range(50)])
        base = await consumer(client, "kept-group", reset="latest")
        await subscribe(client, base, "kept")
        await client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": STRING})
        waiting = asyncio.create_task(
            client.get(f"{base}/records", params={"timeout": 25_000}, headers={"Accept": STRING})
        )
        await asyncio.sleep(0.3)
        gateway.terminate()
        r = await asyncio.wait_for(waiting, 10)
        assert r.status_code == 200 and r.json() == []  # JSON, at once; not a plain-text 500 at 10 s
    assert gateway.proc is not None
    gateway.proc.wait(15)
    gateway.start()
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
        assert (await client.get("/readyz")).status_code == 200
        ends = 0
        for p in (0, 1):
            ends += (await client.get(f"/topics/kept/partitions/{p}/offsets")).json()["end_offset"]
        assert ends == len(acknowledged)
        assert (await client.get("/topics/fits/partitions")).status_code == 200  # the earlier topics too
