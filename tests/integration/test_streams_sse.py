"""Server-Sent Events: a consumer instance's records, and a partition's, pushed as they arrive.

What a client of ``EventSource`` (or ``curl -N``) sees: records produced after the stream opened,
a cursor in every ``id:`` that a reconnect resumes from exactly, heartbeats while idle, a
rebalance event when the group changes, an ``end`` event when the instance goes, the instance
kept alive by its stream and left in place when the stream closes; the stateless stream with
``?format=``; the bound on open streams; quotas, authentication and ACLs (of the group and of
its topics, with the bindings of the moment) as for polls.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from service.security.users import add_user
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import JSON, STRING, consumer, create_topic, produce, subscribe
from tests.stream_client import EVENT_STREAM, events


async def _instance(client: httpx.AsyncClient, topic: str, *, fmt: str = "string", **config: object) -> str:
    base = await consumer(client, f"g-{topic}", fmt=fmt, **config)
    await subscribe(client, base, topic)
    return base


@pytest.mark.parametrize("log_backend", ["embedded", "kafka"])
async def test_a_stream_sends_what_is_produced_after_it_opened(client: httpx.AsyncClient, name: str) -> None:
    await create_topic(client, name, 2)
    base = await _instance(client, name, fmt="json", reset="latest")
    async with events(client, f"{base}/records") as stream:
        await produce(client, name, [{"value": {"n": i}, "partition": i % 2} for i in range(6)], fmt=JSON)
        got = await stream.records(6)
        assert sorted(r["value"]["n"] for r in got) == list(range(6))
        assert all(r["topic"] == name and "timestamp" in r and r["headers"] == [] for r in got)
        # The cursor is every owned partition's next offset.
        assert stream.last_event_id == f"{name}:0:3,{name}:1:3"


async def test_last_event_id_resumes_exactly_where_the_client_stood(
    client: httpx.AsyncClient, name: str
) -> None:
    await create_topic(client, name, 1)
    base = await _instance(client, name, reset="earliest")
    await produce(client, name, [{"value": f"v{i}"} for i in range(3)])
    async with events(client, f"{base}/records") as stream:
        assert [r["value"] for r in await stream.records(3)] == ["v0", "v1", "v2"]
        processed = stream.last_event_id
        assert processed == f"{name}:0:3"
        await produce(client, name, [{"value": f"v{i}"} for i in range(3, 5)])
        assert len(await stream.records(2)) == 2  # sent, but lost before the client processed it
    await produce(client, name, [{"value": "v5"}])

    # The reconnect says where the client stood: the lost batch comes again, nothing twice.
    async with events(client, f"{base}/records", last_event_id=processed) as stream:
        assert [r["value"] for r in await stream.records(3)] == ["v3", "v4", "v5"]
        assert stream.last_event_id == f"{name}:0:6"
    # The cursor of a stream's start (its id alone, before any event) resumes from there too.
    async with events(client, f"{base}/records", last_event_id=f"{name}:0:1") as stream:
        assert [r["value"] for r in await stream.records(5)] == ["v1", "v2", "v3", "v4", "v5"]


async def test_a_stream_starts_with_its_cursor_so_even_a_lost_first_batch_is_sent_again(
    client: httpx.AsyncClient, name: str
) -> None:
    await create_topic(client, name, 2)
    base = await _instance(client, name, reset="earliest")
    await produce(client, name, [{"value": "a", "partition": 0}, {"value": "b", "partition": 1}])
    async with events(client, f"{base}/records") as stream:
        await stream.records(2)
    # ``id:`` alone came first, as EventSource keeps it: the positions before the first batch.
    async with client.stream("GET", f"{base}/records", headers={"Accept": EVENT_STREAM}) as response:
        first = await anext(response.aiter_lines())
    assert first == f"id: {name}:0:1,{name}:1:1"
    async with events(client, f"{base}/records", last_event_id=f"{name}:0:0,{name}:1:0") as stream:
        assert sorted(r["value"] for r in await stream.records(2)) == ["a", "b"]


@pytest.fixture
async def quick(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """A gateway with quick heartbeats and a bound of two open streams."""
    gw = await start_gateway(tmp_path / "data", stream_heartbeat_ms=200, max_open_streams=2)
    try:
        yield gw
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_an_idle_stream_sends_heartbeats(quick: RunningGateway, name: str) -> None:
    client = quick.client
    await create_topic(client, name, 1)
    base = await _instance(client, name)
    async with events(client, f"{base}/records") as stream:
        with pytest.raises(TimeoutError):
            await stream.next(timeout=1.0)
        assert stream.comments.count("keep-alive") >= 3
    async with events(client, f"/topics/{name}/partitions/0/records") as stream:
        with pytest.raises(TimeoutError):
            await stream.next(timeout=0.7)
        assert stream.comments.count("keep-alive") >= 2


async def test_streams_past_the_bound_are_refused_and_a_closed_one_frees_its_place(
    quick: RunningGateway, name: str
) -> None:
    client = quick.client
    await create_topic(client, name, 1)
    base = await _instance(client, name)
    url = f"/topics/{name}/partitions/0/records"
    async with events(client, f"{base}/records"), events(client, url):
        r = await client.get(url, headers={"Accept": EVENT_STREAM})
        assert r.status_code == 503, r.text
        assert r.json()["error_code"] == 50301 and "2 open streams" in r.json()["message"]
        assert int(r.headers["Retry-After"]) >= 1
        # Polls have a bound of their own: streams do not take it.
        assert (await client.get(f"{base}/records", params={"timeout": 0})).status_code == 200
    for _ in range(50):  # the client went away: its place is free as soon as the gateway sees it
        async with client.stream("GET", url, headers={"Accept": EVENT_STREAM}) as response:
            if response.status_code == 200:
                break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("a closed stream kept its place")


async def test_a_second_member_rebalances_an_open_stream(client: httpx.AsyncClient, name: str) -> None:
    await create_topic(client, name, 2)
    first = await _instance(client, name, reset="earliest")
    async with events(client, f"{first}/records") as stream:
        second = await consumer(client, f"g-{name}", fmt="string")
        await subscribe(client, second, name)
        event = await stream.next(timeout=10)
        assert event.event == "rebalance", event
        partitions = event.json()["partitions"]
        assert len(partitions) == 1 and partitions[0]["topic"] == name
        # where the partition it kept starts: the reconnect cursor now names it alone
        assert stream.last_event_id == f"{name}:{partitions[0]['partition']}:0"
        await produce(client, name, [{"value": "x", "partition": partitions[0]["partition"]}])
        assert [r["value"] for r in await stream.records(1)] == ["x"]


async def test_a_stream_keeps_its_instance_alive_and_closing_it_keeps_the_instance(
    client: httpx.AsyncClient, name: str
) -> None:
    await create_topic(client, name, 1)
    base = await _instance(client, name, **{"consumer.instance.timeout.ms": 1000})
    async with events(client, f"{base}/records") as stream:
        with pytest.raises(TimeoutError):
            await stream.next(timeout=2.5)  # two and a half instance timeouts, idle
        assert not stream.ended
    assert (await client.get(f"{base}/subscription")).status_code == 200  # still there
    await asyncio.sleep(2.5)  # without its stream nothing keeps it
    assert (await client.get(f"{base}/subscription")).status_code == 404


async def test_deleting_the_instance_ends_its_stream(client: httpx.AsyncClient, name: str) -> None:
    await create_topic(client, name, 1)
    base = await _instance(client, name)
    async with events(client, f"{base}/records") as stream:
        assert (await client.delete(base)).status_code == 204
        event = await stream.next(timeout=10)
        assert event.event == "end" and event.json()["reason"] == "deleted"
        with pytest.raises(EOFError):
            await stream.next()


async def test_what_a_poll_refuses_a_stream_refuses_before_it_starts(
    client: httpx.AsyncClient, name: str
) -> None:
    await create_topic(client, name, 1)
    base = await _instance(client, name)
    for url, cursor, status, code in (
        (f"/consumers/g-{name}/instances/nobody/records", None, 404, 40403),
        (f"{base}/records", "not a cursor", 422, 42206),
        (f"{base}/records", f"{name}:0:-1", 422, 42206),
        (f"/topics/{name}/partitions/7/records", None, 404, 40402),
        (f"/topics/{name}/partitions/0/records", "x", 422, 42206),
    ):
        headers = {"Accept": EVENT_STREAM, **({"Last-Event-ID": cursor} if cursor else {})}
        r = await client.get(url, headers=headers)
        assert (r.status_code, r.json()["error_code"]) == (status, code), (url, r.text)


@pytest.mark.parametrize("log_backend", ["embedded", "kafka"])
async def test_a_partition_stream_in_the_format_it_is_asked_for(client: httpx.AsyncClient, name: str) -> None:
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": {"n": i}} for i in range(3)], fmt=JSON)
    url = f"/topics/{name}/partitions/0/records"
    async with events(client, url, offset=1, format="json") as stream:
        event = await stream.next()
        assert event.event == "records"
        assert [(r["offset"], r["value"]) for r in event.json()] == [(1, {"n": 1}), (2, {"n": 2})]
        assert stream.last_event_id == "3"
        await produce(client, name, [{"value": {"n": 3}}], fmt=JSON)
        assert [r["value"] for r in await stream.records(1)] == [{"n": 3}]
        assert stream.last_event_id == "4"
    async with events(client, url, offset=0, format="string", last_event_id="3") as stream:
        assert [r["value"] for r in await stream.records(1)] == ['{"n":3}']
    # ``format`` serves the plain read too; it must agree with an Accept that names a format.
    r = await client.get(url, params={"offset": 2, "format": "json"})
    assert r.json()["records"][0]["value"] == {"n": 2}
    r = await client.get(url, params={"offset": 2, "format": "json"}, headers={"Accept": STRING})
    assert r.status_code == 406, r.text
    r = await client.get(url, params={"format": "yaml"}, headers={"Accept": EVENT_STREAM})
    assert r.status_code == 422, r.text


async def test_a_quota_throttles_a_stream_without_ending_it(tmp_path: Path, name: str) -> None:
    gw = await start_gateway(tmp_path / "data", quota_client_consume_bytes_per_s=2000, quota_burst_s=1)
    client = gw.client
    try:
        await create_topic(client, name, 1)
        base = await _instance(client, name, reset="earliest")
        big = "x" * 1000
        await produce(client, name, [{"value": big} for _ in range(5)])  # 5000 B: 1.5 s of debt
        async with events(client, f"{base}/records") as stream:
            assert len(await stream.records(5)) == 5
            await produce(client, name, [{"value": "after"}])
            assert [r["value"] for r in await stream.records(1)] == ["after"]
        metrics = (await client.get("/metrics")).text
        assert 'brokergate_throttled_requests_total{quota="client_consume"}' in metrics
    finally:
        await client.aclose()
        await gw.stop()


ALICE = ("alice", "alice-pw")


async def test_authentication_and_acls_decide_streams_as_they_decide_polls(tmp_path: Path, name: str) -> None:
    users = tmp_path / "users"
    add_user(users, *ALICE)
    add_user(users, "admin", "admin-pw")
    gw = await start_gateway(
        tmp_path / "data", auth="basic", users_file=users, authorize=True, super_users="User:admin"
    )
    admin, alice = gw.client, httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth(*ALICE))
    admin.auth = httpx.BasicAuth("admin", "admin-pw")
    cluster = (await admin.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    acls = f"/v3/clusters/{cluster}/acls"

    def binding(resource: str, resource_name: str, operation: str) -> dict[str, str]:
        return {
            "resource_type": resource,
            "resource_name": resource_name,
            "pattern_type": "LITERAL",
            "principal": "User:alice",
            "host": "*",
            "operation": operation,
            "permission": "ALLOW",
        }

    try:
        await create_topic(admin, name, 1)
        r = await httpx.AsyncClient(base_url=gw.url).get(
            f"/topics/{name}/partitions/0/records", headers={"Accept": EVENT_STREAM}
        )
        assert r.status_code == 401  # no credentials, no stream
        for resource, what in (("GROUP", f"g-{name}"), ("TOPIC", name)):
            assert (await admin.post(acls, json=binding(resource, what, "READ"))).status_code == 201
        base = await _instance(alice, name)
        await admin.request("DELETE", acls, params={"resource_type": "TOPIC", "principal": "User:alice"})

        # Without READ on its topic the stream is refused before it starts, as the poll is.
        r = await alice.get(f"{base}/records", headers={"Accept": EVENT_STREAM})
        assert (r.status_code, r.json()["error_code"]) == (403, 40301), r.text
        r = await alice.get(f"/topics/{name}/partitions/0/records", headers={"Accept": EVENT_STREAM})
        assert (r.status_code, r.json()["error_code"]) == (403, 40301), r.text

        # With it, the stream runs; taken away, the stream ends at its next poll.
        assert (await admin.post(acls, json=binding("TOPIC", name, "READ"))).status_code == 201
        async with events(alice, f"{base}/records") as stream:
            await produce(admin, name, [{"value": "one"}])
            assert [r["value"] for r in await stream.records(1)] == ["one"]
            await admin.request("DELETE", acls, params={"resource_type": "TOPIC", "principal": "User:alice"})
            event = await stream.next(timeout=10)
            assert event.event == "end", event
            assert event.json()["reason"] == "error" and event.json()["error_code"] == 40301

        # READ on the group, which a poll needs too, taken away: the stream ends as well.
        assert (await admin.post(acls, json=binding("TOPIC", name, "READ"))).status_code == 201
        async with events(alice, f"{base}/records") as stream:
            await admin.request("DELETE", acls, params={"resource_type": "GROUP", "principal": "User:alice"})
            event = await stream.next(timeout=10)
            assert event.event == "end", event
            assert (event.json()["reason"], event.json()["error_code"]) == ("error", 40301)
            assert f"group 'g-{name}'" in event.json()["message"]
        r = await alice.get(f"{base}/records", params={"timeout": 0})
        assert r.status_code == 403  # as the poll is refused
    finally:
        await alice.aclose()
        await admin.aclose()
        await gw.stop()


async def test_a_record_the_format_cannot_show_ends_the_stream_where_it_stood(
    client: httpx.AsyncClient, name: str
) -> None:
    await create_topic(client, name, 1)
    base = await _instance(client, name, fmt="json", reset="earliest")
    await produce(client, name, [{"value": {"ok": True}}], fmt=JSON)
    async with events(client, f"{base}/records") as stream:
        assert [r["value"] for r in await stream.records(1)] == [{"ok": True}]
        await produce(client, name, [{"value": "not json"}])  # a string, stored as it is
        event = await stream.next()
        assert event.event == "end" and (event.json()["reason"], event.json()["error_code"]) == (
            "error",
            42203,
        )
        assert stream.last_event_id == f"{name}:0:1"  # where to seek past it from
        with pytest.raises(EOFError):
            await stream.next()


async def test_a_stream_ends_at_its_lifetime_when_one_is_set(tmp_path: Path, name: str) -> None:
    gw = await start_gateway(tmp_path / "data", stream_max_lifetime_ms=600)
    try:
        await create_topic(gw.client, name, 1)
        async with events(gw.client, f"/topics/{name}/partitions/0/records") as stream:
            event = await stream.next(timeout=5)
            assert event.event == "end"
            assert (event.json()["reason"], event.json()["error_code"]) == ("error", 50301)
            assert "longest time" in event.json()["message"]
    finally:
        await gw.client.aclose()
        await gw.stop()
