"""What the console's tests do through the API, as any other client would (each call must succeed)."""

from __future__ import annotations

from typing import Any

import httpx

JSON = "application/vnd.kafka.json.v2+json"
V2 = "application/vnd.kafka.v2+json"


def cluster_id(api: httpx.Client) -> str:
    return str(api.get("/v3/clusters").json()["data"][0]["cluster_id"])


def create_topic(api: httpx.Client, topic: str, partitions: int = 1) -> None:
    r = api.post(
        f"/v3/clusters/{cluster_id(api)}/topics", json={"topic_name": topic, "partitions_count": partitions}
    )
    assert r.status_code == 201, r.text


def produce(api: httpx.Client, topic: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = api.post(f"/topics/{topic}", json={"records": records}, headers={"Content-Type": JSON})
    assert r.status_code == 200, r.text
    offsets: list[dict[str, Any]] = r.json()["offsets"]
    return offsets


def join(api: httpx.Client, group: str, topic: str) -> str:
    """A member of ``group`` subscribed to ``topic``; its base path."""
    r = api.post(
        f"/consumers/{group}",
        json={"name": "m1", "format": "json", "auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200, r.text
    base = f"/consumers/{group}/instances/m1"
    r = api.post(f"{base}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    return base


def fetch(api: httpx.Client, member: str, count: int) -> None:
    """Polls as ``member`` until it has fetched ``count`` records (none committed)."""
    fetched: list[Any] = []
    for _ in range(50):
        r = api.get(f"{member}/records", params={"timeout": 200}, headers={"Accept": JSON})
        assert r.status_code == 200, r.text
        fetched += r.json()
        if len(fetched) >= count:
            return
    raise AssertionError(f"fetched {len(fetched)} of {count} records")


def commit(api: httpx.Client, base: str) -> None:
    """Commits what the member fetched (an empty body, as the v2 API has it)."""
    r = api.post(f"{base}/offsets", headers={"Content-Type": V2})
    assert r.status_code == 200, r.text


def share_consumer(api: httpx.Client, group: str, name: str, topic: str) -> str:
    """A consumer of share group ``group`` reading ``topic`` from its start; its base path."""
    r = api.post(
        f"/share-groups/{group}/consumers",
        json={"name": name, "format": "json", "share.auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
    )
    assert r.status_code == 200, r.text
    base = f"/share-groups/{group}/consumers/{name}"
    r = api.post(f"{base}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    return base


def acquire(api: httpx.Client, consumer: str, count: int) -> list[dict[str, Any]]:
    """``count`` records acquired by ``consumer`` (and held: none settled)."""
    r = api.get(
        f"{consumer}/records", params={"timeout": 2000, "max_records": count}, headers={"Accept": JSON}
    )
    assert r.status_code == 200 and len(r.json()) == count, r.text
    return list(r.json())


def accept(api: httpx.Client, consumer: str, records: list[dict[str, Any]]) -> None:
    acks = [
        {"topic": r["topic"], "partition": r["partition"], "offsets": [r["offset"]], "type": "accept"}
        for r in records
    ]
    r = api.post(
        f"{consumer}/acknowledgements", json={"acknowledgements": acks}, headers={"Content-Type": V2}
    )
    assert r.status_code == 200 and r.json()["refused"] == [], r.text
