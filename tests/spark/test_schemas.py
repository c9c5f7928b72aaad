"""Decoded columns: records in the schema-registry wire format read back as typed Spark columns.

Schemas are registered with the embedded registry over the test's data dir (its ``_schemas``
topic, which the data source replays), values are framed with the registry's codecs; a gateway
serves the registry over HTTP for ``schemaRegistryUrl``, and on Kafka confluent-kafka's own
``AvroSerializer`` writes the records.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, Row, SparkSession

from deploy.local.kafka_broker import KafkaBroker
from service.core.models import NewRecord
from service.core.schemas.model import SchemaType
from service.core.schemas.wire import frame as framed
from spark_jobs.__main__ import parser
from spark_jobs.decode_options import ColumnOptions, DecodeOptions
from spark_jobs.export import PASSWORD_ENV, ExportOptions, decode_options_from, run_export
from spark_jobs.offsets import OptionError
from spark_jobs.progress import Progress
from tests.conftest import kafka_settings, start_gateway
from tests.helpers import create_topic

from .helpers import TestLog, TestRegistry

TS = 1_700_000_000_000
AT = datetime.fromtimestamp(TS / 1000, UTC)


def read(spark: SparkSession, log_url: str, topic: str, **options: Any) -> DataFrame:
    reader = spark.read.format("brokergate").option("log", log_url).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def rows(frame: DataFrame, *columns: str) -> list[Row]:
    return frame.orderBy("offset").select(*columns).collect()


@pytest.fixture
def embedded(tmp_path: Path) -> TestLog:
    data = tmp_path / "data"
    (data / "topics").mkdir(parents=True)
    return TestLog("embedded", str(data), tmp_path)


def produce(log: TestLog, topic: str, *pairs: tuple[bytes | None, bytes | None]) -> None:
    log.produce(topic, 0, [NewRecord(key, value, (), TS) for key, value in pairs])


# --- Avro ------------------------------------------------------------------------------------


def record(name: str, *fields: dict[str, Any], namespace: str = "com.acme") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": namespace, "fields": list(fields)})


LINE = {
    "type": "record",
    "name": "Line",
    "fields": [{"name": "sku", "type": "string"}, {"name": "n", "type": "int"}],
}
ORDER_FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "long"},
    {"name": "lines", "type": {"type": "array", "items": LINE}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "either", "type": ["null", "int", "string"], "default": None},
]
ORDER_V1 = record("Order", *ORDER_FIELDS)
ORDER_V2 = record("Order", *ORDER_FIELDS, {"name": "qty", "type": "int", "default": 1})  # evolution
ORDER_TYPE = (
    "struct<id:bigint,lines:array<struct<sku:string,n:int>>,attrs:map<string,bigint>,status:string,"
    "at:timestamp,day:date,price:decimal(9,2),note:string,either:struct<member0:int,member1:string>"
)


def order(i: int, **extra: Any) -> dict[str, Any]:
    """Order ``i`` as Avro JSON (a decimal's bytes as text of code points 0-255)."""
    return {
        "id": i,
        "lines": [{"sku": f"s{i}", "n": i}],
        "attrs": {"a": i},
        "status": "PAID" if i % 2 else "NEW",
        "at": TS + i,
        "day": 19_675 + i,
        "price": (1234 + i).to_bytes(2, "big").decode("latin-1"),
        "note": None if i % 2 else {"string": f"note {i}"},
        "either": {"int": i} if i % 2 else {"string": str(i)},
        **extra,
    }


def avro_topic(log: TestLog, registry: TestRegistry) -> tuple[str, int, int, int]:
    """A topic of v1 orders 0-1, a tombstone, v2 order 2; keys an Avro string. (topic, v1, v2, key)"""
    topic = log.create_topic(1)
    v1 = registry.register(f"{topic}-value", SchemaType.AVRO, ORDER_V1)
    key = registry.register(f"{topic}-key", SchemaType.AVRO, '"string"')
    produce(log, topic, *[(registry.framed(key, f"k{i}"), registry.framed(v1, order(i))) for i in range(2)])
    v2 = registry.register(f"{topic}-value", SchemaType.AVRO, ORDER_V2)
    produce(log, topic, (registry.framed(key, "gone"), None), (None, registry.framed(v2, order(2, qty=7))))
    return topic, v1, v2, key


def test_avro_values_and_keys_across_schema_versions(spark: SparkSession, embedded: TestLog) -> None:
    registry = TestRegistry(embedded)
    topic, v1, v2, key = avro_topic(embedded, registry)

    frame = read(spark, embedded.url, topic, valueFormat="avro", keyFormat="avro")
    base = ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]
    assert frame.columns == [*base, "key_schema_id", "value_schema_id"]
    # the latest version is the reader: its added field is in the type, filled with its default
    assert frame.schema["value"].dataType.simpleString() == ORDER_TYPE + ",qty:int>"
    assert frame.schema["key"].dataType.simpleString() == "string"
    value = frame.schema["value"].dataType
    assert not value["id"].nullable and value["note"].nullable
    got = rows(frame, "key", "key_schema_id", "value", "value_schema_id")
    assert [(r.key, r.key_schema_id, r.value_schema_id) for r in got] == [
        ("k0", key, v1),
        ("k1", key, v1),
        ("gone", key, None),
        (None, None, v2),
    ]
    first, second, tombstone, third = (r.value for r in got)
    assert tombstone is None
    decoded = first.asDict(recursive=True)
    assert decoded.pop("at").timestamp() == AT.timestamp()
    assert decoded == {
        "id": 0,
        "lines": [{"sku": "s0", "n": 0}],
        "attrs": {"a": 0},
        "status": "NEW",
        "day": date(2023, 11, 14),
        "price": Decimal("12.34"),
        "note": "note 0",
        "either": {"member0": None, "member1": "0"},
        "qty": 1,
    }
    assert (second.qty, second.note, second.either.member0, second.price) == (1, None, 1, Decimal("12.35"))
    assert (third.id, third.qty, third.status) == (2, 7, "NEW")

    # pinned to version 1: the v2 record is resolved to it (its new field dropped)
    pinned = read(spark, embedded.url, topic, valueFormat="avro", valueSchemaVersion=1)
    assert pinned.schema["value"].dataType.simpleString() == ORDER_TYPE + ">"
    assert pinned.schema["key"].dataType.simpleString() == "binary"
    assert [r.value.id if r.value else None for r in rows(pinned, "value")] == [0, 1, None, 2]
    by_id = read(spark, embedded.url, topic, valueFormat="avro", valueSchemaId=v1)
    assert by_id.schema["value"].dataType == pinned.schema["value"].dataType


def test_avro_values_of_a_top_level_bytes_schema_are_the_bytes_after_the_header(
    spark: SparkSession, embedded: TestLog
) -> None:
    """As Confluent's serializers frame them: the bytes alone, no Avro length before them; read as
    the writer's type or resolved to another reader (bytes to string), a logical type applied."""
    registry = TestRegistry(embedded)
    topic = embedded.create_topic(1)
    writer = registry.register(f"{topic}-value", SchemaType.AVRO, '"bytes"')
    as_text = registry.register(f"{topic}-text", SchemaType.AVRO, '"string"')
    blobs = [b"\x04ab", "h\u00e9llo".encode(), b""]  # the first is "ab" to Avro's length-prefixed form
    produce(embedded, topic, *[(None, framed(writer, blob)) for blob in blobs])
    frame = read(spark, embedded.url, topic, valueFormat="avro")
    assert frame.schema["value"].dataType.simpleString() == "binary"
    assert [bytes(r.value) for r in rows(frame, "value")] == blobs
    text = read(spark, embedded.url, topic, valueFormat="avro", valueSchemaId=as_text)
    assert [r.value for r in rows(text, "value")] == [b.decode() for b in blobs]

    decimals = embedded.create_topic(1)
    money = {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}
    price = registry.register(f"{decimals}-value", SchemaType.AVRO, json.dumps(money))
    produce(
        embedded, decimals, *[(None, framed(price, n.to_bytes(2, "big", signed=True))) for n in (1234, -5)]
    )
    got = rows(read(spark, embedded.url, decimals, valueFormat="avro"), "value")
    assert [r.value for r in got] == [Decimal("12.34"), Decimal("-0.05")]


def test_export_writes_decoded_columns_as_nested_parquet(
    spark: SparkSession, embedded: TestLog, tmp_path: Path
) -> None:
    registry = TestRegistry(embedded)
    topic, _, v2, _ = avro_topic(embedded, registry)
    out = tmp_path / "export"
    decode = DecodeOptions(value=ColumnOptions("value", "avro"), key=ColumnOptions("key", "avro"))
    options = ExportOptions(log=embedded.url, topic=topic, output=out, decode=decode)
    summary = run_export(spark, options, Progress("export", out=io.StringIO(), summary_out=io.StringIO()))
    assert (summary.records, summary.bytes) == (4, None)

    written = spark.read.parquet(str(out))
    assert written.schema["value"].dataType.simpleString() == ORDER_TYPE + ",qty:int>"
    got = written.orderBy("offset").select("key", "value.lines.sku", "value.qty", "value_schema_id").collect()
    assert [tuple(r) for r in got] == [
        ("k0", ["s0"], 1, got[0].value_schema_id),
        ("k1", ["s1"], 1, got[1].value_schema_id),
        ("gone", None, None, None),
        (None, ["s2"], 7, v2),
    ]


def test_export_flags_are_the_data_sources_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``python -m spark_jobs export`` (and ``brokergate worker spark --job export``) passes on."""
    common = ["export", "--topic", "orders", "--output", "out"]
    args = parser().parse_args(
        [
            *common,
            "--value-format=avro",
            "--value-schema-version=3",
            "--key-format=jsonschema",
            "--key-schema-id=7",
            "--schema-registry-url=https://registry:8081",
            "--schema-registry-user=spark",
            "--on-decode-error=null",
        ]
    )
    monkeypatch.setenv(PASSWORD_ENV, "s3cret")
    decode = decode_options_from(args)
    assert decode.as_options() == {
        "valueFormat": "avro",
        "valueSchemaVersion": "3",
        "keyFormat": "jsonschema",
        "keySchemaId": "7",
        "schemaRegistryUrl": "https://registry:8081",
        "schemaRegistryUser": "spark",
        "schemaRegistryPassword": "s3cret",
        "onDecodeError": "null",
    }
    assert "s3cret" not in repr(decode) and "s3cret" not in repr(decode.registry("./data"))
    assert decode_options_from(parser().parse_args(common)).as_options() == {}  # binary: as before
    with pytest.raises(OptionError, match="schemaRegistryUrl: nothing is decoded"):
        decode_options_from(parser().parse_args([*common, "--schema-registry-url=http://r"]))


# --- JSON Schema and Protobuf ----------------------------------------------------------------

PERSON = json.dumps(
    {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "score": {"type": ["number", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "address": {"$ref": "#/$defs/address"},
            "extra": {},
        },
        "required": ["id"],
        "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }
)
PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  int64 id = 1;
  Customer customer = 2;
  repeated Line lines = 3;
  map<string, int32> attrs = 4;
  Status status = 5;
  google.protobuf.Timestamp at = 6;
  optional string note = 7;
  uint64 big = 8;
  message Line { string sku = 1; int32 n = 2; }
}
message Customer { string name = 1; }
enum Status { NEW = 0; PAID = 1; }
"""


def test_json_schema_and_protobuf_values(spark: SparkSession, embedded: TestLog) -> None:
    registry = TestRegistry(embedded)
    people = embedded.create_topic(1)
    person = registry.register(f"{people}-value", SchemaType.JSON, PERSON)
    numbers = registry.register(
        f"{people}-key", SchemaType.JSON, '{"type": "array", "items": {"type": "integer"}}'
    )
    full = {
        "id": 1,
        "name": "ann",
        "score": 2.5,
        "tags": ["a"],
        "address": {"city": "Oslo"},
        "extra": {"k": [1]},
    }
    produce(
        embedded,
        people,
        (registry.framed(numbers, [1, 2]), registry.framed(person, full)),
        (None, registry.framed(person, {"id": 2})),
    )
    frame = read(spark, embedded.url, people, valueFormat="jsonschema", keyFormat="jsonschema")
    assert frame.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,name:string,score:double,tags:array<string>,address:struct<city:string>,extra:string>"
    )
    assert frame.schema["key"].dataType.simpleString() == "string"  # not an object: its JSON text
    got = rows(frame, "key", "value")
    assert got[0].key == "[1,2]"
    assert got[0].value.asDict(recursive=True) == {**full, "address": {"city": "Oslo"}, "extra": '{"k":[1]}'}
    assert got[1].value.asDict() == dict.fromkeys(["name", "score", "tags", "address", "extra"]) | {"id": 2}

    orders = embedded.create_topic(1)
    proto = registry.register(f"{orders}-value", SchemaType.PROTOBUF, PROTO)
    first = {
        "id": "1",
        "customer": {"name": "bob"},
        "lines": [{"sku": "s", "n": 2}],
        "attrs": {"x": 3},
        "status": "PAID",
        "at": "2023-11-14T22:13:20Z",
        "big": "18446744073709551615",
    }
    produce(
        embedded,
        orders,
        (None, registry.framed(proto, first)),
        (None, registry.framed(proto, {"note": "hi"})),
    )
    frame = read(spark, embedded.url, orders, valueFormat="protobuf")
    assert frame.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,customer:struct<name:string>,lines:array<struct<sku:string,n:int>>,"
        "attrs:map<string,int>,status:string,at:timestamp,note:string,big:decimal(20,0)>"
    )
    one, two = (r.value for r in rows(frame, "value"))
    assert (one.id, one.customer.name, one.lines[0].n, one.attrs, one.status, one.note) == (
        (1, "bob", 2, {"x": 3}, "PAID", None)
    )
    assert one.at.timestamp() == AT.timestamp() and one.big == Decimal(2**64 - 1)
    # unset: a message and an optional field are null, a proto3 scalar its default
    assert (two.id, two.customer, two.lines, two.status, two.at, two.note) == (0, None, [], "NEW", None, "hi")


# --- records that cannot be decoded, and options that cannot be used --------------------------


def test_undecodable_records_fail_the_job_or_read_as_null(spark: SparkSession, embedded: TestLog) -> None:
    registry = TestRegistry(embedded)
    topic = embedded.create_topic(1)
    good = registry.register(f"{topic}-value", SchemaType.AVRO, ORDER_V1)
    other = registry.register("elsewhere-value", SchemaType.JSON, PERSON)
    produce(
        embedded,
        topic,
        (None, registry.framed(good, order(0))),
        (None, b"plain text"),  # not the wire format
        (None, framed(4242, b"\x02")),  # an id the registry does not have
        (None, registry.framed(other, {"id": 1})),  # a JSON Schema record in an Avro column
        (None, framed(good, b"\x02")),  # the payload ends early
        (None, None),
    )

    with pytest.raises(PySparkException) as failure:
        read(spark, embedded.url, topic, valueFormat="avro").collect()
    message = str(failure.value)
    assert f"RecordDecodeError: {topic}-0 at offset 1: the value cannot be decoded" in message
    assert "magic byte 112" in message and "onDecodeError=null" in message

    frame = read(spark, embedded.url, topic, valueFormat="avro", onDecodeError="null")
    assert frame.columns[-2:] == ["value_schema_id", "value_error"]
    got = rows(frame, "value.id", "value_schema_id", "value_error")
    ids = [(0, good), (None, None), (None, 4242), (None, other), (None, good), (None, None)]
    assert [(r.id, r.value_schema_id) for r in got] == ids
    errors = [r.value_error for r in got]
    assert errors[0] is None and errors[5] is None
    assert "not in the schema-registry wire format: magic byte 112" in errors[1]
    assert "schema id 4242 is not in the registry topic '_schemas'" in errors[2]
    assert f"schema {other} is JSON, not AVRO" in errors[3]
    assert f"not Avro data of schema {good}" in errors[4]

    def planning_error(**options: Any) -> str:
        with pytest.raises(PySparkException) as failed:
            read(spark, embedded.url, topic, **options).schema  # noqa: B018
        return str(failed.value)

    assert "valueFormat: 'xml' is not binary, avro, jsonschema, protobuf" in planning_error(valueFormat="xml")
    assert "is JSON" in planning_error(valueFormat="avro", valueSubject="elsewhere-value")
    assert f"subject '{topic}-key' has no version latest" in planning_error(keyFormat="protobuf")


# --- a registry over HTTP, and Kafka ---------------------------------------------------------


async def test_schema_registry_url_of_a_gateway(spark: SparkSession, tmp_path: Path) -> None:
    """Schemas and records through a gateway's API; the data source asks its /schema-registry."""
    data = tmp_path / "data"
    gateway = await start_gateway(data)
    client = gateway.client
    try:
        topic = f"t-{uuid.uuid4().hex[:10]}"
        await create_topic(client, topic)
        r = await client.post(f"/schema-registry/subjects/{topic}-value/versions", json={"schema": ORDER_V2})
        assert r.status_code == 200, r.text
        schema_id = r.json()["id"]
        r = await client.post(
            f"/topics/{topic}",
            json={"value_schema_id": schema_id, "records": [{"value": order(i, qty=i)} for i in range(3)]},
            headers={"Content-Type": "application/vnd.kafka.avro.v2+json"},
        )
        assert r.status_code == 200, r.text

        url = f"{gateway.url}/schema-registry"
        frame = await asyncio.to_thread(
            read, spark, str(data), topic, valueFormat="avro", schemaRegistryUrl=url
        )
        got = await asyncio.to_thread(rows, frame, "value.id", "value.qty", "value_schema_id")
        assert [tuple(r) for r in got] == [(i, i, schema_id) for i in range(3)]

        nowhere = "http://127.0.0.1:9/schema-registry"
        with pytest.raises(
            PySparkException, match=r"cannot reach the schema registry at http://127\.0\.0\.1:9"
        ):
            await asyncio.to_thread(
                read, spark, str(data), topic, valueFormat="avro", schemaRegistryUrl=nowhere
            )
    finally:
        await client.aclose()
        await gateway.stop()


async def test_avro_on_kafka_from_confluent_serializers(
    spark: SparkSession, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """confluent-kafka's AvroSerializer registers with a gateway's registry (its registry topic on
    Kafka) and writes to the broker; the data source replays that topic, or asks the gateway."""
    settings = kafka_settings(kafka_broker)
    gateway = await start_gateway(tmp_path / "data", **settings)
    try:
        topic = f"t-{uuid.uuid4().hex[:10]}"
        await create_topic(gateway.client, topic)
        url = f"{gateway.url}/schema-registry"

        def send() -> None:
            serializer = AvroSerializer(SchemaRegistryClient({"url": url}), ORDER_V2)
            producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
            for i in range(3):
                fields = {"price": Decimal(i), "either": i, "note": None, "qty": i}
                value = serializer({**order(i), **fields}, SerializationContext(topic, MessageField.VALUE))
                producer.produce(topic, value=value, partition=0)
            producer.flush(10)

        await asyncio.to_thread(send)
        for options in (
            {"schemaRegistryTopic": settings["schema_registry_topic"]},
            {"schemaRegistryUrl": url},
        ):
            frame = await asyncio.to_thread(
                read, spark, kafka_broker.url, topic, valueFormat="avro", **options
            )
            got = await asyncio.to_thread(rows, frame, "value.id", "value.qty", "value.price", "value.either")
            assert [tuple(r) for r in got] == [
                (i, i, Decimal(i).quantize(Decimal("0.01")), Row(member0=i, member1=None)) for i in range(3)
            ]
    finally:
        await gateway.client.aclose()
        await gateway.stop()
