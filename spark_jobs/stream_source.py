"""The ``brokergate`` source of ``spark.readStream``: topics as an unbounded table, read in micro-batches.

    df = (spark.readStream.format("brokergate")
          .option("log", "./data").option("topic", "orders")
          .option("maxOffsetsPerTrigger", 10000)
          .load())

The options are the batch source's (``plan.SourceOptions``: log, topics or
a pattern, ``startingOffsets`` or a starting time (``startingTimestamp``,
``startingOffsetsByTimestamp``), decoding, the backend credentials) but the
ending ones, plus Spark's Kafka source's ``maxOffsetsPerTrigger``,
``minPartitions`` and ``failOnDataLoss`` (``StreamOptions``).

Spark drives ``BrokergateStreamReader`` on the driver: ``initialOffset`` for a
query's first start (``startingOffsets``, or the offsets the log finds for a
starting time; later starts resume from the offsets
in the checkpoint), ``latestOffset`` for the end of each micro-batch (the
durable log end, ``logs`` says what that is, cut by the read limit), and
``partitions`` for the batch's tasks. A ``Planner`` (``plan``) answers the
questions about the log and stays open for the life of the query;
``stream_offsets`` does the offset arithmetic. The tasks (``read``) read their
range as the batch source's tasks do, with its Arrow conversion and
decoding (``datasource`` hands them over in ``stream_reader``), so a
micro-batch replayed after a crash reads the very same records.

Records lost before they were read (retention, a deleted topic) are
reported as Spark's ``failOnDataLoss`` does: the query fails naming the
partition and the offsets, or with ``failOnDataLoss=false`` they are skipped
and a warning is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from service.core.models import RecordColumns, TopicPartition

from .log_source import LogSource
from .logs import open_log
from .offsets import Bounds, OffsetRange, OptionError, PastEnd, is_pattern, select_topics
from .option_names import STREAM_READ, Use
from .plan import Planner, SourceOptions
from .stream_offsets import (
    DataLoss,
    Offsets,
    available_now,
    gone,
    micro_batch_end,
    offset_doc,
    parse_offset_doc,
    ranges,
    split_for_tasks,
)

if TYPE_CHECKING:
    from .decoding import DecodePlan, Decoder

# The batch source's conversion of a partition's records into an Arrow batch (``datasource.to_arrow``).
ToArrow = Callable[[str, int, RecordColumns, "Decoder | None"], pa.RecordBatch]

logger = logging.getLogger(__name__)
LOSS_SKIP: Final = "skip what was lost and go on reading the stream"
PAST_END_SKIP: Final = "start such a partition at its log end"


class DataLossError(RuntimeError):
    """Records a stream had not read yet are gone (``failOnDataLoss``); the message names them."""


@dataclass(frozen=True, slots=True)
class StreamOptions:
    """The options of ``spark.readStream.format("brokergate")``, checked."""

    source: SourceOptions
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str], use: Use = STREAM_READ) -> StreamOptions:
        """From Spark's option map (case-insensitive keys), which may hold ``use``'s options only;
        raises ``OptionError``."""
        use.check(options)
        lowered = {str(k).lower(): str(v) for k, v in options.items()}
        fail = lowered.get("failondataloss", "true").strip().lower()
        if fail not in ("true", "false"):
            raise OptionError(f"failOnDataLoss: {lowered['failondataloss']!r} is not true or false")
        return cls(
            source=SourceOptions.parse(options),
            max_offsets_per_trigger=_positive(lowered, "maxOffsetsPerTrigger"),
            min_partitions=_positive(lowered, "minPartitions"),
            fail_on_data_loss=fail == "true",
        )


def _positive(lowered: Mapping[str, str], name: str) -> int | None:
    value = _non_negative(lowered, name)
    if value == 0:
        raise OptionError(f"{name}: 0 is not a positive number")
    return value


def _non_negative(lowered: Mapping[str, str], name: str) -> int | None:
    raw = lowered.get(name.lower())
    if raw is None:
        return None
    if not raw.strip().isdigit():
        raise OptionError(f"{name}: {raw!r} is not a whole number")
    return int(raw)


def stream_reader(
    options: Mapping[str, str],
    schema: StructType,
    decoding: DecodePlan | None,
    *,
    base_schema: StructType,
    to_arrow: ToArrow,
) -> DataSourceStreamReader:
    """The reader ``BrokergateDataSource.streamReader`` gives Spark: ``decoding`` is its planned
    columns, ``base_schema`` and ``to_arrow`` the batch source's columns and conversion.

    Options it refuses give a ``RefusedStreamReader``: Spark's runner cannot report an error
    raised here (its clean-up then fails on the reader it never got, and the query shows that
    ``UnboundLocalError`` over the reason), so the reader raises it at Spark's first call.
    """
    try:
        parsed = StreamOptions.parse(options)
        if decoding is not None and schema != decoding.spark_schema(base_schema):
            raise OptionError(
                "a decoded read's schema comes from its reader schemas; leave out .schema(...) "
                f"(given: {schema.simpleString()})"
            )
    except OptionError as exc:
        return RefusedStreamReader(str(exc))
    return BrokergateStreamReader(parsed, decoding, base_schema=base_schema, to_arrow=to_arrow)


class StreamPartition(InputPartition):
    """One Spark task's share of a micro-batch: an ``OffsetRange`` of one topic-partition."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng


class BrokergateStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans each micro-batch on the driver, and reads its ranges in the tasks.

    Collaborators: a ``Planner`` (opened when first needed, closed by
    ``stop()``), ``stream_offsets`` for the offsets, a ``LogSource`` per task.
    Spark creates one in several processes and pickles it to the tasks, so
    creating one opens nothing, and the planner never travels.
    """

    def __init__(
        self,
        options: StreamOptions,
        decoding: DecodePlan | None,
        *,
        base_schema: StructType,
        to_arrow: ToArrow,
    ) -> None:
        self.options = options
        self.decoding = decoding
        self.base_schema = base_schema
        self.to_arrow = to_arrow
        self._planner: Planner | None = None
        self._target: Offsets | None = None  # set by trigger(availableNow=True)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_planner"] = None
        return state

    @property
    def planner(self) -> Planner:
        if self._planner is None:
            self._planner = self.options.source.planner()
        return self._planner

    # --- the driver: offsets and plans -----------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        """``startingOffsets`` (or a starting time) resolved now, for every partition there is.

        A start past a partition's log end (a group's commit there, a JSON offset) is where no
        record is: the query fails naming it, or with ``failOnDataLoss=false`` a warning says
        so and the partition starts at its log end, as Spark's Kafka source goes on there.
        """
        bounds, spec = self._current_bounds(), self.options.source.starting
        starts = self.planner.starts_of(bounds, spec)
        for tp, offset in starts.items():
            if offset > bounds[tp][1]:
                past = PastEnd(spec, "start", tp, offset, bounds[tp])
                report_data_loss(past.describe(), fail=self.options.fail_on_data_loss, skipping=PAST_END_SKIP)
                starts[tp] = bounds[tp][1]
        return offset_doc(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: end for tp, (_, end) in self._current_bounds().items()}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next micro-batch: what was written since ``start``, within ``limit``."""
        offsets = parse_offset_doc(start)
        bounds = self._current_bounds()
        for tp in gone(offsets, bounds):
            self._report(
                f"{tp.topic}-{tp.partition} is gone (was its topic deleted?); records after "
                f"offset {offsets[tp]} may have been missed"
            )
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = micro_batch_end(offsets, bounds, max_rows)
        if self._target is not None:
            end = available_now(end, self._target)
            # A partition the target does not hold (created since) keeps its place in the offsets.
            end.update({tp: o for tp, o in offsets.items() if tp not in end and tp in bounds})
        return offset_doc(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = parse_offset_doc(start), parse_offset_doc(end)
        bounds = self.planner.bounds(sorted(last))
        batch, lost = ranges(first, last, bounds)
        for loss in lost:
            self._report(loss.describe())
        source = self.options.source
        pieces = split_for_tasks(batch, source.max_records_per_partition, self.options.min_partitions)
        return [StreamPartition(r) for r in pieces]

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the offsets are Spark's checkpoint, and no group's commits are touched."""

    def stop(self) -> None:
        planner, self._planner = self._planner, None
        if planner is not None:
            planner.close()

    def _current_bounds(self) -> dict[TopicPartition, Bounds]:
        """Every partition the topics have now (new ones of a pattern included), with its bounds."""
        return self.planner.bounds(self._partitions())

    def _partitions(self) -> list[TopicPartition]:
        """The topics' partitions. A topic the pattern matched that has none known is being created
        or deleted right now; it is left out, and a later micro-batch sees it as it is then."""
        spec, log = self.options.source.topic, self.planner.log
        tps: list[TopicPartition] = []
        for topic in select_topics(spec, log.topics()):
            try:
                count = log.partition_count(topic)
            except FileNotFoundError:
                if not is_pattern(spec):
                    raise
                continue
            tps.extend(TopicPartition(topic, p) for p in range(count))
        return tps

    def _report(self, what: str) -> None:
        report_data_loss(what, fail=self.options.fail_on_data_loss)

    # --- the tasks -------------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, StreamPartition)
        rng = partition.range
        decoder = None
        if self.decoding is not None:
            from .decoding import Decoder

            decoder = Decoder(self.decoding, self.base_schema)
        source = open_log(self.options.source.log, self.options.source.credentials)
        try:
            for chunk in checked(source, rng, fail=self.options.fail_on_data_loss):
                yield self.to_arrow(rng.topic, rng.partition, chunk, decoder)
        finally:
            source.close()


class RefusedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream whose options were refused: every call Spark makes raises ``OptionError`` saying
    why, so the query fails at its start, before it reads anything."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def _refuse(self) -> OptionError:
        return OptionError(self.reason)

    def initialOffset(self) -> dict[str, Any]:
        raise self._refuse()

    def getDefaultReadLimit(self) -> ReadLimit:
        raise self._refuse()

    def prepareForTriggerAvailableNow(self) -> None:
        raise self._refuse()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        raise self._refuse()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        raise self._refuse()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        raise self._refuse()

    def commit(self, end: dict[str, Any]) -> None:
        raise self._refuse()


def checked(source: LogSource, rng: OffsetRange, *, fail: bool) -> Iterator[RecordColumns]:
    """The chunks of ``rng``, with records that retention removed since planning reported.

    Retention removes the oldest records, so a loss shows as a range whose
    first record comes after its start; a log whose start is still at or below
    it only skipped offsets (a compacted Kafka topic) and lost nothing.
    """
    chunks = source.read(rng)
    first = next(chunks, None)
    got = first.offsets[0] if first else rng.end
    if got > rng.start:
        log_start = source.bounds([rng.tp])[rng.tp][0]
        if log_start > rng.start:
            loss = DataLoss(rng.tp, rng.start, min(log_start, rng.end), log_start)
            report_data_loss(loss.describe(), fail=fail)
    if first:
        yield first
    yield from chunks


def report_data_loss(what: str, *, fail: bool, skipping: str = LOSS_SKIP) -> None:
    """Fail the query (``failOnDataLoss=true``) or log a warning and go on; ``skipping`` says what
    ``failOnDataLoss=false`` does."""
    if fail:
        raise DataLossError(f"{what}. Set failOnDataLoss=false to {skipping}.")
    logger.warning("%s; failOnDataLoss=false: %s", what, skipping)
