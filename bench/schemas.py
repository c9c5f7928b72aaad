"""Benchmark Avro through the gateway: against the JSON format, and against confluent-kafka's own
serializing producer and deserializing consumer, on the same broker, in one run.

    .venv/bin/python bench/schemas.py [--bootstrap host:port | --cluster] [--seconds 2] [--rounds 3]
                                      [--clients 4] [--batch 500] [--produce-only]
    .venv/bin/python bench/schemas.py --stages [--batch 500]

Without ``--bootstrap`` it starts Apache Kafka here (one KRaft broker, three with ``--cluster``),
then ``brokergate serve --log kafka://…`` (whose ``/schema-registry`` is the
registry of both sides). The record is an order of five fields, about 90 bytes as JSON and 40
as Avro. Figures, records/s:

  produce: REST ``POST /topics/{t}`` of 500 records a request, 4 keep-alive clients, in the
           ``json`` format and in the ``avro`` format (``value_schema_id``); confluent-kafka's
           ``Producer`` with its ``AvroSerializer`` serializing and sending the same records,
           one ``produce()`` each, flushed every 500 (idempotent, acks=all);
  consume: a REST consumer instance long-polling through N records in the ``json`` format and
           in the ``avro`` format (decoded to JSON by the gateway); confluent-kafka's
           ``Consumer`` with its ``AvroDeserializer`` reading and decoding the same Avro records.

Each round measures every side back to back (the two REST formats in turns, one first in a round,
the other in the next), and each ratio is the median over rounds of the ratio within a round, so
load that drifts hits both sides of a ratio alike. Beside records/s, the CPU the gateway process
used per produced record: other work on the machine moves it less than it moves records/s.

``--stages`` times, in this process and without a broker, the stages where the two formats'
produce requests differ: parsing the body, and turning each record's value into the bytes stored.
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
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import httpx
import orjson
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    add_kafka_options,
    cpu_seconds,
    create_topic,
    kafka_bootstrap,
    run_for,
    start_gateway,
)
from bench.httpload import Connection  # noqa: E402
from service.api.bodies import loads  # noqa: E402
from service.core.schemas.formats import parse  # noqa: E402
from service.core.schemas.model import Schema, SchemaType  # noqa: E402
from service.core.schemas.serde import Writer  # noqa: E402
from service.wire.formats import V2, content_type_for, holds_float, loads_exact  # noqa: E402
from service.wire.records import encode_produce, parse_produce, schema_choice  # noqa: E402

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


async def rest_produce(
    gateway: int,
    port: int,
    topic: str,
    media_type: str,
    body: bytes,
    batch: int,
    clients: int,
    seconds: float,
) -> tuple[float, float]:
    """Records/s of ``clients`` connections sending ``body`` (``batch`` records), and the CPU the
    gateway process (pid ``gateway``) spent per record meanwhile, in microseconds."""
    conns = [Connection("127.0.0.1", port) for _ in range(clients)]
    for conn in conns:
        await conn.__aenter__()
    request = conns[0].build("POST", f"/topics/{topic}", body, media_type)

    async def one(n: int) -> int:
        status, payload = await conns[n].send(request)
        assert status == 200, payload[:300]
        return batch

    try:
        cpu = cpu_seconds(gateway)
        records, elapsed = await run_for(seconds, clients, one)
        cpu = cpu_seconds(gateway) - cpu
    finally:
        for conn in conns:
            await conn.__aexit__()
    return records / elapsed, cpu / records * 1e6


def confluent_produce(bootstrap: str, registry_url: str, topic: str, batch: int, seconds: float) -> float:
    """Records/s of confluent-kafka serializing with Avro and producing, flushed every ``batch``."""
    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), SCHEMA)
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    sent = 0
    start = time.perf_counter()
    stop = start + seconds
    while time.perf_counter() < stop:
        for _ in range(batch):
            producer.produce(topic, serialize(dict(ORDER), context), partition=0)
        producer.flush(30)
        sent += batch
    return sent / (time.perf_counter() - start)


async def rest_consume(
    http: httpx.AsyncClient, port: int, topic: str, fmt: Literal["json", "avro"], count: int
) -> float:
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


async def run(args: argparse.Namespace, bootstrap: str, gateway: int, port: int) -> None:
    registry_url = f"http://127.0.0.1:{port}/schema-registry"
    rates: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}

    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        for topic in ("bench-json", "bench-avro", "bench-cf"):
            await create_topic(http, topic)
        r = await http.post(
            "/topics/bench-avro",
            json={"value_schema": SCHEMA, "records": [{"value": ORDER}]},
            headers={"Content-Type": AVRO},
        )
        schema_id = r.json()["value_schema_id"]
        records = [{"value": ORDER}] * args.batch
        bodies = {
            "json": ("bench-json", JSON, orjson.dumps({"records": records})),
            "avro": ("bench-avro", AVRO, orjson.dumps({"value_schema_id": schema_id, "records": records})),
        }
        for rnd in range(args.rounds):
            got: dict[str, float] = {}
            # json first in even rounds, avro first in odd ones: neither side always runs warmer
            for fmt in ("json", "avro") if rnd % 2 == 0 else ("avro", "json"):
                topic, media_type, body = bodies[fmt]
                got[f"produce {fmt}"], used = await rest_produce(
                    gateway, port, topic, media_type, body, args.batch, args.clients, args.seconds
                )
                cpu.setdefault(f"produce {fmt}", []).append(used)
            got["produce confluent-kafka"] = await asyncio.to_thread(
                confluent_produce, bootstrap, registry_url, "bench-cf", args.batch, args.seconds
            )
            ratios.setdefault("produce avro/json, gateway CPU", []).append(
                cpu["produce json"][-1] / cpu["produce avro"][-1]
            )
            if not args.produce_only:
                got["consume json"] = await rest_consume(http, port, "bench-json", "json", args.consume)
                got["consume avro"] = await rest_consume(http, port, "bench-avro", "avro", args.consume)
                got["consume confluent-kafka"] = await asyncio.to_thread(
                    confluent_consume, bootstrap, registry_url, "bench-avro", args.consume
                )
            for name, rate in got.items():
                rates.setdefault(name, []).append(rate)
            for what in ("produce",) if args.produce_only else ("produce", "consume"):
                avro = got[f"{what} avro"]
                ratios.setdefault(f"{what} avro/json", []).append(avro / got[f"{what} json"])
                ratios.setdefault(f"{what} avro/confluent-kafka", []).append(
                    avro / got[f"{what} confluent-kafka"]
                )
            print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    print("records/s, median of rounds")
    for name, values in rates.items():
        print(f"  {name:<26} {statistics.median(values):>10,.0f}")
    print("gateway CPU per produced record, median of rounds")
    for name, values in cpu.items():
        print(f"  {name:<26} {statistics.median(values):>8.2f} us")
    print("ratios, median of per-round ratios (min-max)")
    for name, values in ratios.items():
        print(f"  {name:<30} {statistics.median(values):5.2f} ({min(values):.2f}-{max(values):.2f})")


def stages(batch: int) -> None:
    """Microseconds per request and per record of each stage where a ``batch``-record produce
    request in the json format and one in the avro format (by schema id) differ."""
    body = {"records": [{"value": ORDER}] * batch}
    json_body, avro_body = orjson.dumps(body), orjson.dumps({"value_schema_id": 1, **body})
    codec = parse(Schema(SchemaType.AVRO, SCHEMA), {}).codec()
    writer = Writer(1, SchemaType.AVRO, codec)
    limits = {"max_record_bytes": 1 << 20, "max_records": 100_000, "max_headers": 100}
    as_json = loads(json_body, records=True, max_depth=64)
    exact = loads_exact(json_body)
    as_avro = loads(avro_body, records=True, max_depth=64)
    steps: list[tuple[str, Callable[[], object]]] = [
        ("json  parse the body (orjson)", lambda: loads(json_body, records=True, max_depth=64)),
        (
            "json  a float in it: parse it again, exactly",
            lambda: holds_float(as_json) and loads_exact(json_body),
        ),
        ("json  records: each value as JSON text", lambda: parse_produce(exact, "json", **limits)),
        ("avro  parse the body (orjson)", lambda: loads(avro_body, records=True, max_depth=64)),
        ("avro  the schema ids", lambda: schema_choice(as_avro)),
        (
            "avro  records: each value encoded, framed",
            lambda: encode_produce(as_avro, None, writer.encode, **limits),
        ),
        ("avro    of which the codec", lambda: [codec.encode(ORDER) for _ in range(batch)]),
    ]
    print(f"{batch}-record produce request, in process: microseconds per request (per record), best of 7")
    for name, step in steps:
        step()
        best = min(_timed(step, 20) for _ in range(7))
        print(f"  {name:<48} {best * 1e6:8.0f} ({best * 1e6 / batch:.2f})")
    on_loop, threaded = asyncio.run(_hand_off(lambda: encode_produce(as_avro, None, writer.encode, **limits)))
    print(
        f"  {'avro  records, 4 requests at once, CPU:':<48} {on_loop * 1e6:8.0f} on the event loop, "
        f"{threaded * 1e6:.0f} each in a worker thread"
    )


def _timed(step: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - start) / n


async def _hand_off(step: Callable[[], object], requests: int = 200) -> tuple[float, float]:
    """CPU seconds per call of ``step`` made by 4 concurrent tasks, on the loop and through
    ``asyncio.to_thread``, as the produce route runs a body's encoding below and above its threshold."""

    async def measure(threaded: bool) -> float:
        async def task() -> None:
            for _ in range(requests // 4):
                if threaded:
                    await asyncio.to_thread(step)
                else:
                    step()
                await asyncio.sleep(0)

        cpu = time.process_time()
        await asyncio.gather(*(task() for _ in range(4)))
        return (time.process_time() - cpu) / requests

    results = {False: [], True: []}  # type: dict[bool, list[float]]
    for _ in range(3):
        for threaded in (False, True):
            results[threaded].append(await measure(threaded))
    return min(results[False]), min(results[True])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of each produce figure")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4, help="concurrent REST produce clients")
    parser.add_argument("--batch", type=int, default=500, help="records per produce request")
    parser.add_argument("--produce-only", action="store_true", help="leave out the consume figures")
    parser.add_argument("--consume", type=int, default=20_000, help="records per consume figure")
    parser.add_argument("--stages", action="store_true", help="time the stages in process, then stop")
    add_kafka_options(parser)
    args = parser.parse_args()
    if args.stages:
        stages(args.batch)
        return
    gateway = None
    with kafka_bootstrap(args) as kafka, tempfile.TemporaryDirectory() as tmp:
        bootstrap = kafka.bootstrap
        try:
            gateway, port = start_gateway(Path(tmp), "--log", f"kafka://{bootstrap}")
            print(
                f"Avro through brokergate on kafka://{bootstrap}: {args.clients} REST clients, "
                f"{args.seconds:g} s per produce figure, {args.consume:,} records per consume figure, "
                f"{args.rounds} rounds\n"
            )
            asyncio.run(run(args, bootstrap, gateway.pid, port))
        finally:
            if gateway is not None:
                gateway.terminate()
                gateway.wait(15)


if __name__ == "__main__":
    main()
