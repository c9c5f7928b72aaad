"""Records produced through the REST API in the ``avro`` format, by schema id, are stored byte for
byte as confluent-kafka's ``AvroSerializer`` writes the same values, with the gateway's
``/schema-registry`` as its registry: 500 records of a schema holding every kind of Avro type
(``tests.unit.schemas.avro_values``), in a small request (encoded on the event loop) and a large
one (encoded in a worker thread), read back in the binary format.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from service.api.topics import OFF_LOOP_SCHEMA_BYTES
from tests.conftest import RunningGateway
from tests.helpers import BINARY, create_topic, unb64
from tests.unit.schemas.avro_values import EVERY_TYPE_TEXT, Values, every_type

AVRO = "application/vnd.kafka.avro.v2+json"


async def test_an_avro_produce_by_schema_id_stores_what_confluents_serializer_writes(
    gateway: RunningGateway, name: str
) -> None:
    client = gateway.client
    await create_topic(client, name, 1)
    values = Values(every_type(), random.Random(25))
    pairs = [values.value() for _ in range(500)]
    registry = SchemaRegistryClient({"url": f"{gateway.url}/schema-registry"})
    serialize = AvroSerializer(registry, EVERY_TYPE_TEXT)  # registers the schema under {name}-value
    context = SerializationContext(name, MessageField.VALUE)

    def confluents() -> list[bytes]:
        return [bytes(serialize(datum, context)) for _, datum in pairs]

    expected = await asyncio.to_thread(confluents)
    schema_id = int.from_bytes(expected[0][1:5], "big")
    for part in (pairs[:20], pairs[20:]):
        body: dict[str, Any] = {"value_schema_id": schema_id, "records": [{"value": j} for j, _ in part]}
        r = await client.post(f"/topics/{name}", json=body, headers={"Content-Type": AVRO})
        assert r.status_code == 200, r.text[:500]
        assert r.json()["value_schema_id"] == schema_id
        assert len(r.request.content) < OFF_LOOP_SCHEMA_BYTES["avro"] or len(part) > 20
    stored: list[bytes] = []
    while len(stored) < len(pairs):
        r = await client.get(
            f"/topics/{name}/partitions/0/records",
            params={"offset": len(stored), "max_bytes": 4 * 1024 * 1024},
            headers={"Accept": BINARY},
        )
        assert r.status_code == 200, r.text[:500]
        stored += [unb64(record["value"]) or b"" for record in r.json()["records"]]
    assert len(stored) == len(expected)
    for i, (mine, theirs) in enumerate(zip(stored, expected, strict=True)):
        assert mine == theirs, f"record {i}: {pairs[i][0]!r}"
