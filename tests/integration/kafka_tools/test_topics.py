"""Topics and their configs made by Kafka's tools or by the gateway are seen alike by the other."""

from __future__ import annotations

import asyncio
import time

from deploy.local.kafka_broker import KafkaBroker
from deploy.local.kafka_tools import run_tool
from tests.conftest import RunningGateway
from tests.helpers import cluster_id, create_topic


def described(out: str) -> dict[str, dict[str, str]]:
    """topic -> {PartitionCount, ReplicationFactor, Configs} from ``kafka-topics --describe``."""
    topics: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        if line.startswith("Topic:") and "PartitionCount:" in line:
            cells = dict(cell.split(": ", 1) for cell in line.strip().split("\t") if ": " in cell)
            topics[cells["Topic"]] = cells
    return topics


async def configs_seen(gw: RunningGateway, topic: str, name: str, value: str) -> dict[str, str]:
    """The topic's configs as the gateway gives them, once ``name`` shows ``value`` (its metadata
    is cached briefly)."""
    cid = await cluster_id(gw.client)
    deadline = time.monotonic() + 15
    while True:
        r = await gw.client.get(f"/v3/clusters/{cid}/topics/{topic}")
        assert r.status_code == 200, r.text
        configs = dict(r.json()["configs"])
        if configs.get(name) == value or time.monotonic() > deadline:
            return configs
        await asyncio.sleep(0.2)


async def test_topics_and_configs_made_on_either_side(
    kafka_gateway: RunningGateway, kafka_broker: KafkaBroker, name: str
) -> None:
    client = kafka_gateway.client
    bootstrap = ("--bootstrap-server", kafka_broker.bootstrap)
    theirs, ours = f"{name}-tool", f"{name}-http"

    # made by Kafka's tool: the gateway sees its partitions and configs
    await run_tool(
        "kafka-topics",
        *bootstrap,
        *("--create", "--topic", theirs, "--partitions", "3", "--config", "retention.ms=123456789"),
    )
    cid = await cluster_id(client)
    r = await client.get(f"/v3/clusters/{cid}/topics/{theirs}")
    assert r.status_code == 200, r.text
    assert r.json()["partitions_count"] == 3
    assert r.json()["configs"]["retention.ms"] == "123456789"
    assert len((await client.get(f"/topics/{theirs}")).json()["partitions"]) == 3

    # made by the gateway, then altered by Kafka's tool: each sees the other's
    await create_topic(client, ours, 2, cleanup_policy="compact", max_message_bytes="200000")
    await run_tool(
        "kafka-configs",
        *bootstrap,
        *("--alter", "--entity-type", "topics", "--entity-name", ours, "--add-config", "retention.ms=987654"),
    )
    out = await run_tool("kafka-topics", *bootstrap, "--describe", "--topic", f"{name}-.*")
    topics = described(out)
    assert topics[ours]["PartitionCount"] == "2", out
    assert set(topics[ours]["Configs"].split(",")) >= {
        "cleanup.policy=compact",
        "max.message.bytes=200000",
        "retention.ms=987654",
    }, out
    assert topics[theirs]["PartitionCount"] == "3" and "retention.ms=123456789" in topics[theirs]["Configs"]
    configs = await configs_seen(kafka_gateway, ours, "retention.ms", "987654")
    assert configs["retention.ms"] == "987654" and configs["cleanup.policy"] == "compact"
