"""Planning a read: the data source's options, and the ``Planner`` that turns them into offset ranges.

The planner runs where Spark plans (the data source's ``partitions()``), and
jobs use it directly on the driver when they must know the exact ranges they
read before reading them (the export records them as its progress).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Self

from service.core.models import TopicPartition

from .committed import CommittedSource, open_committed
from .credentials import BackendCredentials
from .decode_options import DecodeOptions
from .log_source import LogSource
from .logs import open_log
from .offsets import (
    EARLIEST,
    LATEST,
    AtTime,
    Bounds,
    ByTimestamp,
    Committed,
    OffsetRange,
    OffsetSpec,
    OptionError,
    committed_groups,
    found_offsets,
    named_offset,
    parse_count,
    parse_side,
    plan_ranges,
    select_topics,
    times_for,
)

DEFAULT_MAX_RECORDS_PER_PARTITION: Final = 200_000


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The options of ``spark.read.format("brokergate")``, checked."""

    log: str
    topic: str
    starting: OffsetSpec = EARLIEST
    ending: OffsetSpec = LATEST
    coordinator: str | None = None
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    decode: DecodeOptions = field(default_factory=DecodeOptions)  # binary key and value: nothing decoded
    credentials: BackendCredentials = field(default_factory=BackendCredentials)  # the gateway's, to Kafka/ZK

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """From Spark's option map (whose keys are case-insensitive); raises ``OptionError``."""
        lowered = {str(k).lower(): str(v) for k, v in options.items()}
        log = lowered.get("log")
        topic = lowered.get("topic")
        if not log:
            raise OptionError("log: name an embedded data dir or kafka://host:port")
        if not topic:
            raise OptionError("topic: name a topic, a comma-separated list, or a pattern")
        raw_max = lowered.get("maxrecordsperpartition", str(DEFAULT_MAX_RECORDS_PER_PARTITION))
        return cls(
            log=log,
            topic=topic,
            starting=parse_side(lowered, "start"),
            ending=parse_side(lowered, "end"),
            coordinator=lowered.get("coordinator") or None,
            max_records_per_partition=parse_count(raw_max, option="maxRecordsPerPartition"),
            decode=DecodeOptions.parse(lowered),
            credentials=BackendCredentials.parse(lowered),
        )

    def planner(self) -> Planner:
        """A ``Planner`` of this read's log and coordinator, signing in with its credentials."""
        return Planner(self.log, self.coordinator, self.credentials)


class Planner:
    """Answers planning questions about one log (and, when needed, its coordinator).

    Collaborators: a ``LogSource`` for topics and bounds, a ``CommittedSource``
    for ``committed:<group>`` specs (``open_committed``: Kafka's group offsets on a
    Kafka log; opened only when one is used), both
    signing in with ``credentials``. Close it, or use it as a context manager.
    """

    def __init__(
        self, log: str, coordinator: str | None = None, credentials: BackendCredentials | None = None
    ) -> None:
        self.log_url = log
        self.coordinator_url = coordinator
        self.credentials = credentials
        self._log: LogSource | None = None
        self._committed: CommittedSource | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def log(self) -> LogSource:
        if self._log is None:
            self._log = open_log(self.log_url, self.credentials)
        return self._log

    @property
    def coordinator(self) -> CommittedSource:
        if self._committed is None:
            self._committed = open_committed(self.log_url, self.coordinator_url, self.credentials)
        return self._committed

    def partitions(self, topic_spec: str) -> list[TopicPartition]:
        topics = select_topics(topic_spec, self.log.topics())
        return [TopicPartition(t, p) for t in topics for p in range(self.log.partition_count(t))]

    def bounds(self, tps: list[TopicPartition]) -> dict[TopicPartition, Bounds]:
        return self.log.bounds(tps)

    def committed(self, group: str) -> dict[TopicPartition, int]:
        return self.coordinator.committed(group)

    def groups(self) -> list[str]:
        return self.coordinator.groups()

    def ranges(self, topic_spec: str, starting: OffsetSpec, ending: OffsetSpec) -> list[OffsetRange]:
        """One range per partition of the selected topics (empty ranges included)."""
        tps = self.partitions(topic_spec)
        return self.ranges_of(self.bounds(tps), starting, ending)

    def ranges_of(
        self, bounds: Mapping[TopicPartition, Bounds], starting: OffsetSpec, ending: OffsetSpec
    ) -> list[OffsetRange]:
        """One range per partition of ``bounds``, the partitions read with their bounds."""
        tps = sorted(bounds)
        committed = {g: self.committed(g) for g in committed_groups(starting, ending)}
        start, end = self.at_offsets(starting, bounds), self.at_offsets(ending, bounds)
        return plan_ranges(tps, bounds, start, end, committed=committed)

    def starts_of(
        self, bounds: Mapping[TopicPartition, Bounds], starting: OffsetSpec
    ) -> dict[TopicPartition, int]:
        """Where ``starting`` starts each partition of ``bounds``, one past the log end kept as it
        is (a stream says what it does with it)."""
        committed = self.committed(starting.group) if isinstance(starting, Committed) else None
        spec = self.at_offsets(starting, bounds)
        return {
            tp: named_offset(spec, tp, b, side="start", committed=committed)
            for tp, b in sorted(bounds.items())
        }

    def at_offsets(self, spec: OffsetSpec, bounds: Mapping[TopicPartition, Bounds]) -> OffsetSpec:
        """``spec``, its times (if it is given by time) turned into the offsets the log finds for them.

        Asked after the bounds were, so an offset found past the end a read
        plans with (a record written since) is taken as that end.
        """
        if not isinstance(spec, AtTime | ByTimestamp):
            return spec
        times = times_for(spec, sorted(bounds))
        found = {tp: self.log.offset_for_timestamp(tp, ms) for tp, ms in times.items()}
        return found_offsets(
            {tp: None if o is None else min(o, bounds[tp][1]) for tp, o in found.items()}, spec
        )

    def close(self) -> None:
        log, committed = self._log, self._committed
        self._log = self._committed = None
        try:
            if log is not None:
                log.close()
        finally:
            if committed is not None:
                committed.close()


def plan(options: SourceOptions) -> list[OffsetRange]:
    """The ranges ``options`` select, one per partition."""
    with options.planner() as planner:
        return planner.ranges(options.topic, options.starting, options.ending)


def check_topics(
    log: str, topic_spec: str, coordinator: str | None = None, credentials: BackendCredentials | None = None
) -> None:
    """What a job's read would find wrong with its log and topics (a log that is not there, a named
    topic that does not exist), asked before the job starts Spark or writes anything: ``OSError``
    or ``OptionError``, in one line."""
    with Planner(log, coordinator, credentials) as planner:
        planner.partitions(topic_spec)
