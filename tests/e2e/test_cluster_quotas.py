"""Quotas on the local cluster: one client's budget is shared by every replica behind the balancer.

A cluster of two replicas (Redis sessions, so Redis holds the token buckets) runs
with a small per-client produce quota and a per-client consume quota. A client
that spends its budget through one replica is refused (429, error_code 42901,
Retry-After) through the other and through the balancer; another client is not;
and after the Retry-After the first client is admitted again.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from deploy.local.balancer import UPSTREAM_HEADER
from deploy.local.cluster import ClusterSpec, LocalCluster
from tests.e2e.test_cluster import FAST

BINARY = "application/vnd.kafka.binary.v2+json"
V2 = "application/vnd.kafka.v2+json"
RATE = 5_000  # bytes/s per client
BURST_S = 4  # the burst: 20 KB, refilled slowly, so that a debt outlasts a busy machine's next request


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = {
        **FAST,
        "BROKERGATE_QUOTA_CLIENT_PRODUCE_BYTES_PER_S": str(RATE),
        "BROKERGATE_QUOTA_CLIENT_CONSUME_BYTES_PER_S": str(RATE),
        "BROKERGATE_QUOTA_BURST_S": str(BURST_S),
    }
    spec = ClusterSpec(tmp_path_factory.mktemp("quota-cluster"), replicas=2, env=env)
    with LocalCluster(spec) as running:
        yield running


def produce(url: str, topic: str, api_key: str, size: int = 19_000) -> httpx.Response:
    value = base64.b64encode(b"x" * size).decode()
    return httpx.post(
        f"{url}/topics/{topic}",
        json={"records": [{"value": value, "partition": 0}]},
        headers={"Content-Type": BINARY, "X-API-Key": api_key},
        timeout=10,
    )


def assert_throttled(r: httpx.Response) -> float:
    assert r.status_code == 429, r.text
    assert r.json()["error_code"] == 42901
    retry_after = float(r.headers["Retry-After"])
    assert retry_after >= 1
    return retry_after


def spend(url: str, topic: str, api_key: str) -> tuple[int, httpx.Response]:
    """Produce as ``api_key`` until refused; the number of requests accepted, and the refusal."""
    accepted = 0
    while (r := produce(url, topic, api_key)).status_code == 200:
        accepted += 1
        assert accepted < 50, "the quota never refused anything"
    return accepted, r


def test_a_client_spending_its_budget_through_one_replica_is_throttled_through_the_other(
    cluster: LocalCluster,
) -> None:
    topic = f"q-{uuid.uuid4().hex[:8]}"
    first, second = (replica.url for replica in cluster.replicas)
    alice, bob = f"alice-{topic}", f"bob-{topic}"
    accepted, refused = spend(first, topic, alice)
    assert_throttled(refused)
    # 20 KB of burst: 19 KB, then 19 more into debt (3.6 s of it, long enough for the next
    # requests to find it unpaid on a busy machine), then no more
    assert accepted == 2
    assert_throttled(produce(second, topic, alice))  # the same bucket, seen from the other replica
    assert produce(second, topic, bob).status_code == 200  # clients have buckets of their own

    _, refused = spend(cluster.url, topic, alice)  # through the balancer: whichever replica answers
    retry_after = assert_throttled(refused)
    assert refused.headers.get(UPSTREAM_HEADER)
    time.sleep(retry_after)
    assert produce(second, topic, alice).status_code == 200  # refilled, for every replica


def test_consume_is_charged_the_bytes_a_poll_returned(cluster: LocalCluster) -> None:
    topic = f"q-{uuid.uuid4().hex[:8]}"
    first, second = (replica.url for replica in cluster.replicas)
    for i in range(3):  # 57 KB, written by several producers to stay within their own quotas
        assert produce(first, topic, f"writer-{i}-{topic}").status_code == 200
    reader = f"reader-{topic}"
    headers = {"Content-Type": V2, "X-API-Key": reader}
    group = f"g-{topic}"
    created = httpx.post(
        f"{first}/consumers/{group}",
        json={"format": "binary", "auto.offset.reset": "earliest"},
        headers=headers,
    ).json()
    path = f"/consumers/{group}/instances/{created['instance_id']}"
    httpx.post(f"{first}{path}/subscription", json={"topics": [topic]}, headers=headers)
    got = 0
    statuses = []
    for url in [first, second] * 10:  # polls alternate replicas; the bytes add up in one bucket
        r = httpx.get(
            f"{url}{path}/records?timeout=2000&max_bytes=16000",
            headers={"Accept": BINARY, "X-API-Key": reader},
            timeout=10,
        )
        statuses.append(r.status_code)
        if r.status_code == 429:
            assert_throttled(r)
            break
        got += len(r.json())
    assert 429 in statuses and got >= 2, statuses  # the burst was delivered, then the bill came
    httpx.delete(f"{first}{path}", headers=headers)
