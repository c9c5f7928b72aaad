"""Only a group's owners move its offsets: a commit by an instance that may not commit a partition is
refused (409, 40903) and stores nothing, on every coordinator.

Members commit the partitions they own in the current generation; an instance with a manual
assignment commits the partitions it was assigned; an instance with neither commits nothing.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import V2, assignment, commit, consumer, create_topic, poll_until, produce, subscribe

# Every log under every coordinator: the in-process one and the stateless deployment's ZooKeeper + Redis.
pytestmark = [
    pytest.mark.parametrize("log_backend", ["embedded", "kafka"]),
    pytest.mark.parametrize(("coordinator", "sessions"), [("embedded", "embedded"), ("zookeeper", "redis")]),
]


async def committed(client: httpx.AsyncClient, base: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset of each partition (-1: none), as any of its instances reads it."""
    r = await client.request(
        "GET",
        f"{base}/offsets",
        json={"partitions": [{"topic": topic, "partition": p} for p in range(partitions)]},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200, r.text
    return {o["partition"]: o["offset"] for o in r.json()["offsets"]}


async def try_commit(client: httpx.AsyncClient, base: str, offsets: list[dict[str, Any]]) -> httpx.Response:
    return await client.post(f"{base}/offsets", json={"offsets": offsets}, headers={"Content-Type": V2})


def assert_refused(r: httpx.Response) -> None:
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["error_code"] == 40903 and "not committed" in body["message"]


async def group_with_progress(client: httpx.AsyncClient, name: str, partitions: int) -> tuple[str, str]:
    """A group whose one member read 4 records per partition and committed them all."""
    await create_topic(client, name, partitions)
    records = [{"value": f"{p}-{i}", "partition": p} for p in range(partitions) for i in range(4)]
    await produce(client, name, records)
    group = f"g-{name}"
    member = await consumer(client, group, name="member")
    await subscribe(client, member, name)
    assert len(await poll_until(client, member, 4 * partitions)) == 4 * partitions
    await commit(client, member)
    assert await committed(client, member, name, partitions) == dict.fromkeys(range(partitions), 4)
    return group, member


async def test_instance_that_never_subscribed_cannot_rewind_the_group(client, name):
    group, member = await group_with_progress(client, name, 2)
    outsider = await consumer(client, group, name="outsider")
    assert_refused(await try_commit(client, outsider, [{"topic": name, "partition": 0, "offset": 0}]))
    assert await committed(client, member, name, 2) == {0: 4, 1: 4}
    # "Commit all fetched" with nothing fetched stays a harmless no-op.
    assert await commit(client, outsider) == []
    assert await committed(client, member, name, 2) == {0: 4, 1: 4}


async def test_instance_that_unsubscribed_cannot_commit(client, name):
    group, member = await group_with_progress(client, name, 2)
    assert (await client.delete(f"{member}/subscription")).status_code == 204
    assert_refused(await try_commit(client, member, [{"topic": name, "partition": 1, "offset": 0}]))
    reader = await consumer(client, group, name="reader")
    assert await committed(client, reader, name, 2) == {0: 4, 1: 4}


async def test_manual_assignment_commits_only_its_partitions(client, name):
    group, member = await group_with_progress(client, name, 3)
    manual = await consumer(client, group, name="manual")
    r = await client.post(
        f"{manual}/assignments",
        json={"partitions": [{"topic": name, "partition": 2}]},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 204
    assert_refused(await try_commit(client, manual, [{"topic": name, "partition": 0, "offset": 0}]))
    # All or nothing: the assigned partition in a refused commit is not stored either.
    both = [{"topic": name, "partition": 2, "offset": 0}, {"topic": name, "partition": 1, "offset": 0}]
    assert_refused(await try_commit(client, manual, both))
    assert await committed(client, member, name, 3) == {0: 4, 1: 4, 2: 4}
    done = await commit(client, manual, [{"topic": name, "partition": 2, "offset": 1}])
    assert done == [{"topic": name, "partition": 2, "offset": 2}]
    assert await committed(client, member, name, 3) == {0: 4, 1: 4, 2: 2}


async def test_manual_assignment_commits_what_it_fetched(client, name):
    group, _ = await group_with_progress(client, name, 2)
    manual = await consumer(client, f"other-{group}", name="manual")
    r = await client.post(
        f"{manual}/assignments",
        json={"partitions": [{"topic": name, "partition": 1}]},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 204
    assert len(await poll_until(client, manual, 4)) == 4
    assert await commit(client, manual) == [{"topic": name, "partition": 1, "offset": 4}]
    assert await committed(client, manual, name, 2) == {0: -1, 1: 4}


async def test_member_commits_only_the_partitions_it_owns(client, name):
    await create_topic(client, name, 2)
    group = f"g-{name}"
    a = await consumer(client, group, name="a")
    await subscribe(client, a, name)
    b = await consumer(client, group, name="b")
    await subscribe(client, b, name)
    [(_, mine)] = await assignment(client, a)
    [(_, theirs)] = await assignment(client, b)
    assert {mine, theirs} == {0, 1}
    done = await commit(client, b, [{"topic": name, "partition": theirs, "offset": 6}])
    assert done == [{"topic": name, "partition": theirs, "offset": 7}]

    assert_refused(await try_commit(client, a, [{"topic": name, "partition": theirs, "offset": 0}]))
    # All or nothing: its own partition, named in the same refused commit, is not stored either.
    both = [
        {"topic": name, "partition": mine, "offset": 2},
        {"topic": name, "partition": theirs, "offset": 0},
    ]
    assert_refused(await try_commit(client, a, both))
    assert await committed(client, a, name, 2) == {mine: -1, theirs: 7}

    done = await commit(client, a, [{"topic": name, "partition": mine, "offset": 2}])
    assert done == [{"topic": name, "partition": mine, "offset": 3}]
    assert await committed(client, b, name, 2) == {mine: 3, theirs: 7}
