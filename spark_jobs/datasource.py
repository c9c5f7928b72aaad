"""The ``brokergate`` PySpark data source: a topic's records as a DataFrame.

    spark.dataSource.register(BrokergateDataSource)
    df = (spark.read.format("brokergate")
          .option("log", "./data")                 # or kafka://host:9092
          .option("topic", "orders")               # a name, a comma list, or a pattern
          .option("startingOffsets", "earliest")   # | latest | committed:<group> | JSON
          .option("endingOffsets", "latest")
          .load())

Planning (``partitions()``) resolves the offset specs against the log once,
so every task of the query reads a fixed range: one input partition per
topic-partition, cut into pieces of at most ``maxRecordsPerPartition``
offsets so that several tasks read a large partition side by side. Tasks
(``read()``) open their own log source and hand Spark Arrow record batches.
See ``logs`` for which records count as written (acknowledged and durable).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from service.core.models import Record

from .logs import open_log
from .offsets import OffsetRange, split_ranges
from .plan import SourceOptions, plan

NAME: Final = "brokergate"
SCHEMA: Final = (
    "topic string, partition int, offset long, timestamp timestamp, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>"
)
_HEADER: Final = pa.struct([("key", pa.string()), ("value", pa.binary())])
ARROW_SCHEMA: Final = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("key", pa.binary()),
        ("value", pa.binary()),
        # Spark names the element field of its Arrow lists "element".
        ("headers", pa.list_(pa.field("element", _HEADER))),
    ]
)


def to_arrow(topic: str, partition: int, records: Sequence[Record]) -> pa.RecordBatch:
    """One Arrow batch in the data source's schema."""
    n = len(records)
    columns = [
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(
            ARROW_SCHEMA.field("timestamp").type
        ),
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array(
            [[{"key": k, "value": v} for k, v in r.headers] for r in records],
            ARROW_SCHEMA.field("headers").type,
        ),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


class RangePartition(InputPartition):
    """One Spark task's share: an ``OffsetRange`` of one topic-partition."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng


class BrokergateReader(DataSourceReader):
    """Plans offset ranges on the driver side and reads them in tasks."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        ranges = split_ranges(plan(self.options), self.options.max_records_per_partition)
        if not ranges:
            # Spark wants at least one partition; an empty range reads nothing.
            return [RangePartition(OffsetRange("", 0, 0, 0))]
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        rng = partition.range
        if rng.size == 0:
            return
        source = open_log(self.options.log)
        try:
            for chunk in source.read(rng):
                yield to_arrow(rng.topic, rng.partition, chunk)
        finally:
            source.close()


class BrokergateDataSource(DataSource):
    """``format("brokergate")``: records of brokergate topics, from an embedded data dir or Kafka."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return BrokergateReader(SourceOptions.parse(self.options))


def record_bytes() -> Column:
    """A record's size as ``Record.size`` counts it: key, value, header names and values."""

    def size(c: Column) -> Column:
        return F.coalesce(F.length(c), F.lit(0))

    headers = F.aggregate(
        F.coalesce(F.col("headers"), F.array()),
        F.lit(0),
        lambda acc, h: acc + size(h["key"]) + size(h["value"]),
    )
    return size(F.col("key")) + size(F.col("value")) + headers
