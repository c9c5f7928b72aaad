"""Produce through the v2 API: formats, partitioning, headers, timestamps, per-partition produce."""

from __future__ import annotations

import asyncio
import json

from aiokafka.partitioner import DefaultPartitioner

from tests.helpers import (
    BINARY,
    JSON,
    STRING,
    b64,
    consumer,
    create_topic,
    poll_until,
    produce,
    subscribe,
    unb64,
)


async def test_binary_produce_response_shape(client, name):
    await create_topic(client, name, 1)
    r = await client.post(
        f"/topics/{name}",
        json={"records": [{"value": b64("hello")}, {"key": b64("k"), "value": b64("world")}]},
        headers={"Content-Type": BINARY},
    )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/vnd.kafka.v2+json")
    body = r.json()
    assert body["key_schema_id"] is None and body["value_schema_id"] is None
    assert body["offsets"] == [
        {"partition": 0, "offset": 0, "error_code": None, "error": None},
        {"partition": 0, "offset": 1, "error_code": None, "error": None},
    ]


async def test_keyed_records_follow_kafkas_default_partitioner(client, name):
    await create_topic(client, name, 5)
    keys = [f"user-{i}".encode() for i in range(40)]
    offsets = await produce(client, name, [{"key": b64(k), "value": b64("v")} for k in keys], fmt=BINARY)
    native = DefaultPartitioner()
    for key, result in zip(keys, offsets, strict=True):
        assert result["partition"] == native(key, list(range(5)), list(range(5)))


async def test_keyless_records_spread_one_per_partition(client, name):
    await create_topic(client, name, 2)
    offsets = await produce(client, name, [{"value": "a"}, {"value": "b"}])
    assert sorted(o["partition"] for o in offsets) == [0, 1]
    offsets = await produce(client, name, [{"value": str(i)} for i in range(100)])
    counts = [sum(1 for o in offsets if o["partition"] == p) for p in (0, 1)]
    assert counts == [50, 50]


async def test_explicit_partition_per_record_and_per_request(client, name):
    await create_topic(client, name, 3)
    offsets = await produce(client, name, [{"value": "x", "partition": 2}, {"value": "y", "partition": 1}])
    assert [o["partition"] for o in offsets] == [2, 1]
    offsets = await produce(client, name, [{"value": "z"}, {"value": "w"}], partition=2)
    assert [(o["partition"], o["offset"]) for o in offsets] == [(2, 1), (2, 2)]


async def test_json_and_string_formats_round_trip(client, name):
    await create_topic(client, name, 1)
    values = [{"a": 1, "b": [True, None, "ü"]}, 42, "text", [1, 2]]
    await produce(client, name, [{"key": {"id": i}, "value": v} for i, v in enumerate(values)], fmt=JSON)
    base = await consumer(client, f"g-{name}", fmt="json")
    await subscribe(client, base, name)
    got = await poll_until(client, base, len(values), fmt=JSON)
    assert [r["value"] for r in got] == values
    assert [r["key"] for r in got] == [{"id": i} for i in range(len(values))]


async def test_headers_and_timestamps_are_stored_and_returned(client, name):
    await create_topic(client, name, 1)
    await produce(
        client,
        name,
        [
            {
                "value": "a",
                "headers": [{"name": "trace", "value": b64("t-1")}, {"name": "empty", "value": None}],
                "timestamp": 1_600_000_000_000,
            },
            {"value": "b", "timestamp": "2021-01-01T00:00:00Z"},
        ],
    )
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, name)
    got = await poll_until(client, base, 2)
    assert got[0]["timestamp"] == 1_600_000_000_000
    assert [(h["name"], unb64(h["value"])) for h in got[0]["headers"]] == [("trace", b"t-1"), ("empty", None)]
    assert got[1]["timestamp"] == 1_609_459_200_000
    assert got[1]["headers"] == []


async def test_null_key_and_value(client, name):
    await create_topic(client, name, 1)
    await produce(client, name, [{"key": None, "value": None}], fmt=BINARY)
    base = await consumer(client, f"g-{name}", fmt="binary")
    await subscribe(client, base, name)
    got = await poll_until(client, base, 1, fmt=BINARY)
    assert got[0]["key"] is None and got[0]["value"] is None


async def test_plain_json_content_type_means_binary(client, name):
    await create_topic(client, name, 1)
    r = await client.post(
        f"/topics/{name}",
        content=json.dumps({"records": [{"value": b64("raw")}]}),
        headers={"Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text
    r = await client.get(f"/topics/{name}/partitions/0/records", params={"offset": 0})
    assert unb64(r.json()["records"][0]["value"]) == b"raw"


async def test_auto_create_on_produce(client, name):
    offsets = await produce(client, name, [{"value": "first"}])
    assert offsets[0]["offset"] == 0
    r = await client.get(f"/topics/{name}")
    assert r.status_code == 200 and len(r.json()["partitions"]) == 1


async def test_concurrent_producers_get_dense_unique_offsets(client, name):
    await create_topic(client, name, 1)

    async def one(i: int) -> list[int]:
        offsets = await produce(client, name, [{"value": f"{i}-{j}"} for j in range(10)])
        return [o["offset"] for o in offsets]

    results = await asyncio.gather(*(one(i) for i in range(20)))
    for offsets in results:
        assert offsets == list(range(offsets[0], offsets[0] + 10))
    assert sorted(o for offs in results for o in offs) == list(range(200))


async def test_stateless_read_by_offset(client, name):
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": f"v{i}"} for i in range(5)])
    r = await client.get(
        f"/topics/{name}/partitions/0/records", params={"offset": 2}, headers={"Accept": STRING}
    )
    assert r.status_code == 200
    body = r.json()
    assert [rec["value"] for rec in body["records"]] == ["v2", "v3", "v4"]
    assert body["next_offset"] == 5 and body["high_watermark"] == 5


async def test_stateless_read_long_polls(client, name):
    await create_topic(client, name, 1)
    reader = asyncio.create_task(
        client.get(
            f"/topics/{name}/partitions/0/records",
            params={"offset": 0, "timeout": 10000},
            headers={"Accept": STRING},
        )
    )
    await asyncio.sleep(0.2)
    assert not reader.done()
    await produce(client, name, [{"value": "late"}])
    r = await asyncio.wait_for(reader, 5)
    assert [rec["value"] for rec in r.json()["records"]] == ["late"]
