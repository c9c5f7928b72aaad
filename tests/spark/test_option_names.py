"""Options ``format("brokergate")`` does not take are refused where the query is defined, in one line.

The check on its own first (no Spark), then where Spark runs it: a read's options when it is
loaded, a stream's bad ones as its query starts (without Spark's own error over the reason), a
write's when it is saved, a streaming write's as its first micro-batch runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import SparkSession

from spark_jobs.datasource import SCHEMA
from spark_jobs.offsets import OptionError
from spark_jobs.option_names import READ, STREAM_READ, STREAM_WRITE, WRITE, Use
from spark_jobs.sink_options import SinkOptions
from spark_jobs.stream_source import StreamOptions

from .helpers import TestLog, records

DEADLINE_S = 120.0  # how long a query may take to fail: never reached when all is well
SOURCE = {"log": "./data", "topic": "orders"}


@pytest.mark.parametrize(
    ("use", "option", "said"),
    [
        (STREAM_READ, "maxOffsetPerTrigger", "did you mean maxOffsetsPerTrigger?"),
        (READ, "startingOffset", "did you mean startingOffsets?"),
        (WRITE, "maxRecordPerRequest", "did you mean maxRecordsPerRequest?"),
        (STREAM_WRITE, "gatewayUser", "did you mean gatewayUsername?"),
        (READ, "kafkaSaslUserName2", "did you mean kafkaSaslUsername?"),
        (READ, "colour", 'colour: spark.read.format\\("brokergate"\\) has no such option$'),
        (READ, "gateway", "gateway: an option of writes"),
        (READ, "maxOffsetsPerTrigger", "maxOffsetsPerTrigger: an option of spark.readStream"),
        (STREAM_READ, "endingOffsets", "endingOffsets: a stream has no end"),
        (WRITE, "startingOffsets", "startingOffsets: an option of reads"),
        (STREAM_WRITE, "writeId", "writeId: a batch write's name"),
    ],
)
def test_an_option_a_use_does_not_take_is_refused_naming_the_closest(
    use: Use, option: str, said: str
) -> None:
    with pytest.raises(OptionError, match=said):
        use.check({option.lower(): "x"})  # as Spark hands them over


def test_spark_s_own_options_and_any_spelling_of_a_known_one_pass() -> None:
    spark_s = {"path": "p", "checkpointlocation": "c", "__partition_columns": "[]"}
    for use in (READ, STREAM_READ, WRITE, STREAM_WRITE):
        use.check(spark_s)
    READ.check({"STARTINGOFFSETS": "x", "topic": "t", "valueformat": "avro", "kafkasaslusername": "u"})
    WRITE.check({"topic": "t", "WriteId": "w", "gatewayPasswordFile": "f"})
    parsed = StreamOptions.parse(SOURCE | {"MaxOffsetsPerTrigger": "5"})
    assert parsed.max_offsets_per_trigger == 5
    with pytest.raises(OptionError, match="did you mean maxOffsetsPerTrigger"):
        StreamOptions.parse(SOURCE | {"maxOffsetPerTrigger": "5"})
    with pytest.raises(OptionError, match="did you mean maxRecordsPerRequest"):
        SinkOptions.parse({"gateway": "http://x", "maxRecordPerRequest": "5"}, {})
    with pytest.raises(OptionError, match="writeId: a batch write's name"):
        SinkOptions.parse({"gateway": "http://x", "writeId": "w"}, {}, stream=True)


# --- where Spark runs it -----------------------------------------------------------------------------


@pytest.fixture
def data(tmp_path: Path) -> TestLog:
    (tmp_path / "data" / "topics").mkdir(parents=True)
    return TestLog("embedded", str(tmp_path / "data"), tmp_path)


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("maxOffsetsPerTrigger", "0", "maxOffsetsPerTrigger: 0 is not a positive number"),
        ("maxOffsetsPerTrigger", "ten", "maxOffsetsPerTrigger: 'ten' is not a whole number"),
        ("maxOffsetPerTrigger", "10", "did you mean maxOffsetsPerTrigger?"),
    ],
)
def test_a_streams_bad_option_fails_load(
    spark: SparkSession, data: TestLog, option: str, value: str, said: str
) -> None:
    reader = spark.readStream.format("brokergate").option("log", data.url).option("topic", "t")
    with pytest.raises(AnalysisException, match=said):
        reader.option(option, value).load()


def test_a_stream_given_its_schema_fails_as_its_query_starts_saying_why(
    spark: SparkSession, data: TestLog, tmp_path: Path
) -> None:
    """With ``.schema(...)`` Spark asks the source nothing at ``load()``: the reason comes when the
    query starts, and it is the only error the query shows."""
    topic = data.create_topic(1)
    data.produce(topic, 0, records(1))
    frame = (
        spark.readStream.format("brokergate")
        .schema(SCHEMA)
        .option("log", data.url)
        .option("topic", topic)
        .option("maxOffsetsPerTrigger", "ten")
        .load()
    )
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(StreamingQueryException) as failed:
        query.awaitTermination(DEADLINE_S)
    said = str(failed.value)
    assert "OptionError: maxOffsetsPerTrigger: 'ten' is not a whole number" in said
    assert "UnboundLocalError" not in said and "During handling" not in said, said


def test_a_misspelt_option_fails_a_write_and_a_streaming_writes_first_micro_batch(
    spark: SparkSession, data: TestLog, tmp_path: Path
) -> None:
    """Nothing is sent: the write fails before any task runs (the gateway named is not there, and
    ``deliveryTimeoutMs=1`` would fail a task at once)."""
    sink = {"gateway": "http://127.0.0.1:9", "topic": "t", "deliveryTimeoutMs": "1"}
    frame = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(AnalysisException, match="did you mean maxRecordsPerRequest"):
        frame.write.format("brokergate").mode("append").options(**sink, maxRecordPerRequest="7").save()
    topic = data.create_topic(1)
    data.produce(topic, 0, records(1))
    stream = spark.readStream.format("brokergate").option("log", data.url).option("topic", topic).load()
    query = (
        stream.select("value")
        .writeStream.format("brokergate")
        .options(**sink, maxRecordPerRequest="7")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(StreamingQueryException, match="did you mean maxRecordsPerRequest"):
        query.awaitTermination(DEADLINE_S)
