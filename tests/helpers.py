"""Small request helpers the API tests share (each asserts the call succeeded)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from deploy.local.process import free_port
from service.core.models import GroupState, InstanceConfig, InstanceState, TopicPartition
from service.core.ports import Coordinator

BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"
STRING = "application/vnd.kafka.string.v2+json"
V2 = "application/vnd.kafka.v2+json"


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def unb64(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data)


async def create_topic(
    client: httpx.AsyncClient, topic: str, partitions: int = 1, **configs: str
) -> dict[str, Any]:
    cluster = (await client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
    body = {
        "topic_name": topic,
        "partitions_count": partitions,
        "configs": [{"name": k.replace("_", "."), "value": v} for k, v in configs.items()],
    }
    r = await client.post(f"/v3/clusters/{cluster}/topics", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


async def cluster_id(client: httpx.AsyncClient) -> str:
    return str((await client.get("/v3/clusters")).json()["data"][0]["cluster_id"])


async def produce(
    client: httpx.AsyncClient,
    topic: str,
    records: list[dict[str, Any]],
    *,
    fmt: str = STRING,
    partition: int | None = None,
) -> list[dict[str, Any]]:
    url = f"/topics/{topic}" if partition is None else f"/topics/{topic}/partitions/{partition}"
    r = await client.post(url, json={"records": records}, headers={"Content-Type": fmt})
    assert r.status_code == 200, r.text
    offsets = r.json()["offsets"]
    assert all(o["error_code"] is None for o in offsets), offsets
    return list(offsets)


async def consumer(
    client: httpx.AsyncClient, group: str, *, fmt: str = "string", reset: str = "earliest", **extra: Any
) -> str:
    body = {"format": fmt, "auto.offset.reset": reset, **extra}
    r = await client.post(f"/consumers/{group}", json=body, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text
    return str(r.json()["base_uri"])


async def subscribe(client: httpx.AsyncClient, base: str, *topics: str, pattern: str | None = None) -> None:
    body: dict[str, Any] = {"topic_pattern": pattern} if pattern else {"topics": list(topics)}
    r = await client.post(f"{base}/subscription", json=body, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text


async def poll(
    client: httpx.AsyncClient, base: str, *, fmt: str = STRING, timeout: int = 200, **params: Any
) -> list[dict[str, Any]]:
    r = await client.get(f"{base}/records", params={"timeout": timeout, **params}, headers={"Accept": fmt})
    assert r.status_code == 200, r.text
    return list(r.json())


async def poll_until(
    client: httpx.AsyncClient, base: str, count: int, *, fmt: str = STRING, deadline_s: float = 15
) -> list[dict[str, Any]]:
    """Poll until at least ``count`` records arrived (or the deadline passed); returns them all."""
    got: list[dict[str, Any]] = []
    end = time.monotonic() + deadline_s
    while len(got) < count and time.monotonic() < end:
        got.extend(await poll(client, base, fmt=fmt, timeout=500))
    return got


async def commit(
    client: httpx.AsyncClient, base: str, offsets: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    kwargs: dict[str, Any] = {"headers": {"Content-Type": V2}}
    if offsets is not None:
        kwargs["json"] = {"offsets": offsets}
    r = await client.post(f"{base}/offsets", **kwargs)
    assert r.status_code == 200, r.text
    return list(r.json())


async def assignment(client: httpx.AsyncClient, base: str) -> list[tuple[str, int]]:
    r = await client.get(f"{base}/assignments")
    assert r.status_code == 200, r.text
    return [(p["topic"], p["partition"]) for p in r.json()["partitions"]]


def instance(
    group: str = "g", name: str = "c", *, last_seen_ms: int = 1000, timeout_ms: int = 500
) -> InstanceState:
    """A consumer instance's state as the sessions tests store it."""
    return InstanceState(
        group=group,
        name=name,
        config=InstanceConfig(instance_timeout_ms=timeout_ms),
        created_ms=last_seen_ms,
        last_seen_ms=last_seen_ms,
    )


async def own(c: Coordinator, group: str, member: str, tps: list[TopicPartition], gen: int = 1) -> None:
    """Publish a generation ``gen`` in which ``member`` owns ``tps`` (and has since ``gen``)."""
    state = await c.state(group)
    new = GroupState(gen, {member: tps}, dict.fromkeys(tps, gen), {}, state.version)
    assert await c.publish(group, new, expected_version=state.version)


def wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    """Return once ``check()`` holds; fail the test if it does not within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def serve_until_exit(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``brokergate serve`` configured through the environment only, as a container runs it, on a
    free port with its data in ``tmp_path``: for starts that must fail (it runs until it exits)."""
    return subprocess.run(
        [sys.executable, "-m", "service", "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "BROKERGATE_DATA_DIR": str(tmp_path / "data"),
            "BROKERGATE_PORT": str(free_port()),
            **env,
        },
    )
