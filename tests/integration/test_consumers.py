"""Consumer instances through the v2 API: lifecycle, subscription, assignment, poll, commit, seek."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.conftest import backend_settings, running_gateway
from tests.helpers import (
    BINARY,
    JSON,
    STRING,
    V2,
    assignment,
    b64,
    commit,
    consumer,
    create_topic,
    poll,
    poll_until,
    produce,
    subscribe,
)

# In-process groups and sessions, and the stateless deployment's ZooKeeper and Redis.
pytestmark = pytest.mark.parametrize(
    ("coordinator", "sessions"), [("embedded", "embedded"), ("zookeeper", "redis")]
)


async def test_create_consumer_returns_instance_and_base_uri(client, gateway, name):
    r = await client.post(
        f"/consumers/{name}",
        json={
            "name": "my_consumer",
            "format": "binary",
            "auto.offset.reset": "earliest",
            "auto.commit.enable": "false",
        },
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200
    assert r.json() == {
        "instance_id": "my_consumer",
        "base_uri": f"{gateway.url}/consumers/{name}/instances/my_consumer",
    }
    again = await client.post(
        f"/consumers/{name}", json={"name": "my_consumer"}, headers={"Content-Type": V2}
    )
    assert again.status_code == 409 and again.json()["error_code"] == 40902


async def test_generated_instance_id_and_empty_body(client, name):
    r = await client.post(f"/consumers/{name}", headers={"Content-Type": V2})
    assert r.status_code == 200
    assert r.json()["instance_id"].startswith("rest-consumer-")


async def test_delete_instance(client, name):
    base = await consumer(client, name)
    assert (await client.delete(base)).status_code == 204
    r = await client.delete(base)
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    r = await client.get(f"{base}/records", headers={"Accept": BINARY})
    assert r.status_code == 404 and r.json()["error_code"] == 40403


async def test_subscription_get_set_delete(client, name):
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}")
    assert (await client.get(f"{base}/subscription")).json() == {"topics": []}
    await subscribe(client, base, name)
    assert (await client.get(f"{base}/subscription")).json() == {"topics": [name]}
    assert await assignment(client, base) == [(name, 0)]
    assert (await client.delete(f"{base}/subscription")).status_code == 204
    assert (await client.get(f"{base}/subscription")).json() == {"topics": []}
    assert await assignment(client, base) == []


async def test_pattern_subscription_picks_up_new_topics(client, name):
    await create_topic(client, f"{name}-a", 1)
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, pattern=f"{name}-.*")
    assert await assignment(client, base) == [(f"{name}-a", 0)]
    await produce(client, f"{name}-b", [{"value": "new topic"}])  # auto-created
    got = await poll_until(client, base, 1)
    assert [(r["topic"], r["value"]) for r in got] == [(f"{name}-b", "new topic")]
    sub = (await client.get(f"{base}/subscription")).json()
    assert sub["topics"] == [f"{name}-a", f"{name}-b"] and sub["topic_pattern"] == f"{name}-.*"


async def test_manual_assignment_and_exclusivity(client, name):
    await create_topic(client, name, 3)
    await produce(client, name, [{"value": "p1", "partition": 1}, {"value": "p2", "partition": 2}])
    base = await consumer(client, f"g-{name}")
    r = await client.post(
        f"{base}/assignments",
        json={"partitions": [{"topic": name, "partition": 2}]},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 204
    assert await assignment(client, base) == [(name, 2)]
    got = await poll_until(client, base, 1)
    assert [(r["partition"], r["value"]) for r in got] == [(2, "p2")]
    r = await client.post(f"{base}/subscription", json={"topics": [name]}, headers={"Content-Type": V2})
    assert r.status_code == 409 and r.json()["error_code"] == 40903


async def test_poll_is_a_real_long_poll(client, name):
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}", reset="latest")
    await subscribe(client, base, name)
    assert await poll(client, base, timeout=100) == []
    waiter = asyncio.create_task(poll(client, base, timeout=20000))
    await asyncio.sleep(0.3)
    assert not waiter.done()
    started = time.monotonic()
    await produce(client, name, [{"value": "wake"}])
    got = await asyncio.wait_for(waiter, 10)
    assert [r["value"] for r in got] == ["wake"]
    assert time.monotonic() - started < 10  # returned on arrival, long before the 20 s timeout


async def test_empty_poll_waits_for_timeout(client, name):
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, name)
    started = time.monotonic()
    assert await poll(client, base, timeout=300) == []
    assert time.monotonic() - started >= 0.25


async def test_max_bytes_limits_and_never_stalls(client, name):
    await create_topic(client, name, 1)
    big = "x" * 5000
    await produce(client, name, [{"value": big}, {"value": "small-1"}, {"value": "small-2"}])
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, name)
    first = await poll(client, base, max_bytes=100)
    assert [r["value"] for r in first] == [big]  # bigger than max_bytes, still delivered alone
    rest = await poll_until(client, base, 2)
    assert [r["value"] for r in rest] == ["small-1", "small-2"]


async def test_format_mismatch_is_406(client, name):
    base = await consumer(client, name, fmt="binary")
    r = await client.get(f"{base}/records", headers={"Accept": JSON})
    assert r.status_code == 406 and r.json()["error_code"] == 40601


async def test_binary_consumer_gets_base64(client, name):
    await create_topic(client, name, 1)
    await produce(client, name, [{"key": b64(b"\x00\x01"), "value": b64(b"\xff")}], fmt=BINARY)
    base = await consumer(client, f"g-{name}", fmt="binary")
    await subscribe(client, base, name)
    got = await poll_until(client, base, 1, fmt=BINARY)
    assert got == [
        {
            "topic": name,
            "key": b64(b"\x00\x01"),
            "value": b64(b"\xff"),
            "partition": 0,
            "offset": 0,
            "timestamp": got[0]["timestamp"],
            "headers": [],
        }
    ]


async def test_commit_explicit_stores_offset_plus_one_and_get_offsets(client, name):
    await create_topic(client, name, 2)
    await produce(client, name, [{"value": str(i), "partition": i % 2} for i in range(6)])
    group = f"g-{name}"
    base = await consumer(client, group)
    await subscribe(client, base, name)
    await poll_until(client, base, 6)
    done = await commit(client, base, [{"topic": name, "partition": 0, "offset": 1}])
    assert done == [{"topic": name, "partition": 0, "offset": 2}]
    r = await client.request(
        "GET",
        f"{base}/offsets",
        json={"partitions": [{"topic": name, "partition": 0}, {"topic": name, "partition": 1}]},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200
    assert r.json() == {
        "offsets": [
            {"topic": name, "partition": 0, "offset": 2, "metadata": ""},
            {"topic": name, "partition": 1, "offset": -1, "metadata": ""},
        ]
    }


async def committed_in_query(client, name):
    """A consumer of ``name`` (3 partitions of 2 records each) that committed 0:2 and 2:1."""
    await create_topic(client, name, 3)
    await produce(client, name, [{"value": str(i), "partition": i % 3} for i in range(6)])
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, name)
    await poll_until(client, base, 6)
    await commit(client, base, [{"topic": name, "partition": p, "offset": o} for p, o in ((0, 1), (2, 0))])
    return base


async def test_committed_offsets_of_partitions_named_in_the_query(client, name):
    # fetch() sends no body with a GET: the query names the partitions, as the body would.
    base = await committed_in_query(client, name)
    body = await client.request(
        "GET",
        f"{base}/offsets",
        json={"partitions": [{"topic": name, "partition": 2}, {"topic": name, "partition": 1}]},
        headers={"Content-Type": V2},
    )
    assert body.status_code == 200, body.text
    expected = {
        "offsets": [
            {"topic": name, "partition": 2, "offset": 1, "metadata": ""},
            {"topic": name, "partition": 1, "offset": -1, "metadata": ""},
        ]
    }
    assert body.json() == expected
    for query in (
        f"partitions={name}:2,{name}:1",  # comma-separated
        f"partitions={name}:2&partitions={name}:1",  # repeated, as openapi-fetch and httpx send a list
        f"partitions={name}:2&partitions={name}:1,{name}:2",  # each partition once, in order
    ):
        r = await client.get(f"{base}/offsets?{query}")
        assert r.status_code == 200, (query, r.text)
        assert r.headers["content-type"] == V2
        assert r.json() == expected, query
    r = await client.get(f"{base}/offsets", params={"partitions": [f"{name}:0"]})
    assert r.json()["offsets"] == [{"topic": name, "partition": 0, "offset": 2, "metadata": ""}]


async def test_malformed_partitions_in_the_query_are_refused(client, name):
    base = await committed_in_query(client, name)
    for value in (
        "",
        name,
        f"{name}:",
        f":{name}",
        ":0",
        f"{name}:-1",
        f"{name}:x",
        f"{name}:1.0",
        f"{name}:2147483648",
        f"{name}:\u0661",  # an Arabic-Indic one: a digit to str.isdigit, not to Kafka
        f"{name}:0,",
        f"{name}:0,,{name}:1",
        f"{name}:{'9' * 5000}",
    ):
        r = await client.get(f"{base}/offsets", params={"partitions": value})
        assert r.status_code == 422, (value, r.text)
        assert r.json()["error_code"] == 42206, value
        assert "is not topic:partition" in r.json()["message"], value
    both = await client.request(
        "GET",
        f"{base}/offsets?partitions={name}:0",
        json={"partitions": [{"topic": name, "partition": 0}]},
        headers={"Content-Type": V2},
    )
    assert both.status_code == 422 and both.json()["error_code"] == 42206, both.text
    assert both.json()["message"] == "Name the partitions in the body or in the query, not both."
    # an unknown topic is the body form's answer, and an instance not there is decided first
    unknown = await client.get(f"{base}/offsets", params={"partitions": "no-such-topic:0"})
    body = await client.request(
        "GET",
        f"{base}/offsets",
        json={"partitions": [{"topic": "no-such-topic", "partition": 0}]},
        headers={"Content-Type": V2},
    )
    assert (unknown.status_code, unknown.json()) == (body.status_code, body.json())
    gone = await client.get(f"{base}-gone/offsets", params={"partitions": "x:"})
    assert gone.status_code == 404 and gone.json()["error_code"] == 40403, gone.text


async def test_partitions_in_the_query_are_bounded_as_a_body_is(
    request, tmp_path, log_backend, coordinator, sessions, name
):
    settings = backend_settings(request, log_backend, coordinator, sessions)
    async with running_gateway(tmp_path / "data", max_request_bytes=1024, **settings) as gw:
        base = await consumer(gw.client, f"g-{name}")
        many = ",".join(f"{name}:{p}" for p in range(200))
        assert len(many) > 1024
        r = await gw.client.get(f"{base}/offsets", params={"partitions": many})
        assert r.status_code == 413, r.text
        assert r.json()["error_code"] == 41301
        body = await gw.client.request(
            "GET",
            f"{base}/offsets",
            json={"partitions": [{"topic": name, "partition": p} for p in range(200)]},
            headers={"Content-Type": V2},
        )
        assert (body.status_code, body.json()["error_code"]) == (413, 41301)
        await create_topic(gw.client, name, 1)
        few = await gw.client.get(f"{base}/offsets", params={"partitions": f"{name}:0"})
        assert few.json() == {"offsets": [{"topic": name, "partition": 0, "offset": -1, "metadata": ""}]}


async def test_empty_commit_commits_everything_fetched(client, name):
    await create_topic(client, name, 2)
    await produce(client, name, [{"value": str(i), "partition": i % 2} for i in range(6)])
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, name)
    await poll_until(client, base, 6)
    done = await commit(client, base)
    assert sorted((o["partition"], o["offset"]) for o in done) == [(0, 3), (1, 3)]
    r = await client.get(f"{base}/offsets")
    assert sorted((o["partition"], o["offset"]) for o in r.json()["offsets"]) == [(0, 3), (1, 3)]


async def test_auto_commit(client, name):
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": "a"}, {"value": "b"}])
    group = f"g-{name}"
    base = await consumer(client, group, **{"auto.commit.enable": "true"})
    await subscribe(client, base, name)
    await poll_until(client, base, 2)
    r = await client.get(f"{base}/offsets")
    assert r.json()["offsets"][0]["offset"] == 2


async def seekable(client, name):
    """A topic of 5 records with timestamps 1000..5000 and a consumer that has read them all."""
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": f"v{i}", "timestamp": 1000 * (i + 1)} for i in range(5)])
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, name)
    assert len(await poll_until(client, base, 5)) == 5
    return base, {"topic": name, "partition": 0}


async def test_seek_to_offset_and_beginning(client, name):
    base, tp = await seekable(client, name)
    headers = {"Content-Type": V2}
    r = await client.post(f"{base}/positions", json={"offsets": [{**tp, "offset": 3}]}, headers=headers)
    assert r.status_code == 204
    assert [r["value"] for r in await poll_until(client, base, 2)] == ["v3", "v4"]
    r = await client.post(f"{base}/positions/beginning", json={"partitions": [tp]}, headers=headers)
    assert r.status_code == 204
    assert [r["value"] for r in await poll_until(client, base, 5)] == [f"v{i}" for i in range(5)]


async def test_seek_to_timestamp(client, name):
    base, tp = await seekable(client, name)
    headers = {"Content-Type": V2}
    r = await client.post(
        f"{base}/positions", json={"timestamps": [{**tp, "timestamp": 2500}]}, headers=headers
    )
    assert r.status_code == 204
    assert [r["value"] for r in await poll_until(client, base, 3)] == ["v2", "v3", "v4"]
    r = await client.post(
        f"{base}/positions",
        json={"timestamps": [{**tp, "timestamp": "1970-01-01T00:00:04Z"}]},
        headers=headers,
    )
    assert r.status_code == 204
    assert [r["value"] for r in await poll_until(client, base, 2)] == ["v3", "v4"]
    # before 1970 (Kafka would read -1 as "latest"), or past what a log stores: refused
    for bad in ("1969-12-31T23:59:59Z", 2**63, -5, "2020-01-01T00:00:00"):
        r = await client.post(
            f"{base}/positions", json={"timestamps": [{**tp, "timestamp": bad}]}, headers=headers
        )
        assert r.status_code == 422 and r.json()["error_code"] == 42206, (bad, r.text)


async def test_seek_to_end(client, name):
    base, tp = await seekable(client, name)
    headers = {"Content-Type": V2}
    r = await client.post(f"{base}/positions/beginning", json={"partitions": [tp]}, headers=headers)
    assert r.status_code == 204
    r = await client.post(f"{base}/positions/end", json={"partitions": [tp]}, headers=headers)
    assert r.status_code == 204
    assert await poll(client, base, timeout=100) == []


async def test_seek_unassigned_partition_is_illegal_state(client, name):
    await create_topic(client, name, 2)
    base = await consumer(client, f"g-{name}")
    r = await client.post(
        f"{base}/positions",
        json={"offsets": [{"topic": name, "partition": 1, "offset": 0}]},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 409 and r.json()["error_code"] == 40903


async def test_latest_reset_does_not_skip_records_between_polls(client, name):
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": "old"}])
    base = await consumer(client, f"g-{name}", reset="latest")
    await subscribe(client, base, name)
    assert await poll(client, base, timeout=50) == []
    await produce(client, name, [{"value": "new"}])
    assert [r["value"] for r in await poll_until(client, base, 1)] == ["new"]


async def test_reset_none_without_commit_is_illegal_state(client, name):
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}", reset="none")
    await subscribe(client, base, name)
    r = await client.get(f"{base}/records", params={"timeout": 50}, headers={"Accept": STRING})
    assert r.status_code == 409 and r.json()["error_code"] == 40903


async def test_instance_expires_after_timeout(client, name):
    # Renewals half a timeout apart: a busy machine may add a second before one lands.
    base = await consumer(client, name, **{"consumer.instance.timeout.ms": 2000})
    await asyncio.sleep(1.0)
    assert (await client.get(f"{base}/subscription")).status_code == 200  # renews the lease
    await asyncio.sleep(1.0)
    assert (await client.get(f"{base}/subscription")).status_code == 200
    await asyncio.sleep(2.5)
    r = await client.get(f"{base}/subscription")
    assert r.status_code == 404 and r.json()["error_code"] == 40403
    # the answer names what was asked for, so a newcomer sees which instance is gone
    instance = base.rsplit("/", 1)[1]
    assert r.json()["message"] == f"Consumer instance not found: group '{name}', instance '{instance}'."


async def test_the_subscription_names_the_topics_that_do_not_exist(client, name):
    """Subscribing to a topic that is not there is taken, as Kafka's consumer takes it (a poll
    answers []), but the subscription's GET names it, so a typo shows; once created it is not named."""
    await create_topic(client, name, 1)
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, name, f"{name}-typo")
    assert await poll(client, base, timeout=100) == []
    r = await client.get(f"{base}/subscription")
    assert r.json() == {"topics": [name, f"{name}-typo"], "missing_topics": [f"{name}-typo"]}, r.text
    await create_topic(client, f"{name}-typo", 1)
    assert (await client.get(f"{base}/subscription")).json() == {"topics": [name, f"{name}-typo"]}
