"""Share groups over HTTP: share consumers, acknowledgements, administration, and what a careless
or hostile client gets."""

from __future__ import annotations

import asyncio
import base64
import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.adapters.embedded.log import EmbeddedLog
from service.core.models import TopicPartition
from service.core.ports import PartitionData
from tests.conftest import start_gateway
from tests.helpers import V2, cluster_id, consumer, create_topic, produce

JSON = "application/vnd.kafka.json.v2+json"
AVRO = "application/vnd.kafka.avro.v2+json"
STRING = "application/vnd.kafka.string.v2+json"


async def share_consumer(client: httpx.AsyncClient, group: str, **config: Any) -> str:
    body = {"format": "string", "share.auto.offset.reset": "earliest", **config}
    r = await client.post(f"/share-groups/{group}/consumers", json=body, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text
    base = str(r.json()["base_uri"])
    assert "/share-groups/" in base
    return base


async def share_subscribe(client: httpx.AsyncClient, base: str, *topics: str) -> None:
    r = await client.post(f"{base}/subscription", json={"topics": list(topics)}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text


async def share_poll(
    client: httpx.AsyncClient, base: str, timeout: int = 300, **params: Any
) -> list[dict[str, Any]]:
    r = await client.get(f"{base}/records", params={"timeout": timeout, **params}, headers={"Accept": STRING})
    assert r.status_code == 200, r.text
    return list(r.json())


async def settle(client: httpx.AsyncClient, base: str, *acks: dict[str, Any]) -> list[dict[str, Any]]:
    r = await client.post(
        f"{base}/acknowledgements", json={"acknowledgements": list(acks)}, headers={"Content-Type": V2}
    )
    assert r.status_code == 200, r.text
    return list(r.json()["refused"])


def ack(records: list[dict[str, Any]], kind: str, **extra: Any) -> list[dict[str, Any]]:
    """One acknowledgement per partition of ``records``."""
    by: dict[tuple[str, int], list[int]] = {}
    for r in records:
        by.setdefault((r["topic"], r["partition"]), []).append(r["offset"])
    return [{"topic": t, "partition": p, "offsets": o, "type": kind, **extra} for (t, p), o in by.items()]


@pytest.mark.parametrize(
    ("log_backend", "coordinator", "sessions"),
    [("embedded", "embedded", "embedded"), ("kafka", "zookeeper", "redis")],
)
async def test_consumers_split_the_records_and_each_is_done_once(
    client: httpx.AsyncClient, name: str
) -> None:
    await create_topic(client, name, 2)
    await produce(client, name, [{"value": f"job-{i}", "partition": i % 2} for i in range(40)])
    bases = [await share_consumer(client, name) for _ in range(3)]
    for base in bases:
        await share_subscribe(client, base, name)
    seen: Counter[tuple[int, int]] = Counter()

    async def work(base: str) -> None:
        idle = 0
        while idle < 3:
            got = await share_poll(client, base, timeout=200, max_records=4)
            if not got:
                idle += 1
                continue
            assert {r["delivery_count"] for r in got} == {1}
            seen.update((r["partition"], r["offset"]) for r in got)
            assert await settle(client, base, *ack(got, "accept")) == []

    await asyncio.gather(*(work(b) for b in bases))
    assert sorted(seen) == [(p, o) for p in (0, 1) for o in range(20)] and set(seen.values()) == {1}
    cid = await cluster_id(client)
    r = await client.get(f"/v3/clusters/{cid}/share-groups/{name}")
    assert r.status_code == 200, r.text
    group = r.json()
    assert group["state"] == "Stable" and len(group["consumers"]) == 3 and group["lag"] == 0
    assert [(p["partition_id"], p["start_offset"], p["acquired"]) for p in group["partitions"]] == [
        (0, 20, 0),
        (1, 20, 0),
    ]
    metrics = (await client.get("/metrics")).text  # every record handed out counted, once
    assert f'brokergate_consumed_records_total{{topic="{name}"}} 40.0' in metrics


async def test_release_reject_renew_and_what_is_not_held(client: httpx.AsyncClient, name: str) -> None:
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": f"v{i}"} for i in range(4)])
    a, b = await share_consumer(client, name), await share_consumer(client, name)
    await share_subscribe(client, a, name)
    await share_subscribe(client, b, name)
    got = await share_poll(client, a, max_records=4)
    assert [(r["offset"], r["value"], r["delivery_count"]) for r in got] == [
        (i, f"v{i}", 1) for i in range(4)
    ]
    assert await share_poll(client, b, timeout=0) == []  # all of them are a's
    refused = await settle(
        client,
        a,
        {"topic": name, "partition": 0, "offsets": [0], "type": "release", "error": "try later"},
        {"topic": name, "partition": 0, "offsets": [1], "type": "reject"},
        {"topic": name, "partition": 0, "first_offset": 2, "last_offset": 3, "type": "renew"},
    )
    assert refused == []
    again = await share_poll(client, b)  # released: b's now, a second delivery
    assert [(r["offset"], r["delivery_count"]) for r in again] == [(0, 2)]
    # b cannot settle a's records, nor a the records it gave away or settled
    refused = await settle(client, b, {"topic": name, "partition": 0, "offsets": [2, 3], "type": "accept"})
    assert [(r["offset"], "not acquired by this consumer" in r["message"]) for r in refused] == [
        (2, True),
        (3, True),
    ]
    refused = await settle(client, a, {"topic": name, "partition": 0, "offsets": [0, 1, 2], "type": "accept"})
    assert [r["offset"] for r in refused] == [0, 1]
    # piggy-backed: settle and poll in one round trip; a refusal is counted in a header
    await produce(client, name, [{"value": "v4"}])
    r = await client.post(
        f"{b}/records",
        params={"timeout": 300},
        json={"acknowledgements": [{"topic": name, "partition": 0, "offsets": [0, 3], "type": "ACCEPT"}]},
        headers={"Content-Type": V2, "Accept": STRING},
    )
    assert r.status_code == 200, r.text
    assert [x["offset"] for x in r.json()] == [4] and r.headers["Brokergate-Acknowledgements-Refused"] == "1"


async def test_a_deleted_consumer_gives_back_what_it_held(client: httpx.AsyncClient, name: str) -> None:
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": "v"}])
    a, b = await share_consumer(client, name), await share_consumer(client, name)
    for base in (a, b):
        await share_subscribe(client, base, name)
    assert len(await share_poll(client, a)) == 1
    assert (await client.delete(a)).status_code == 204
    assert [(r["offset"], r["delivery_count"]) for r in await share_poll(client, b)] == [(0, 2)]
    assert (await client.get(f"{a}/records", params={"timeout": 0})).status_code == 404


async def test_a_group_is_a_consumer_group_or_a_share_group(client: httpx.AsyncClient, name: str) -> None:
    await share_consumer(client, f"{name}-s")
    r = await client.post(f"/consumers/{name}-s", json={}, headers={"Content-Type": V2})
    assert r.status_code == 409 and r.json()["error_code"] == 40903
    await consumer(client, f"{name}-c")
    r = await client.post(f"/share-groups/{name}-c/consumers", json={}, headers={"Content-Type": V2})
    assert r.status_code == 409 and r.json()["error_code"] == 40903
    # nor is one reached through the other's paths
    base = await share_consumer(client, f"{name}-s", name="one")
    r = await client.get(
        base.replace(f"/share-groups/{name}-s/consumers/", f"/consumers/{name}-s/instances/") + "/records"
    )
    assert r.status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"acknowledgements": [{"topic": "t", "partition": 0, "type": "accept"}]},  # no offsets
        {
            "acknowledgements": [
                {
                    "topic": "t",
                    "partition": 0,
                    "offsets": [1],
                    "first_offset": 1,
                    "last_offset": 2,
                    "type": "accept",
                }
            ]
        },
        {
            "acknowledgements": [
                {"topic": "t", "partition": 0, "first_offset": 5, "last_offset": 2, "type": "accept"}
            ]
        },
        {
            "acknowledgements": [
                {"topic": "t", "partition": 0, "first_offset": 0, "last_offset": 10**12, "type": "accept"}
            ]
        },
        {"acknowledgements": [{"topic": "t", "partition": 0, "offsets": [-1], "type": "accept"}]},
        {"acknowledgements": [{"topic": "t", "partition": -1, "offsets": [1], "type": "accept"}]},
        {"acknowledgements": [{"topic": "t", "partition": 0, "offsets": [1], "type": "maybe"}]},
        {
            "acknowledgements": [
                {"topic": "t", "partition": 0, "offsets": [1], "type": "release", "error": "x" * 5000}
            ]
        },
        {"acknowledgements": [{"topic": "../etc", "partition": 0, "offsets": [1], "type": "accept"}]},
        {
            "acknowledgements": [
                {"topic": "t", "partition": p, "first_offset": 0, "last_offset": 9000, "type": "accept"}
                for p in range(2)
            ]
        },
        {"acknowledgements": "all"},
    ],
)
async def test_bad_acknowledgements_get_a_4xx_and_change_nothing(
    client: httpx.AsyncClient, name: str, body: dict[str, Any]
) -> None:
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": "v"}])
    base = await share_consumer(client, name)
    await share_subscribe(client, base, name)
    assert len(await share_poll(client, base)) == 1
    for path in ("/acknowledgements", "/records"):
        r = await client.post(base + path, json=body, headers={"Content-Type": V2})
        assert 400 <= r.status_code < 500 and set(r.json()) == {"error_code", "message"}, r.text
    cid = await cluster_id(client)
    [partition] = (await client.get(f"/v3/clusters/{cid}/share-groups/{name}")).json()["partitions"]
    assert (partition["start_offset"], partition["acquired"]) == (0, 1)


async def test_bad_consumers_and_subscriptions(client: httpx.AsyncClient, name: str) -> None:
    for body in (
        {"format": "xml"},
        {"share.auto.offset.reset": "none"},
        {"consumer.instance.timeout.ms": 10},
    ):
        r = await client.post(f"/share-groups/{name}/consumers", json=body, headers={"Content-Type": V2})
        assert 400 <= r.status_code < 500, r.text
    base = await share_consumer(client, name)
    for body in ({"topics": []}, {"topics": ["a/b"]}, {"topic_pattern": ".*"}, {"topics": ["x"] * 1001}):
        r = await client.post(f"{base}/subscription", json=body, headers={"Content-Type": V2})
        assert 400 <= r.status_code < 500, r.text
    r = await client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": JSON})
    assert r.status_code == 406  # a string consumer


async def test_describe_reset_and_delete(client: httpx.AsyncClient, name: str) -> None:
    cid = await cluster_id(client)
    url = f"/v3/clusters/{cid}/share-groups"
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": f"v{i}"} for i in range(5)])
    base = await share_consumer(client, name)
    await share_subscribe(client, base, name)
    got = await share_poll(client, base, max_records=2)
    [listed] = [g for g in (await client.get(url)).json()["data"] if g["share_group_id"] == name]
    assert listed["lag"] == 5 and listed["partitions"][0]["acquired"] == 2
    r = await client.post(f"{url}/{name}/reset", json={"to": "latest"})
    assert r.status_code == 409  # it has a consumer
    assert (await client.delete(f"{url}/{name}")).status_code == 409
    await settle(client, base, *ack(got, "accept"))
    assert (await client.delete(base)).status_code == 204
    r = await client.post(
        f"{url}/{name}/reset", json={"offsets": [{"topic": name, "partition": 0, "offset": 3}]}
    )
    assert r.status_code == 200, r.text
    assert [(p["start_offset"], p["lag"]) for p in r.json()["partitions"]] == [(3, 2)]
    r = await client.post(f"{url}/{name}/reset", json={"to": "latest"})
    assert [(p["start_offset"], p["lag"]) for p in r.json()["partitions"]] == [(5, 0)]
    for bad in (
        {"to": "latest", "offsets": []},
        {"offsets": [{"topic": name, "partition": 7, "offset": 0}]},
        {"to": "soon"},
    ):
        r = await client.post(f"{url}/{name}/reset", json=bad)
        assert 400 <= r.status_code < 500, r.text
    assert (await client.delete(f"{url}/{name}")).status_code == 204
    assert (await client.get(f"{url}/{name}")).status_code == 404


def share_writes(data_dir: Path) -> list[bytes]:
    """The payloads of the writes in the embedded coordinator's share journals, in order."""
    payloads: list[bytes] = []
    for path in sorted((data_dir / "coordinator").glob("shares-*.journal")):
        buf, pos = path.read_bytes(), 5  # past the journal's header
        while pos + 8 <= len(buf):
            length = int.from_bytes(buf[pos : pos + 4], "big")
            payloads.append(buf[pos + 8 : pos + 8 + length])
            pos += 8 + length
    return payloads


async def test_a_piggy_backed_poll_settles_and_acquires_in_one_durable_write(
    tmp_path: Path, name: str
) -> None:
    gw = await start_gateway(tmp_path / "data")
    try:
        client = gw.client
        await create_topic(client, name, 2)
        await produce(client, name, [{"value": f"v{i}", "partition": i % 2} for i in range(4)])
        base = await share_consumer(client, name)
        await share_subscribe(client, base, name)
        got = await share_poll(client, base, max_records=4)
        assert len(got) == 4
        before = len(share_writes(tmp_path / "data"))
        await produce(client, name, [{"value": f"v{i}", "partition": i % 2} for i in range(4, 8)])
        r = await client.post(
            f"{base}/records",
            params={"timeout": 300, "max_records": 4},
            json={"acknowledgements": ack(got, "accept")},
            headers={"Content-Type": V2, "Accept": STRING},
        )
        assert r.status_code == 200, r.text
        assert sorted(x["value"] for x in r.json()) == [f"v{i}" for i in range(4, 8)]
        assert "Brokergate-Acknowledgements-Refused" not in r.headers
        # the settlements of both partitions and the acquisition: one write, one fdatasync
        assert len(share_writes(tmp_path / "data")) == before + 1
        refused = await settle(client, base, *ack(got, "accept"))  # settled already
        assert [(x["partition"], x["offset"]) for x in refused] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_records_out_of_attempts_go_to_the_dead_letter_topic(tmp_path: Path, name: str) -> None:
    gw = await start_gateway(
        tmp_path / "data", share_dead_letter_topic="{group}.dlq", share_delivery_attempt_limit=2
    )
    try:
        client = gw.client
        await create_topic(client, name, 1)
        await produce(client, name, [{"value": "poison", "headers": [{"name": "h", "value": "aA=="}]}])
        base = await share_consumer(client, name)
        await share_subscribe(client, base, name)
        for attempt in (1, 2):
            [record] = await share_poll(client, base)
            assert record["delivery_count"] == attempt
            await settle(client, base, *ack([record], "release", error=f"failed {attempt}"))
        assert await share_poll(client, base, timeout=100) == []
        r = await client.get(
            f"/topics/{name}.dlq/partitions/0/records", params={"offset": 0}, headers={"Accept": STRING}
        )
        assert r.status_code == 200, r.text
        [copy] = r.json()["records"] if isinstance(r.json(), dict) else r.json()
        assert copy["value"] == "poison"
        headers = {h["name"]: h["value"] for h in copy["headers"]}
        assert headers["dlq.offset"] and headers["dlq.delivery.count"] and "h" in headers
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_schema_format_is_decoded_and_a_record_that_does_not_decode_is_released_with_why(
    tmp_path: Path, name: str
) -> None:
    """Avro values come as JSON; a value that is not Avro is not handed out: released with the
    reason each time, until it is out of attempts and copied to the dead-letter topic with it."""
    gw = await start_gateway(
        tmp_path / "data", share_dead_letter_topic="{topic}.dlq", share_delivery_attempt_limit=2
    )
    try:
        client = gw.client
        await create_topic(client, name, 1)
        schema = json.dumps({"type": "record", "name": "Job", "fields": [{"name": "n", "type": "int"}]})
        r = await client.post(
            f"/topics/{name}",
            json={"value_schema": schema, "records": [{"value": {"n": 1}}]},
            headers={"Content-Type": AVRO},
        )
        assert r.status_code == 200, r.text
        await produce(client, name, [{"value": "not avro"}])
        r = await client.post(
            f"/topics/{name}",
            json={"value_schema": schema, "records": [{"value": {"n": 3}}]},
            headers={"Content-Type": AVRO},
        )
        assert r.status_code == 200, r.text
        base = await share_consumer(client, name, format="avro")
        await share_subscribe(client, base, name)
        values = []
        for _ in range(4):
            r = await client.get(f"{base}/records", params={"timeout": 200}, headers={"Accept": AVRO})
            assert r.status_code == 200, r.text
            values += [(x["offset"], x["value"]) for x in r.json()]
            await settle(client, base, *ack(r.json(), "accept")) if r.json() else None
        assert values == [(0, {"n": 1}), (2, {"n": 3})]
        r = await client.get(
            f"/topics/{name}.dlq/partitions/0/records", params={"offset": 0}, headers={"Accept": STRING}
        )
        [copy] = r.json()["records"]
        headers = {h["name"]: base64.b64decode(h["value"]) for h in copy["headers"]}
        assert (
            copy["value"] == "not avro"
            and headers["dlq.offset"] == b"1"
            and b"cannot be read as AVRO" in headers["dlq.error"]
        )
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_subscription_over_more_partitions_than_a_group_may_read_is_refused(
    tmp_path: Path, name: str
) -> None:
    """Every poll reads the state of each partition it may take from: their number is bounded."""
    gw = await start_gateway(tmp_path / "data", share_max_partitions=3)
    try:
        client = gw.client
        for topic in (f"{name}-a", f"{name}-b"):
            await create_topic(client, topic, 2)
        base = await share_consumer(client, name)
        await share_subscribe(client, base, f"{name}-a")
        assert await share_poll(client, base, timeout=0) == []
        await share_subscribe(client, base, f"{name}-a", f"{name}-b")
        r = await client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": STRING})
        assert r.status_code == 409 and "more than 3 partitions" in r.json()["message"], r.text
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_poll_reads_from_the_log_only_the_records_it_can_hand_out(
    client: httpx.AsyncClient, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop the docs show (acknowledgements in the next poll's body, the gateway's byte
    budget) reads what it hands out, not a megabyte of the log per poll; with released records
    in the window, that window and the new records after it."""
    read: list[int] = []  # records each fetch of the log returned
    fetch = EmbeddedLog.fetch

    async def counted(
        self: EmbeddedLog, positions: Any, **options: Any
    ) -> dict[TopicPartition, PartitionData]:
        got = await fetch(self, positions, **options)
        read.append(sum(len(part.records) for part in got.values()))
        return got

    monkeypatch.setattr(EmbeddedLog, "fetch", counted)
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": f"v{i}"} for i in range(2000)])
    base = await share_consumer(client, name)
    await share_subscribe(client, base, name)

    async def poll(*acks: dict[str, Any]) -> list[dict[str, Any]]:
        read.clear()
        r = await client.post(
            f"{base}/records",
            params={"timeout": 100, "max_records": 50},
            json={"acknowledgements": list(acks)},
            headers={"Content-Type": V2, "Accept": STRING},
        )
        assert r.status_code == 200, r.text
        return list(r.json())

    got = await poll()
    for n in range(1, 4):
        assert [r["offset"] for r in got] == list(range(50 * (n - 1), 50 * n)) and sum(read) <= 50, read
        got = await poll(*ack(got, "accept"))
    # Ten records in the middle of the last poll's go back; the next poll reads the window from the
    # first of them (30 records) and the new ones after it, to hand out the ten and 40 new ones.
    released = [r for r in got if 170 <= r["offset"] < 180]
    assert len(got) == 50 and len(released) == 10
    again = await poll(*ack(released, "release"))
    assert [(r["offset"], r["delivery_count"]) for r in again] == [
        *((o, 2) for o in range(170, 180)),
        *((o, 1) for o in range(200, 240)),
    ]
    assert sum(read) <= 80, read
