"""On a Kafka log the group listing holds every consumer group of the cluster, native consumers'
too; the leader's metadata refresh looks only at the groups the gateway coordinates, so a cluster
with thousands of native groups costs it nothing. Counted through the gateway's own
``Coordinator`` port (a wrapper passed in as ``create_app``'s ports), so what is counted is what
the gateway asked of its coordinator."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from deploy.local.kafka_broker import KafkaBroker
from service.adapters.kafka.group_offsets import KafkaGroupOffsets
from service.adapters.kafka.options import KafkaOptions
from service.core.models import TopicPartition
from service.server.backends import build_ports
from service.settings import Settings
from tests.conftest import KAFKA_TEST_SETTINGS, kafka_settings, start_gateway
from tests.helpers import STRING, cluster_id, consumer, create_topic, subscribe


class _CountingCoordinator:
    """The gateway's coordinator, counting the looks at each group (its members, its generation)."""

    def __init__(self, coordinator: Any) -> None:
        self._coordinator = coordinator
        self.looks: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._coordinator, name)

    async def members(self, group: str) -> Any:
        self.looks[group] += 1
        return await self._coordinator.members(group)

    async def state(self, group: str) -> Any:
        self.looks[group] += 1
        return await self._coordinator.state(group)


async def test_the_leaders_refresh_looks_at_no_native_group(
    tmp_path: Path, kafka_broker: KafkaBroker, name: str
) -> None:
    settings = Settings(data_dir=tmp_path / "data", log=kafka_broker.url, **KAFKA_TEST_SETTINGS)  # type: ignore[arg-type]
    log, coordinator, sessions = build_ports(settings)
    counting = _CountingCoordinator(coordinator)
    gw = await start_gateway(
        tmp_path / "data",
        ports=(log, counting, sessions),  # type: ignore[arg-type]
        metadata_refresh_ms=100,
        **kafka_settings(kafka_broker),
    )
    try:
        client = gw.client
        await create_topic(client, name, 1)
        # Groups only Kafka knows: offsets committed as Kafka's tools and admin client commit them.
        natives = [f"native-{name}-{n}" for n in range(20)]
        async with KafkaGroupOffsets(kafka_broker.url, KafkaOptions(request_timeout_ms=5_000)) as offsets:
            for group in natives:
                await offsets.commit(group, [(TopicPartition(name, 0), 0)])
        mine = f"g-{name}"
        base = await consumer(client, mine, reset="latest")
        await subscribe(client, base, name)
        r = await client.get(f"{base}/records", params={"timeout": 0}, headers={"Accept": STRING})
        assert r.status_code == 200, r.text
        # The group listing has them all (the refresh would have them to walk)...
        r = await client.get(f"/v3/clusters/{await cluster_id(client)}/consumer-groups")
        assert r.status_code == 200, r.text
        listed = {g["consumer_group_id"] for g in r.json()["data"]}
        assert set(natives) | {mine} <= listed

        # ...and the refreshes that follow a change of the topics look at the gateway's group only
        counting.looks.clear()
        for n in range(3):
            looked = counting.looks[mine]
            await create_topic(client, f"{name}-more-{n}", 1)  # the world changed: the leader walks
            for _ in range(300):
                if counting.looks[mine] > looked:
                    break
                await asyncio.sleep(0.1)
            assert counting.looks[mine] > looked, "no refresh walked the groups"
        assert {g: counting.looks[g] for g in natives if counting.looks[g]} == {}
    finally:
        await gw.client.aclose()
        await gw.stop()
