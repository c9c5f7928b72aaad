"""The ``brokergate`` PySpark data source: a topic's records as a DataFrame.

    spark.dataSource.register(BrokergateDataSource)
    df = (spark.read.format("brokergate")
          .option("log", "./data")                 # or kafka://host:9092
          .option("topic", "orders")               # a name, a comma list, or a pattern
          .option("startingOffsets", "earliest")   # | latest | committed:<group> | JSON
          .option("endingOffsets", "latest")
          .option("valueFormat", "avro")           # decode with the schema registry (decode_options)
          .load())

Planning (``partitions()``) resolves the offset specs against the log once,
so every task of the query reads a fixed range: one input partition per
topic-partition, cut into pieces of at most ``maxRecordsPerPartition``
offsets so that several tasks read a large partition side by side. Tasks
(``read()``) open their own log source and hand Spark Arrow record batches.
See ``logs`` for which records count as written (acknowledged and durable).
A Kafka or ZooKeeper that wants the gateway's backend credentials gets them
from the options (``credentials``): they travel with the planned read, and
each task signs in with them itself.

``df.write`` and ``writeStream`` into ``format("brokergate")`` go to the sink (``sink``), which
writes through a gateway's API, each row exactly once.

With ``valueFormat`` / ``keyFormat`` set, the schema is not fixed: ``schema()``
asks the registry for the reader schemas once (``decoding.plan_decoding``)
and the tasks decode the columns into their types (``decoding.Decoder``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from service.core.models import Header, RecordColumns

from .logs import open_log
from .offsets import OffsetRange, OptionError, split_ranges
from .option_names import ANY_READ, READ
from .plan import SourceOptions, plan

if TYPE_CHECKING:  # imported where used: a binary read never loads the schema formats
    from .decoding import DecodePlan, Decoder

NAME: Final = "brokergate"
# The records' columns, what a decoded read's schema starts from; in Arrow by Spark's own mapping
# (which names the element field of a list "element").
SCHEMA: Final = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField(
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
        ),
    ]
)
ARROW_SCHEMA: Final = to_arrow_schema(SCHEMA, timezone="UTC")
_TIMESTAMP: Final = ARROW_SCHEMA.field("timestamp").type
_HEADERS: Final = ARROW_SCHEMA.field("headers").type


def to_arrow(
    topic: str, partition: int, records: RecordColumns, decoder: Decoder | None = None
) -> pa.RecordBatch:
    """One Arrow batch in the data source's schema (a decoded read's, with ``decoder``), made of
    the chunk's columns as they are: no object per record."""
    n = len(records)
    columns = {
        "topic": pa.array([topic] * n, pa.string()),
        "partition": pa.array([partition] * n, pa.int32()),
        "offset": pa.array(records.offsets, pa.int64()),
        "timestamp": pc.multiply(pa.array(records.timestamps, pa.int64()), 1000).cast(_TIMESTAMP),
        "key": pa.array(records.keys, pa.binary()),
        "value": pa.array(records.values, pa.binary()),
        "headers": _headers(records.headers),
    }
    if decoder is None:
        return pa.RecordBatch.from_arrays(list(columns.values()), schema=ARROW_SCHEMA)
    columns.update(decoder.columns(topic, partition, records))
    schema = decoder.arrow_schema
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


def _headers(headers: list[tuple[Header, ...]]) -> pa.Array:
    """The headers column: a list of (key, value) structs per record; empty lists, the usual case,
    as offsets alone."""
    n = len(headers)
    if headers.count(()) == n:
        return pa.ListArray.from_arrays(
            pa.array([0] * (n + 1), pa.int32()), pa.array([], _HEADERS.value_type), type=_HEADERS
        )
    return pa.array([[{"key": k, "value": v} for k, v in h] for h in headers], _HEADERS)


class RangePartition(InputPartition):
    """One Spark task's share: an ``OffsetRange`` of one topic-partition."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng


class BrokergateReader(DataSourceReader):
    """Plans offset ranges on the driver side and reads them in tasks."""

    def __init__(self, options: SourceOptions, decoding: DecodePlan | None = None) -> None:
        self.options = options
        self.decoding = decoding

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
        decoder = None
        if self.decoding is not None:
            from .decoding import Decoder

            decoder = Decoder(self.decoding, SCHEMA)
        source = open_log(self.options.log, self.options.credentials)
        try:
            for chunk in source.read(rng):
                yield to_arrow(rng.topic, rng.partition, chunk, decoder)
        finally:
            source.close()


class BrokergateDataSource(DataSource):
    """``format("brokergate")``: records of brokergate topics, from an embedded data dir or Kafka.

    Spark pickles the instance after ``schema()``, so the decoding planned
    there travels to ``reader()`` and the tasks.
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self._decoding: DecodePlan | None = None
        self._planned = False

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType | str:
        """The columns. Spark asks for them where a read is defined (``load()``, unless given
        ``.schema(...)``), in a read and in a stream alike, so the options either takes are
        checked here, and a bad one fails ``load()`` rather than the query later on."""
        from .stream_source import StreamOptions

        StreamOptions.parse(self.options, ANY_READ)
        decoding = self.decoding()
        return SCHEMA if decoding is None else decoding.spark_schema(SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        READ.check(self.options)
        options = SourceOptions.parse(self.options)
        decoding = self.decoding()
        if decoding is not None and schema != decoding.spark_schema(SCHEMA):
            raise OptionError(
                "a decoded read's schema comes from its reader schemas; leave out .schema(...) "
                f"(given: {schema.simpleString()})"
            )
        return BrokergateReader(options, decoding)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream``: the stream source (``stream_source``), over the same options."""
        from .stream_source import stream_reader

        return stream_reader(self.options, schema, self.decoding(), base_schema=SCHEMA, to_arrow=to_arrow)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """``df.write``: the sink (``sink``), through the gateway the options name."""
        from .sink import batch_writer

        return batch_writer(self.options, schema, overwrite=overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """``writeStream``: the sink, each micro-batch exactly once (``sink``)."""
        from .sink import stream_writer

        return stream_writer(self.options, schema)

    def decoding(self) -> DecodePlan | None:
        """The decoded columns (None: a binary read), planned on the first call."""
        if not self._planned:
            options = SourceOptions.parse(self.options)
            if options.decode.decoding:
                from .decoding import plan_decoding

                self._decoding = plan_decoding(
                    options.decode, options.log, options.topic, options.credentials
                )
            self._planned = True
        return self._decoding


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
