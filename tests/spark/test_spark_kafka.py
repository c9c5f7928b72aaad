"""The ``brokergate`` data source beside Spark's own Kafka source, on the same topics of a real Kafka.

Spark's Kafka source (``format("kafka")``, from ``spark-sql-kafka-0-10`` at pyspark's release, on
the suite's session through ``spark.jars``) is the reference: a batch read over the same offsets
or the same times, and a stream run to what is there, then again after more records came, give
the same rows (topic, partition, offset, key, value, timestamp, headers) from both. The columns
they share have the same names and types; what differs is said, and checked, here and in
docs/spark.md ("Beside Spark's Kafka source"): Spark's has a ``timestampType`` column more, and
gives a record without headers null headers where ``brokergate`` gives an empty array.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamReader

from deploy.local.kafka_broker import DEFAULT_USERS, KafkaBroker
from service.core.models import NewRecord

from .helpers import TestLog, records

T0 = 1_700_000_000_000
COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "headers")
DEADLINE_S = 120.0
Row = tuple[Any, ...]


def filled(broker: KafkaBroker) -> tuple[TestLog, str]:
    """A topic of two partitions on ``broker``: records with keys, headers and times; one without
    a key, one without a value (a tombstone), one with two headers, one with none."""
    log = TestLog("kafka", broker.url, Path())
    topic = log.create_topic(2)
    log.produce(topic, 0, records(6))
    log.produce(
        topic,
        1,
        [
            NewRecord(None, b"keyless", (("n", b"0"),), T0 + 500),
            NewRecord(b"k", None, (("n", b"1"),), T0 + 1500),
            NewRecord(b"k", b"two", (("a", b"1"), ("a", b"")), T0 + 2500),
            NewRecord(b"k", b"bare", (), T0 + 3500),
        ],
    )
    return log, topic


def sparks_kafka(reader: Any, broker: KafkaBroker, topic: str, **options: str) -> Any:
    """``reader`` (``spark.read`` or ``spark.readStream``) on Spark's Kafka source, with headers."""
    reader = reader.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    return reader.option("subscribe", topic).option("includeHeaders", "true").options(**options)


def brokergate(reader: Any, broker: KafkaBroker, topic: str, **options: str) -> Any:
    return reader.format("brokergate").option("log", broker.url).option("topic", topic).options(**options)


def as_rows(frame: DataFrame, *, null_headers_as_empty: bool = False) -> list[Row]:
    """The shared columns of every row, sorted by partition and offset; binary as bytes."""
    out = []
    for r in frame.select(*COLUMNS).collect():
        headers = r["headers"]
        if headers is None and null_headers_as_empty:
            headers = []
        shown = None if headers is None else tuple((h["key"], bytes(h["value"])) for h in headers)
        key, value = (None if r[c] is None else bytes(r[c]) for c in ("key", "value"))
        out.append((r["topic"], r["partition"], r["offset"], key, value, r["timestamp"], shown))
    return sorted(out, key=lambda row: (row[1], row[2]))


def test_the_columns_they_share_have_the_same_names_and_types(
    spark: SparkSession, kafka_broker: KafkaBroker
) -> None:
    _, topic = filled(kafka_broker)
    theirs = {f.name: f.dataType for f in sparks_kafka(spark.read, kafka_broker, topic).load().schema}
    ours = {f.name: f.dataType for f in brokergate(spark.read, kafka_broker, topic).load().schema}
    assert set(theirs) - set(ours) == {"timestampType"}
    assert {name: theirs[name] for name in ours} == ours


def test_a_batch_read_gives_the_same_rows(spark: SparkSession, kafka_broker: KafkaBroker) -> None:
    _, topic = filled(kafka_broker)
    theirs = as_rows(sparks_kafka(spark.read, kafka_broker, topic).load())
    ours = as_rows(brokergate(spark.read, kafka_broker, topic).load())
    assert len(ours) == 10
    # the one difference: a record without headers has null headers in Spark's, [] in ours
    bare = [i for i, row in enumerate(theirs) if row[6] is None]
    assert [theirs[i][4] for i in bare] == [b"bare"] and ours[bare[0]][6] == ()
    assert [row[:6] for row in theirs] == [row[:6] for row in ours]
    assert as_rows(sparks_kafka(spark.read, kafka_broker, topic).load(), null_headers_as_empty=True) == ours
    keyless, tombstone, two = ours[6:9]
    assert keyless[3] is None and tombstone[4] is None and two[6] == (("a", b"1"), ("a", b""))

    # the same offsets: per-partition JSON, -2 earliest and -1 latest, in both
    bounds = {
        "startingOffsets": json.dumps({topic: {"0": 2, "1": -2}}),
        "endingOffsets": json.dumps({topic: {"0": 5, "1": -1}}),
    }
    ranged = as_rows(brokergate(spark.read, kafka_broker, topic, **bounds).load())
    assert [(row[1], row[2]) for row in ranged] == [(0, 2), (0, 3), (0, 4)] + [(1, i) for i in range(4)]
    theirs = sparks_kafka(spark.read, kafka_broker, topic, **bounds).load()
    assert as_rows(theirs, null_headers_as_empty=True) == ranged

    # the same times: each partition from its first record at or after its time
    times = {
        "startingOffsetsByTimestamp": json.dumps({topic: {"0": T0 + 2500, "1": T0 + 1000}}),
        "endingOffsetsByTimestamp": json.dumps({topic: {"0": T0 + 4000, "1": T0 + 3000}}),
    }
    timed = as_rows(brokergate(spark.read, kafka_broker, topic, **times).load())
    assert [(row[1], row[2]) for row in timed] == [(0, 3), (1, 1), (1, 2)]
    theirs = sparks_kafka(spark.read, kafka_broker, topic, **times).load()
    assert as_rows(theirs, null_headers_as_empty=True) == timed


def test_signed_in_over_scram_both_read_the_same(spark: SparkSession, kafka_broker: KafkaBroker) -> None:
    _, topic = filled(kafka_broker)
    user, password = "brokergate", DEFAULT_USERS["brokergate"]
    theirs = sparks_kafka(
        spark.read,
        kafka_broker,
        topic,
        **{
            "kafka.bootstrap.servers": kafka_broker.sasl_bootstrap,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";',
        },
    ).load()
    ours = (
        spark.read.format("brokergate")
        .option("log", f"kafka://{kafka_broker.sasl_bootstrap}")
        .option("topic", topic)
        .options(
            kafkaSecurityProtocol="SASL_PLAINTEXT",
            kafkaSaslMechanism="SCRAM-SHA-512",
            kafkaSaslUsername=user,
            kafkaSaslPassword=password,
        )
        .load()
    )
    assert as_rows(theirs, null_headers_as_empty=True) == as_rows(ours)


def run_available_now(reader: DataStreamReader, checkpoint: Path) -> list[Row]:
    """The rows one ``trigger(availableNow=True)`` run of the stream reads, from its checkpoint on."""
    seen: list[Row] = []

    def keep(frame: DataFrame, batch_id: int) -> None:
        seen.extend(as_rows(frame, null_headers_as_empty=True))

    frame = reader.load()
    query = frame.writeStream.foreachBatch(keep).option("checkpointLocation", str(checkpoint))
    started = query.trigger(availableNow=True).start()
    finished = started.awaitTermination(DEADLINE_S)
    if not finished:
        started.stop()
    assert finished, "the query did not finish"
    return sorted(seen, key=lambda row: (row[1], row[2]))


def test_a_stream_reads_the_same_rows_and_resumes_alike(
    spark: SparkSession, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    log, topic = filled(kafka_broker)
    options = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "4"}

    def both() -> tuple[list[Row], list[Row]]:
        theirs = sparks_kafka(spark.readStream, kafka_broker, topic, **options)
        ours = brokergate(spark.readStream, kafka_broker, topic, **options)
        return run_available_now(theirs, tmp_path / "theirs"), run_available_now(ours, tmp_path / "ours")

    theirs, ours = both()
    assert len(ours) == 10 and theirs == ours
    log.produce(topic, 1, records(3, start=10))
    theirs, ours = both()  # from each checkpoint: the three new records only
    assert [(row[1], row[2]) for row in ours] == [(1, 4), (1, 5), (1, 6)]
    assert theirs == ours
