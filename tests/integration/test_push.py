"""Push subscriptions delivered to real HTTP receivers on loopback, through real gateways.

Each test starts its receiver (``tests.push_receiver``), a gateway allowed to reach loopback
over plain HTTP, and a subscription; what the receiver got is the judge: which records, how
often, in which order, when, signed how; and the dead-letter topic for what it refused.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from service.core.acl import Operation, ResourceType
from tests.conftest import RunningGateway, backend_settings, start_gateway
from tests.helpers import STRING, cluster_id, create_topic, produce
from tests.integration.conftest import USERS
from tests.integration.test_authorization import Acls, acl_gateway
from tests.push_receiver import Answer, Received, Receiver

V3 = "application/json"
LOOPBACK = "http://127.0.0.1"


@pytest.fixture
def coordinator() -> str:
    return "embedded"


@pytest.fixture
async def gateway(
    tmp_path: Path, request: pytest.FixtureRequest, log_backend: str, coordinator: str, sessions: str
) -> AsyncIterator[RunningGateway]:
    settings = backend_settings(request, log_backend, coordinator, sessions)
    gw = await start_gateway(
        tmp_path / "data", push_allowed_destinations=LOOPBACK, push_refresh_ms=100, **settings
    )
    try:
        yield gw
    finally:
        await gw.client.aclose()
        await gw.stop()


async def subscribe(client: httpx.AsyncClient, name: str, endpoint: str, **spec: Any) -> dict[str, Any]:
    cid = await cluster_id(client)
    body = {"endpoint": endpoint, "format": "string", "start": "earliest", **spec}
    r = await client.put(f"/v3/clusters/{cid}/push-subscriptions/{name}", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


async def describe(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    cid = await cluster_id(client)
    r = await client.get(f"/v3/clusters/{cid}/push-subscriptions/{name}")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def dead_letters(client: httpx.AsyncClient, topic: str, count: int) -> list[dict[str, Any]]:
    """The first ``count`` records of ``topic`` (waiting up to 20 s for them), read statelessly."""
    deadline = time.monotonic() + 20
    while True:
        r = await client.get(
            f"/topics/{topic}/partitions/0/records",
            params={"offset": 0, "count": count},
            headers={"Accept": STRING},
        )
        if r.status_code == 200 and len(r.json()["records"]) >= count:
            return list(r.json()["records"])
        assert time.monotonic() < deadline, r.text
        await asyncio.sleep(0.1)


def headers_of(record: dict[str, Any]) -> dict[str, str]:
    return {h["name"]: base64.b64decode(h["value"]).decode() for h in record["headers"]}


@pytest.mark.parametrize("coordinator", ["embedded", "zookeeper"])
async def test_each_record_is_delivered_once_and_in_order_per_partition(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    await create_topic(client, name, 2)
    await subscribe(client, name, receiver.url, topics=[name], ordering="partition", max_in_flight=4)
    await produce(client, name, [{"value": f"v{i}", "partition": i % 2} for i in range(40)])
    records = await receiver.wait_for(40)
    await asyncio.sleep(0.3)  # nothing more comes
    records = receiver.records()
    assert len(records) == 40
    for p in (0, 1):
        assert [r["offset"] for r in records if r["partition"] == p] == list(range(20))
    assert sorted(r["value"] for r in records) == sorted(f"v{i}" for i in range(40))
    assert all(r["delivery_count"] == 1 for r in records)
    first = receiver.received[0]
    assert first.headers["brokergate-subscription"] == name
    assert first.headers["brokergate-topic"] == name
    assert first.json["subscription"] == name
    status = (await describe(client, name))["status"]
    assert status["delivering"] and status["delivered"] == 40 and status["backlog"] == 0


async def test_batches_say_which_record_is_which(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": f"v{i}"} for i in range(25)])
    await subscribe(client, name, receiver.url, topics=[name], batching={"max_records": 10})
    records = await receiver.wait_for(25)
    assert [r["offset"] for r in records] == list(range(25))
    assert all(len(r.records) <= 10 for r in receiver.received)
    assert len(receiver.received) < 25  # batched
    ids = [r.headers["webhook-id"] for r in receiver.received]
    assert len(set(ids)) == len(ids)  # a batch each


async def test_a_failing_receiver_gets_the_records_after_back_off_with_rising_attempts(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    def answer(n: int, r: Received) -> Answer:
        return (503 if n <= 3 else 200), {}, 0.0

    receiver.answer = answer
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": "only"}])
    await subscribe(
        client, name, receiver.url, topics=[name], retry={"min_backoff_ms": 100, "max_backoff_ms": 2000}
    )
    await receiver.wait_for(4)
    attempts = [int(r.headers["brokergate-attempt"]) for r in receiver.received]
    assert attempts == [1, 2, 3, 4]
    assert len({r.headers["webhook-id"] for r in receiver.received}) == 1  # the same delivery each time
    gaps = [b.at - a.at for a, b in zip(receiver.received, receiver.received[1:], strict=False)]
    assert gaps[0] >= 0.05 and gaps[2] >= 0.2  # 100 ms, then 200, then 400 (jitter: half to all)
    await asyncio.sleep(0.5)
    assert len(receiver.received) == 4  # settled: not sent again
    status = (await describe(client, name))["status"]
    assert status["failures"] == 3 and status["delivered"] == 1 and status["last_error"] == "HTTP 503"


async def test_retry_after_is_waited_for(client: httpx.AsyncClient, name: str, receiver: Receiver) -> None:
    def answer(n: int, r: Received) -> Answer:
        return (429, {"retry-after": "1"}, 0.0) if n == 1 else (200, {}, 0.0)

    receiver.answer = answer
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": "x"}])
    await subscribe(client, name, receiver.url, topics=[name], retry={"min_backoff_ms": 10})
    await receiver.wait_for(2)
    assert receiver.received[1].at - receiver.received[0].at >= 0.95


async def test_a_400_sends_the_record_to_the_dead_letter_topic_at_once(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    receiver.answer = lambda n, r: (400, {}, 0.0)
    await create_topic(client, name, 1)
    await create_topic(client, f"{name}.dlq", 1)
    await produce(
        client, name, [{"key": "k", "value": "refused", "headers": [{"name": "h", "value": "aGk="}]}]
    )
    started = int(time.time() * 1000)
    await subscribe(client, name, receiver.url, topics=[name], dead_letter_topic=f"{name}.dlq")
    [copy] = await dead_letters(client, f"{name}.dlq", 1)
    assert len(receiver.received) == 1  # not retried
    assert copy["key"] == "k" and copy["value"] == "refused"
    why = headers_of(copy)
    assert why["h"] == "hi"
    assert why["push.subscription"] == name and why["push.status"] == "400"
    assert why["push.attempts"] == "1" and why["push.error"] == "HTTP 400"
    assert started <= int(why["push.first_attempt"]) <= int(why["push.last_attempt"])
    assert why["dlq.topic"] == name and why["dlq.offset"] == "0"
    assert (await describe(client, name))["status"]["dead_lettered"] == 1


async def test_a_dead_letter_copy_not_written_is_written_later_and_the_record_never_sent_again(
    tmp_path: Path, name: str, receiver: Receiver
) -> None:
    """The dead-letter topic cannot be written (it is missing, and topics are not created on
    produce): the refused record stays held, is not sent to the endpoint again, and its copy is
    written once the topic is there."""
    receiver.answer = lambda n, r: (400, {}, 0.0)
    gw = await start_gateway(
        tmp_path / "data",
        push_allowed_destinations=LOOPBACK,
        push_refresh_ms=100,
        auto_create_topics_enable=False,
    )
    try:
        client = gw.client
        await create_topic(client, name, 1)
        await produce(client, name, [{"value": "refused"}, {"value": "too"}])
        await subscribe(
            client,
            name,
            receiver.url,
            topics=[name],
            dead_letter_topic=f"{name}.dlq",
            batching={"max_records": 2},
        )
        await receiver.wait_for(2)
        await asyncio.sleep(2.5)  # two more tries of the copy, and none of the delivery
        assert len(receiver.received) == 1
        status = (await describe(client, name))["status"]
        assert status["held"] == 2 and status["dead_lettered"] == 0
        await create_topic(client, f"{name}.dlq", 1)
        copies = await dead_letters(client, f"{name}.dlq", 2)
        assert [c["value"] for c in copies] == ["refused", "too"]
        assert len(receiver.received) == 1
        deadline = time.monotonic() + 10
        while (status := (await describe(client, name))["status"])["held"] != 0:
            assert time.monotonic() < deadline, status
            await asyncio.sleep(0.1)
        assert status["dead_lettered"] == 2
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_receiver_that_never_answers_meets_the_deadline_then_the_dead_letter_topic(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    receiver.answer = lambda n, r: (200, {}, None)
    await create_topic(client, name, 1)
    await create_topic(client, f"{name}.dlq", 1)
    await produce(client, name, [{"value": "late"}])
    await subscribe(
        client,
        name,
        receiver.url,
        topics=[name],
        ack_deadline_ms=300,
        retry={"min_backoff_ms": 50, "max_attempts": 2},
        dead_letter_topic=f"{name}.dlq",
    )
    [copy] = await dead_letters(client, f"{name}.dlq", 1)
    assert len(receiver.received) == 2
    assert headers_of(copy)["push.error"] == "no answer within 300 ms"
    assert "push.status" not in headers_of(copy)


async def test_requests_are_signed_as_standard_webhooks_says_and_a_rotated_secret_verifies_too(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    await create_topic(client, name, 1)
    created = await subscribe(client, name, receiver.url, topics=[name])
    secret = created["secret"]
    assert secret.startswith("whsec_")
    await produce(client, name, [{"value": "one"}])
    await receiver.wait_for(1)
    first = receiver.received[0]
    Webhook(secret).verify(first.body, first.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(base64.b64encode(b"x" * 32).decode()).verify(first.body, first.headers)
    cid = await cluster_id(client)
    r = await client.post(f"/v3/clusters/{cid}/push-subscriptions/{name}/rotate-secret")
    assert r.status_code == 200, r.text
    new = r.json()["secret"]
    assert new != secret
    assert r.json()["status"] is not None
    await asyncio.sleep(0.3)  # the runner gives the deliverer the new secrets
    await produce(client, name, [{"value": "two"}])
    await receiver.wait_for(2)
    second = receiver.received[-1]
    assert len(second.headers["webhook-signature"].split(" ")) == 2
    Webhook(new).verify(second.body, second.headers)
    Webhook(secret).verify(second.body, second.headers)  # the previous one, still during the rotation
    shown = await describe(client, name)
    assert "secret" not in shown or shown["secret"] is None


async def test_a_bearer_token_is_sent_and_never_shown(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    await create_topic(client, name, 1)
    created = await subscribe(
        client, name, receiver.url, topics=[name], authentication={"type": "bearer", "token": "s3cret"}
    )
    assert created["authentication"]["token"] is None and created["secret"] is None
    await produce(client, name, [{"value": "one"}])
    await receiver.wait_for(1)
    got = receiver.received[0].headers
    assert got["authorization"] == "Bearer s3cret"
    assert "webhook-signature" not in got


async def test_pause_resume_and_delete(client: httpx.AsyncClient, name: str, receiver: Receiver) -> None:
    await create_topic(client, name, 1)
    await subscribe(client, name, receiver.url, topics=[name])
    cid = await cluster_id(client)
    base = f"/v3/clusters/{cid}/push-subscriptions/{name}"
    assert (await client.post(f"{base}/pause")).json()["paused"] is True
    await asyncio.sleep(0.3)
    await produce(client, name, [{"value": "while paused"}])
    await asyncio.sleep(0.5)
    assert receiver.received == []
    assert (await describe(client, name))["status"]["backlog"] == 1
    assert (await client.post(f"{base}/resume")).json()["paused"] is False
    await receiver.wait_for(1)
    assert (await client.delete(base)).status_code == 204
    assert (await client.get(base)).status_code == 404
    listed = (await client.get(f"/v3/clusters/{cid}/push-subscriptions")).json()["data"]
    assert listed == []


@pytest.mark.parametrize(
    ("endpoint", "why"),
    [
        ("http://127.0.0.2:8080/h", "not in the gateway's allowed destinations"),
        ("https://127.0.0.1/h", "not in the gateway's allowed destinations"),  # https needs its own entry
        ("ftp://127.0.0.1/h", "scheme is http or https"),
        ("http://user:pw@127.0.0.1/h", "no user or password"),
        ("http://169.254.169.254/latest/meta-data", "not in the gateway's allowed destinations"),
        ("not a url", "absolute http or https URL"),
    ],
)
async def test_forbidden_destinations_are_refused_at_creation(
    client: httpx.AsyncClient, name: str, endpoint: str, why: str
) -> None:
    await create_topic(client, name, 1)
    cid = await cluster_id(client)
    r = await client.put(
        f"/v3/clusters/{cid}/push-subscriptions/{name}", json={"endpoint": endpoint, "topics": [name]}
    )
    assert r.status_code == 422, r.text
    assert why in r.json()["message"]
    assert r.json()["error_code"] == 42206


_HOOK = "http://127.0.0.1/h"


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("n", {"topics": ["t"]}),  # no endpoint
        ("a b", {"endpoint": _HOOK, "topics": ["t"]}),
        (".", {"endpoint": _HOOK, "topics": ["t"]}),
        ("n" * 201, {"endpoint": _HOOK, "topics": ["t"]}),
        ("n", {"endpoint": _HOOK}),  # neither topics nor a pattern
        ("n", {"endpoint": _HOOK, "topics": ["t"], "topic_pattern": "t.*"}),
        ("n", {"endpoint": _HOOK, "topics": ["t"], "topic_pattern": "(unclosed"}),
        ("n", {"endpoint": _HOOK, "topics": ["t"], "surprise": 1}),
        ("n", {"endpoint": _HOOK, "topics": ["t"], "max_in_flight": 10_000}),
        ("n", {"endpoint": _HOOK, "topics": ["t"], "batching": {"max_records": 0}}),
        ("n", {"endpoint": _HOOK, "topics": ["bad topic"]}),
        ("n", {"endpoint": _HOOK, "topics": ["t"], "dead_letter_topic": "t"}),
        ("n", {"endpoint": _HOOK, "topics": ["t"], "authentication": {"type": "bearer"}}),
        ("n", {"endpoint": _HOOK, "topics": ["t"], "authentication": {"type": "bearer", "token": "a\nb"}}),
        ("n", {"endpoint": _HOOK, "topics": ["t"], "retry": {"min_backoff_ms": 10, "max_backoff_ms": 5}}),
        ("n", {"endpoint": _HOOK, "topics": ["t"], "format": "xml"}),
        ("n", [1, 2]),
    ],
)
async def test_malformed_subscriptions_are_refused(client: httpx.AsyncClient, name: str, body: Any) -> None:
    cid = await cluster_id(client)
    r = await client.put(f"/v3/clusters/{cid}/push-subscriptions/{name}", json=body)
    assert 400 <= r.status_code < 500, r.text
    assert set(r.json()) == {"error_code", "message"}
    listed = (await client.get(f"/v3/clusters/{cid}/push-subscriptions")).json()["data"]
    assert listed == []


async def test_a_push_group_cannot_be_joined_by_a_share_consumer(
    client: httpx.AsyncClient, name: str
) -> None:
    r = await client.post(
        f"/share-groups/push.{name}/consumers",
        json={},
        headers={"Content-Type": "application/vnd.kafka.v2+json"},
    )
    assert r.status_code == 409, r.text
    assert "push subscription" in r.json()["message"]


async def test_a_name_that_resolves_to_an_address_nobody_named_is_refused_at_creation(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path / "data", push_allowed_destinations="http://localhost")
    try:
        await create_topic(gw.client, "t", 1)
        cid = await cluster_id(gw.client)
        r = await gw.client.put(
            f"/v3/clusters/{cid}/push-subscriptions/p",
            json={"endpoint": "http://localhost:9/h", "topics": ["t"]},
        )
        assert r.status_code == 422, r.text
        assert "loopback, private, link-local or reserved" in r.json()["message"]
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_subscription_is_its_owners_alone(tmp_path: Path, acl_users: Path) -> None:
    async with acl_gateway(tmp_path, acl_users) as gw:
        await create_topic(gw.client, "t", 1)
        cid = await cluster_id(gw.client)
        acls = Acls(gw.client, cid)
        base = f"/v3/clusters/{cid}/push-subscriptions"
        spec = {"endpoint": "http://127.0.0.1:9/h", "topics": ["t"]}
        for user in ("alice", "bob"):
            await acls.grant(f"User:{user}", ResourceType.TOPIC, "t", Operation.READ)
            for op in (Operation.READ, Operation.DESCRIBE):
                await acls.grant(f"User:{user}", ResourceType.GROUP, "push.p", op)
        async with (
            httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth("alice", USERS["alice"])) as alice,
            httpx.AsyncClient(base_url=gw.url, auth=httpx.BasicAuth("bob", USERS["bob"])) as bob,
        ):
            assert (await alice.put(f"{base}/p", json=spec)).status_code == 201
            for method, path in (
                ("GET", "/p"),
                ("DELETE", "/p"),
                ("POST", "/p/pause"),
                ("POST", "/p/rotate-secret"),
            ):
                r = await bob.request(method, base + path)
                assert r.status_code == 404, (method, path, r.text)
            assert (
                await bob.put(f"{base}/p", json=spec)
            ).status_code == 409  # taken, and not bob's to change
            assert (await bob.get(base)).json()["data"] == []
            assert [s["name"] for s in (await alice.get(base)).json()["data"]] == ["p"]
            assert [s["owner"] for s in (await gw.client.get(base)).json()["data"]] == [
                "User:alice"
            ]  # a super user
            await acls.revoke_all("User:alice")
            r = await alice.put(f"{base}/q", json=spec)
            assert r.status_code == 403, r.text  # READ on push.q and on the topic are needed


async def test_metrics_show_each_subscription_delivered_here(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    await create_topic(client, name, 1)
    await subscribe(client, name, receiver.url, topics=[name])
    await produce(client, name, [{"value": f"v{i}"} for i in range(3)])
    await receiver.wait_for(3)
    await asyncio.sleep(0.2)
    text = (await client.get("/metrics")).text
    assert f'brokergate_push_delivered_records_total{{subscription="{name}"}} 3.0' in text
    assert f'brokergate_push_requests_total{{subscription="{name}"}} 3.0' in text
    assert f'brokergate_push_in_flight_requests{{subscription="{name}"}} 0.0' in text


async def test_a_slow_endpoint_never_holds_up_another_subscription(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    slow = await Receiver(lambda n, r: (200, {}, 3.0)).start()
    try:
        await create_topic(client, f"{name}-slow", 1)
        await create_topic(client, f"{name}-fast", 1)
        await subscribe(client, f"{name}-slow", slow.url, topics=[f"{name}-slow"], ack_deadline_ms=5000)
        await subscribe(client, f"{name}-fast", receiver.url, topics=[f"{name}-fast"])
        await produce(client, f"{name}-slow", [{"value": f"s{i}"} for i in range(50)])
        await produce(client, f"{name}-fast", [{"value": f"f{i}"} for i in range(50)])
        await receiver.wait_for(50, timeout=10)
        assert len(slow.received) <= 1  # its first request still waits for its answer
    finally:
        await slow.stop()


async def test_ordering_by_key_keeps_each_keys_order_while_a_failing_key_waits(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    def answer(n: int, r: Received) -> Answer:
        first = r.records[0]
        if first["offset"] == 1 and int(r.headers["brokergate-attempt"]) < 3:
            return 503, {}, 0.0
        return 200, {}, 0.0

    receiver.answer = answer
    await create_topic(client, name, 1)
    records = [{"key": "bad" if i % 2 else "good", "value": f"v{i}"} for i in range(10)]
    await produce(client, name, records)
    await subscribe(
        client, name, receiver.url, topics=[name], ordering="key", max_in_flight=4,
        retry={"min_backoff_ms": 100},
    )  # fmt: skip
    got = await receiver.wait_for(10 + 2)  # the first bad one was sent three times
    goods = [r["offset"] for r in got if r["key"] == "good"]
    assert goods == [0, 2, 4, 6, 8]
    bads = [r["offset"] for r in got if r["key"] == "bad"]
    assert bads == [1, 1, 1, 3, 5, 7, 9]  # the next waits for the one before it to be settled


async def test_a_pattern_delivers_every_matching_topic_and_a_start_time_starts_there(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    await create_topic(client, f"{name}.a", 1)
    await create_topic(client, f"{name}.b", 1)
    await produce(
        client, f"{name}.a", [{"value": "old", "timestamp": 1000}, {"value": "new", "timestamp": 5000}]
    )
    await produce(client, f"{name}.b", [{"value": "b"}])
    await subscribe(client, f"{name}-p", receiver.url, topic_pattern=f"{name}\\..*")
    await subscribe(client, f"{name}-t", receiver.url, topics=[f"{name}.a"], start_timestamp_ms=3000)
    got = await receiver.wait_for(3 + 1)
    by_sub: dict[str, list[str]] = {}
    for req in receiver.received:
        by_sub.setdefault(req.json["subscription"], []).extend(r["value"] for r in req.records)
    assert sorted(by_sub[f"{name}-p"]) == ["b", "new", "old"]
    assert by_sub[f"{name}-t"] == ["new"]
    assert len(got) == 4


async def test_json_values_are_delivered_as_json(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": {"n": 1}}], fmt="application/vnd.kafka.json.v2+json")
    await produce(client, name, [{"value": "bm90IGpzb24="}], fmt="application/vnd.kafka.binary.v2+json")
    await create_topic(client, f"{name}.dlq", 1)
    await subscribe(client, name, receiver.url, topics=[name], format="json", dead_letter_topic=f"{name}.dlq")
    [record] = await receiver.wait_for(1)
    assert record["value"] == {"n": 1}
    [copy] = await dead_letters(client, f"{name}.dlq", 1)  # "not json" cannot be shown as JSON
    assert headers_of(copy)["push.error"].startswith("cannot be shown as json")


async def test_subscriptions_are_bounded_per_principal(tmp_path: Path) -> None:
    gw = await start_gateway(
        tmp_path / "data", push_allowed_destinations=LOOPBACK, push_max_subscriptions_per_principal=2
    )
    try:
        await create_topic(gw.client, "t", 1)
        for i in range(2):
            await subscribe(gw.client, f"s{i}", "http://127.0.0.1:9/h", topics=["t"])
        cid = await cluster_id(gw.client)
        r = await gw.client.put(
            f"/v3/clusters/{cid}/push-subscriptions/s2",
            json={"endpoint": "http://127.0.0.1:9/h", "topics": ["t"]},
        )
        assert r.status_code == 409, r.text
        assert "push_max_subscriptions_per_principal" in r.json()["message"]
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_avro_records_are_delivered_decoded_and_one_that_is_not_avro_dead_lettered(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    avro = "application/vnd.kafka.avro.v2+json"
    await create_topic(client, name, 1)
    await create_topic(client, f"{name}.dlq", 1)
    schema = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "n", "type": "int"}]})
    for body in ({"value_schema": schema, "records": [{"value": {"n": 1}}]}, None):
        if body is None:
            await produce(client, name, [{"value": "not avro"}])
            continue
        r = await client.post(f"/topics/{name}", json=body, headers={"Content-Type": avro})
        assert r.status_code == 200, r.text
    r = await client.post(
        f"/topics/{name}",
        json={"value_schema": schema, "records": [{"value": {"n": 3}}]},
        headers={"Content-Type": avro},
    )
    assert r.status_code == 200, r.text
    await subscribe(client, name, receiver.url, topics=[name], format="avro", dead_letter_topic=f"{name}.dlq")
    records = await receiver.wait_for(2)
    assert [(r["offset"], r["value"]) for r in records] == [(0, {"n": 1}), (2, {"n": 3})]
    [copy] = await dead_letters(client, f"{name}.dlq", 1)
    assert copy["value"] == "not avro" and headers_of(copy)["push.error"].startswith(
        "cannot be shown as avro"
    )


async def test_requests_in_flight_are_bounded_in_all(tmp_path: Path) -> None:
    gw = await start_gateway(
        tmp_path / "data", push_allowed_destinations=LOOPBACK, push_max_in_flight_total=10
    )
    try:
        await create_topic(gw.client, "t", 1)
        await subscribe(gw.client, "a", "http://127.0.0.1:9/h", topics=["t"], max_in_flight=6)
        cid = await cluster_id(gw.client)
        spec = {"endpoint": "http://127.0.0.1:9/h", "topics": ["t"], "max_in_flight": 5}
        r = await gw.client.put(f"/v3/clusters/{cid}/push-subscriptions/b", json=spec)
        assert r.status_code == 409 and "push_max_in_flight_total" in r.json()["message"], r.text
        r = await gw.client.put(f"/v3/clusters/{cid}/push-subscriptions/b", json={**spec, "max_in_flight": 4})
        assert r.status_code == 201, r.text
        r = await gw.client.put(f"/v3/clusters/{cid}/push-subscriptions/a", json={**spec, "max_in_flight": 7})
        assert r.status_code == 409, r.text  # a change counts what the subscription asks instead
        r = await gw.client.put(f"/v3/clusters/{cid}/push-subscriptions/a", json={**spec, "max_in_flight": 6})
        assert r.status_code == 200, r.text
    finally:
        await gw.client.aclose()
        await gw.stop()


async def test_a_record_the_format_cannot_show_leaves_its_batch_for_the_dead_letter_topic(
    client: httpx.AsyncClient, name: str, receiver: Receiver
) -> None:
    await create_topic(client, name, 1)
    await create_topic(client, f"{name}.dlq", 1)
    await produce(client, name, [{"value": {"n": 1}}], fmt="application/vnd.kafka.json.v2+json")
    await produce(client, name, [{"value": "bm90IGpzb24="}], fmt="application/vnd.kafka.binary.v2+json")
    await produce(client, name, [{"value": {"n": 3}}], fmt="application/vnd.kafka.json.v2+json")
    await subscribe(
        client, name, receiver.url, topics=[name], format="json", batching={"max_records": 10},
        dead_letter_topic=f"{name}.dlq",
    )  # fmt: skip
    records = await receiver.wait_for(2)
    assert [(r["offset"], r["value"]) for r in records] == [(0, {"n": 1}), (2, {"n": 3})]
    [copy] = await dead_letters(client, f"{name}.dlq", 1)
    assert headers_of(copy)["dlq.offset"] == "1"
    await asyncio.sleep(0.3)
    status = (await describe(client, name))["status"]
    assert status["held"] == 0 and status["dead_lettered"] == 1
