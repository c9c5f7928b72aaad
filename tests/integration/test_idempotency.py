"""Idempotent produce: a retried request with the same Idempotency-Key is stored once."""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import STRING, create_topic

pytestmark = pytest.mark.parametrize("sessions", ["embedded", "redis"])


async def send(client, topic: str, key: str | None, values: list[str], partition: int | None = None):
    headers = {"Content-Type": STRING}
    if key is not None:
        headers["Idempotency-Key"] = key
    url = f"/topics/{topic}" if partition is None else f"/topics/{topic}/partitions/{partition}"
    return await client.post(url, json={"records": [{"value": v} for v in values]}, headers=headers)


async def end(client, topic: str) -> int:
    return (await client.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0})).json()[
        "next_offset"
    ]


async def test_a_retry_gets_the_first_answer_and_stores_nothing(client, name):
    await create_topic(client, name, 1)
    first = await send(client, name, "order-17", ["a", "b"])
    assert first.status_code == 200 and first.headers["Idempotency-Replayed"] == "false"
    again = await send(client, name, "order-17", ["a", "b"])
    assert again.status_code == 200 and again.headers["Idempotency-Replayed"] == "true"
    assert again.json() == first.json()
    assert await end(client, name) == 2
    other = await send(client, name, "order-18", ["a", "b"])
    assert [o["offset"] for o in other.json()["offsets"]] == [2, 3]
    plain = await send(client, name, None, ["c"])
    assert "Idempotency-Replayed" not in plain.headers


async def test_concurrent_duplicates_share_one_write(client, name):
    await create_topic(client, name, 1)
    answers = await asyncio.gather(*(send(client, name, "burst", ["x", "y", "z"]) for _ in range(8)))
    assert {r.status_code for r in answers} == {200}
    assert len({r.text for r in answers}) == 1
    assert sum(r.headers["Idempotency-Replayed"] == "false" for r in answers) == 1
    assert await end(client, name) == 3


async def test_a_key_reused_for_another_request_is_refused(client, name):
    await create_topic(client, name, 1)
    assert (await send(client, name, "k1", ["a"])).status_code == 200
    r = await send(client, name, "k1", ["different"])
    assert r.status_code == 422 and r.json()["error_code"] == 42206
    assert await end(client, name) == 1


async def test_a_failed_request_is_not_remembered(client, name):
    await create_topic(client, name, 1)
    r = await send(client, name, "k2", ["a"], partition=3)
    assert r.status_code == 404
    r = await send(client, name, "k2", ["a"], partition=3)
    assert r.status_code == 404  # ran again, still refused: errors are not replayed
    # the failures left the key free: the corrected request runs, and its retry is a replay
    assert (await send(client, name, "k2", ["a"], partition=0)).headers["Idempotency-Replayed"] == "false"
    assert (await send(client, name, "k2", ["a"], partition=0)).headers["Idempotency-Replayed"] == "true"
    assert await end(client, name) == 1


@pytest.mark.parametrize("key", ["", "has space", "x" * 256])
async def test_bad_keys_are_refused(client, name, key):
    r = await send(client, name, key, ["a"])
    assert r.status_code == 422 and "Idempotency-Key" in r.json()["message"]


async def test_keys_are_scoped_by_client_and_path(client, name):
    await create_topic(client, name, 1)
    await create_topic(client, f"{name}-b", 1)

    async def as_client(api_key: str | None, topic: str, value: str):
        headers = {"Content-Type": STRING, "Idempotency-Key": "same-key"}
        if api_key is not None:
            headers["X-API-Key"] = api_key
        return await client.post(f"/topics/{topic}", json={"records": [{"value": value}]}, headers=headers)

    alice = await as_client("alice", name, "from alice")
    bob = await as_client("bob", name, "from bob")  # another client's key is another key
    elsewhere = await as_client("alice", f"{name}-b", "on b")  # and another topic another key
    assert [r.headers["Idempotency-Replayed"] for r in (alice, bob, elsewhere)] == ["false"] * 3
    again = await as_client("alice", name, "from alice")
    assert again.headers["Idempotency-Replayed"] == "true" and again.json() == alice.json()
    assert await end(client, name) == 2
