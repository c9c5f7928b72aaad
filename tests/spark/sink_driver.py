"""Sink writes that Spark has to run again, each in a process of its own (``test_sink``).

``retry``: a batch write of ``ROWS`` rows, one request each, in one task, on a local master that
lets a task run twice: the test kills the task's Python worker halfway. ``stream``: a topic copied
into another, ``PER_BATCH`` records a micro-batch, one record a request and a pause per record, so that a
test can kill the process in the middle of a micro-batch (``continuous``), then finish it (``available-now``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from spark_jobs.session import build_session

from .conftest import FAST_START_JVM


def session(scratch: str, master: str) -> SparkSession:
    return build_session(
        "brokergate-sink-driver",
        master,
        {
            "spark.ui.enabled": "false",
            "spark.local.dir": str(Path(scratch) / "local"),
            "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={scratch} {FAST_START_JVM}",
        },
    )


PER_BATCH = 50  # the stream's records a micro-batch: few, as each costs Spark seconds on a busy machine
ROWS = 400  # the retry's rows: one request each, so that its task can be caught halfway


def retry(scratch: str, gateway: str, topic: str) -> None:
    spark = session(scratch, "local[1,2]")  # a failed task runs again, once
    frame = spark.range(0, ROWS, numPartitions=1).selectExpr("cast(id as string) as value")
    writer = frame.write.format("brokergate").mode("append").option("gateway", gateway)
    writer.option("topic", topic).option("maxRecordsPerRequest", 1).save()


def stream(scratch: str, gateway: str, log: str, source: str, out: str, checkpoint: str, how: str) -> None:
    spark = session(scratch, "local[2]")

    def slowly(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in range(batch.num_rows):
                time.sleep(0.02)
                yield batch.slice(row, 1)

    frame = (
        spark.readStream.format("brokergate")
        .option("log", log)
        .option("topic", source)
        .option("maxOffsetsPerTrigger", PER_BATCH)
        .load()
        .select("value")
    )
    writer = (
        frame.mapInArrow(slowly, frame.schema)
        .writeStream.format("brokergate")
        .option("gateway", gateway)
        .option("topic", out)
        .option("maxRecordsPerRequest", 1)
        .option("checkpointLocation", checkpoint)
    )
    if how == "available-now":
        writer = writer.trigger(availableNow=True)
    writer.start().awaitTermination()


if __name__ == "__main__":
    mode, scratch, *rest = sys.argv[1:]
    if mode == "retry":
        retry(scratch, *rest)
    else:
        stream(scratch, *rest)
