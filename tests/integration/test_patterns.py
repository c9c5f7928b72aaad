"""Topic patterns over HTTP: a pattern cannot hang the gateway; what RE2 lacks is refused with 42204."""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import (
    V2,
    assignment,
    consumer,
    create_topic,
    poll_until,
    produce,
    subscribe,
)

pytestmark = pytest.mark.parametrize(
    ("coordinator", "sessions"), [("embedded", "embedded"), ("zookeeper", "redis")]
)

EVIL = "(a+)+$"  # Python's re backtracks 2**n ways over n a's followed by anything else


@pytest.mark.timeout(60)  # with a backtracking engine the subscribe alone would never finish
async def test_catastrophic_pattern_subscribes_at_once_and_the_gateway_keeps_serving(client, name):
    trap = "a" * 100 + "-"
    covered = "a" * 100
    await create_topic(client, trap, 1)
    await create_topic(client, covered, 1)
    base = await consumer(client, f"g-{name}")
    await subscribe(client, base, pattern=EVIL)  # 204
    assert await assignment(client, base) == [(covered, 0)]
    sub = (await client.get(f"{base}/subscription")).json()
    assert sub == {"topics": [covered], "topic_pattern": EVIL}

    # The metadata watcher re-resolves the pattern on every refresh; other requests go on meanwhile.
    await asyncio.sleep(1)
    await create_topic(client, name, 1)
    await produce(client, name, [{"value": "unrelated"}])
    await produce(client, covered, [{"value": "covered"}])
    await produce(client, trap, [{"value": "trap"}])
    got = await poll_until(client, base, 1)
    assert [(r["topic"], r["value"]) for r in got] == [(covered, "covered")]
    assert (await client.get("/topics")).status_code == 200


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        ("orders(?=-eu)", "lookahead"),
        ("(?<!test)-.*", "lookbehind"),
        (r"(a)-\1", "backreference"),
    ],
)
async def test_unsupported_constructs_are_refused(client, name, pattern, named):
    base = await consumer(client, f"g-{name}")
    r = await client.post(
        f"{base}/subscription", json={"topic_pattern": pattern}, headers={"Content-Type": V2}
    )
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error_code"] == 42204 and named in body["message"], body
    assert (await client.get(f"{base}/subscription")).json() == {"topics": []}


async def test_overlong_pattern_is_refused(client, name):
    base = await consumer(client, f"g-{name}")
    r = await client.post(
        f"{base}/subscription", json={"topic_pattern": "a" * 1001}, headers={"Content-Type": V2}
    )
    assert r.status_code == 422 and r.json()["error_code"] == 42204, r.text
    await subscribe(client, base, pattern="a" * 1000)  # the limit itself is fine
