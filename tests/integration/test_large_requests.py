"""Large requests: a large produce is parsed off the event loop, a large poll is streamed.

Both must be invisible to the client but for the transfer encoding: the same records, the same
errors, the same JSON.
"""

from __future__ import annotations

import orjson

from service.api.replies import STREAM_ABOVE_BYTES
from service.api.topics import OFF_LOOP_BYTES
from tests.helpers import BINARY, V2, b64, consumer, create_topic, subscribe, unb64

VALUE = b"v" * 1000
PER_REQUEST = 1000  # records of 1 KB: a request body of about 1.3 MiB, over OFF_LOOP_BYTES


def values(n: int) -> list[bytes]:
    return [VALUE[:-6] + b"%06d" % i for i in range(n)]


async def produce_many(client, topic: str, n: int) -> None:
    sent = values(n)
    for start in range(0, n, PER_REQUEST):
        body = orjson.dumps({"records": [{"value": b64(v)} for v in sent[start : start + PER_REQUEST]]})
        assert len(body) > OFF_LOOP_BYTES or n - start < PER_REQUEST
        r = await client.post(f"/topics/{topic}", content=body, headers={"Content-Type": BINARY})
        assert r.status_code == 200, r.text
        assert len(r.json()["offsets"]) == min(PER_REQUEST, n - start)


async def test_a_large_poll_is_streamed_and_holds_every_record_in_order(client, name):
    await create_topic(client, name)
    n = 6 * PER_REQUEST  # about 6 MB of records: streamed, in several slices
    assert n * len(VALUE) > STREAM_ABOVE_BYTES
    await produce_many(client, name, n)
    base = await consumer(client, name, fmt="binary")
    await subscribe(client, base, name)
    got: list[dict] = []
    streamed = 0
    for _ in range(20):
        r = await client.get(
            f"{base}/records", params={"timeout": 2000, "max_bytes": 16 << 20}, headers={"Accept": BINARY}
        )
        assert r.status_code == 200
        if r.headers.get("transfer-encoding") == "chunked":
            assert "content-length" not in r.headers and len(r.content) > STREAM_ABOVE_BYTES
            streamed += 1
        got += r.json()
        if len(got) >= n:
            break
    assert streamed >= 1
    assert [rec["offset"] for rec in got] == list(range(n))
    assert [unb64(rec["value"]) for rec in got] == values(n)
    assert all(rec["topic"] == name and rec["partition"] == 0 and rec["headers"] == [] for rec in got)
    await client.delete(base, headers={"Content-Type": V2})


async def test_a_large_stateless_read_is_streamed_with_its_offsets(client, name):
    await create_topic(client, name)
    n = 6 * PER_REQUEST
    await produce_many(client, name, n)
    got: list[dict] = []
    offset = 0
    streamed = 0
    while offset < n:
        r = await client.get(
            f"/topics/{name}/partitions/0/records",
            params={"offset": offset, "max_bytes": 16 << 20},
            headers={"Accept": BINARY},
        )
        assert r.status_code == 200, r.text
        streamed += r.headers.get("transfer-encoding") == "chunked"
        body = r.json()
        assert set(body) == {"records", "next_offset", "high_watermark"}
        assert body["high_watermark"] == n and body["records"]
        got += body["records"]
        offset = body["next_offset"]
    assert [unb64(rec["value"]) for rec in got] == values(n)
    assert streamed >= 1


async def test_a_small_poll_is_one_body_with_its_length(client, name):
    await create_topic(client, name)
    await produce_many(client, name, 1)  # one record (the body is small: no thread)
    r = await client.get(  # plain: its length is the body's (a coded one's is what the wire carried)
        f"/topics/{name}/partitions/0/records",
        params={"offset": 0},
        headers={"Accept": BINARY, "Accept-Encoding": "identity"},
    )
    assert r.headers["content-length"] == str(len(r.content))
    assert r.json()["next_offset"] == 1
    r = await client.get(
        f"/topics/{name}/partitions/0/records", params={"offset": 1}, headers={"Accept": BINARY}
    )
    assert r.json() == {"records": [], "next_offset": 1, "high_watermark": 1}


async def test_a_bad_record_in_a_large_body_is_named_and_nothing_is_stored(client, name):
    await create_topic(client, name)
    records = [{"value": b64(v)} for v in values(PER_REQUEST)]
    records[777] = {"value": "not base64!"}
    body = orjson.dumps({"records": records})
    assert len(body) > OFF_LOOP_BYTES
    r = await client.post(f"/topics/{name}", content=body, headers={"Content-Type": BINARY})
    assert r.status_code == 400 and r.json()["error_code"] == 400 and "records[777]" in r.json()["message"]
    r = await client.post(f"/topics/{name}", content=body[:-10], headers={"Content-Type": BINARY})
    assert r.status_code == 400 and r.json()["error_code"] == 400, r.text  # cut short: not JSON
    offsets = (await client.get(f"/topics/{name}/partitions/0/offsets")).json()
    assert offsets["end_offset"] == 0
