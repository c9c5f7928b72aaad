"""Offset arithmetic of the data source: which topics, which offsets, how ranges split into tasks.

Pure functions and value types, no I/O: the planner (``plan``) feeds them the
topic list, each partition's bounds and a group's committed offsets, and
gets back the offset ranges Spark tasks read.

Offset specs are the ``startingOffsets`` / ``endingOffsets`` option values:

``earliest``
    the first offset still in the log (its *log start*);
``latest``
    the log end at planning time (the offset the next record will get);
``committed:<group>``
    the group's committed offset, i.e. the first record it has not processed.
    A partition the group never committed has processed nothing: it starts
    at the log start, and as an end it bounds the range to nothing;
per-partition JSON
    ``{"orders": {"0": 42, "1": -2}}`` as Spark's Kafka source takes it, with
    -2 for earliest and -1 for latest; partitions it leaves out start at the
    earliest and end at the latest offset.

Every resolved offset is clamped into the partition's bounds: records that
retention removed cannot be read, records not yet written cannot either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from service.core.models import TopicPartition

EARLIEST_CODE: Final = -2
LATEST_CODE: Final = -1
COMMITTED_PREFIX: Final = "committed:"
# Characters of a Kafka topic name, plus the comma that separates a list of them.
_NAME_LIST_RE: Final = re.compile(r"[A-Za-z0-9._\-,\s]+")

Bounds = tuple[int, int]  # (log start offset, log end offset)
Side = Literal["start", "end"]


class OptionError(ValueError):
    """An option value that cannot be used; the message names the option and says why."""


@dataclass(frozen=True, slots=True)
class Earliest:
    pass


@dataclass(frozen=True, slots=True)
class Latest:
    pass


@dataclass(frozen=True, slots=True)
class Committed:
    group: str


@dataclass(frozen=True, slots=True)
class Explicit:
    offsets: Mapping[TopicPartition, int]


OffsetSpec = Earliest | Latest | Committed | Explicit
EARLIEST: Final = Earliest()
LATEST: Final = Latest()


@dataclass(frozen=True, slots=True, order=True)
class OffsetRange:
    """Offsets ``start <= offset < end`` of one partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def parse_offset_spec(text: str, *, option: str) -> OffsetSpec:
    """The spec an option value names; raises ``OptionError``."""
    value = text.strip()
    lowered = value.lower()
    if lowered == "earliest":
        return EARLIEST
    if lowered == "latest":
        return LATEST
    if lowered.startswith(COMMITTED_PREFIX):
        group = value[len(COMMITTED_PREFIX) :]
        if not group:
            raise OptionError(f"{option}: committed: needs a group name, as in committed:billing")
        return Committed(group)
    if value.startswith("{"):
        return Explicit(parse_offsets_json(value, option=option))
    raise OptionError(
        f"{option}: {text!r} is not earliest, latest, committed:<group> or per-partition JSON "
        '(e.g. {"orders": {"0": 42}})'
    )


def parse_offsets_json(text: str, *, option: str) -> dict[TopicPartition, int]:
    """``{"topic": {"partition": offset}}`` -> offsets per partition; raises ``OptionError``."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise OptionError(f"{option}: not valid JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise OptionError(f'{option}: expected an object like {{"orders": {{"0": 42}}}}')
    out: dict[TopicPartition, int] = {}
    for topic, partitions in doc.items():
        if not isinstance(partitions, dict):
            raise OptionError(
                f"{option}: the value of topic {topic!r} must be an object of partition: offset"
            )
        for partition, offset in partitions.items():
            if not str(partition).isdigit():
                raise OptionError(f"{option}: {partition!r} of topic {topic!r} is not a partition number")
            if type(offset) is not int or offset < EARLIEST_CODE:
                raise OptionError(
                    f"{option}: offset {offset!r} of {topic}-{partition} is not an offset, -1 or -2"
                )
            out[TopicPartition(topic, int(partition))] = offset
    return out


def offsets_json(offsets: Mapping[TopicPartition, int]) -> str:
    """The JSON spec naming exactly ``offsets`` (what ``parse_offsets_json`` reads back)."""
    doc: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        doc.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def resolve(
    spec: OffsetSpec,
    tp: TopicPartition,
    bounds: Bounds,
    *,
    side: Side,
    committed: Mapping[TopicPartition, int] | None = None,
) -> int:
    """The offset ``spec`` names for ``tp``, clamped into ``bounds``."""
    log_start, log_end = bounds
    if isinstance(spec, Earliest):
        offset = log_start
    elif isinstance(spec, Latest):
        offset = log_end
    elif isinstance(spec, Committed):
        if committed is None:
            raise OptionError(f"committed:{spec.group} needs the group's committed offsets")
        offset = committed.get(tp, log_start)
    else:
        given = spec.offsets.get(tp)
        if given is None:
            offset = log_start if side == "start" else log_end
        elif given == EARLIEST_CODE:
            offset = log_start
        elif given == LATEST_CODE:
            offset = log_end
        else:
            offset = given
    return min(max(offset, log_start), log_end)


def plan_ranges(
    tps: Iterable[TopicPartition],
    bounds: Mapping[TopicPartition, Bounds],
    starting: OffsetSpec,
    ending: OffsetSpec,
    *,
    committed: Mapping[str, Mapping[TopicPartition, int]] | None = None,
) -> list[OffsetRange]:
    """One range per partition (empty ones included), in topic-partition order.

    ``committed`` holds the committed offsets of the groups that ``committed:<group>``
    specs name, by group.
    """
    groups = committed or {}

    def of(spec: OffsetSpec) -> Mapping[TopicPartition, int] | None:
        return groups.get(spec.group) if isinstance(spec, Committed) else None

    out = []
    for tp in sorted(set(tps)):
        b = bounds[tp]
        start = resolve(starting, tp, b, side="start", committed=of(starting))
        end = resolve(ending, tp, b, side="end", committed=of(ending))
        out.append(OffsetRange(tp.topic, tp.partition, start, max(start, end)))
    return out


def committed_groups(*specs: OffsetSpec) -> set[str]:
    """The groups whose committed offsets ``specs`` need."""
    return {s.group for s in specs if isinstance(s, Committed)}


def split_ranges(ranges: Iterable[OffsetRange], max_records: int) -> list[OffsetRange]:
    """Cut every non-empty range into near-equal pieces of at most ``max_records`` offsets."""
    if max_records < 1:
        raise OptionError("maxRecordsPerPartition must be at least 1")
    out = []
    for r in ranges:
        if r.size == 0:
            continue
        pieces = -(-r.size // max_records)
        step, extra = divmod(r.size, pieces)
        start = r.start
        for i in range(pieces):
            end = start + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out


def is_pattern(spec: str) -> bool:
    """Whether a ``topic`` option is a regular expression rather than a comma list of names.

    Topic names only hold ``[a-zA-Z0-9._-]``: any other character (``*``, ``^``,
    ``[``, ``|``, ...) makes the value a pattern.
    """
    return _NAME_LIST_RE.fullmatch(spec) is None


def select_topics(spec: str, existing: Iterable[str]) -> list[str]:
    """The topics a ``topic`` option names, sorted: a name, a comma list, or a pattern (full match).

    A pattern never matches internal topics (names starting with ``__``); a
    named topic that does not exist raises ``OptionError``.
    """
    names = sorted(set(existing))
    if not spec.strip():
        raise OptionError("topic: name a topic, a comma-separated list, or a pattern")
    if is_pattern(spec):
        try:
            rx = re.compile(spec)
        except re.error as exc:
            raise OptionError(f"topic: {spec!r} is not a valid regular expression: {exc}") from exc
        return [t for t in names if rx.fullmatch(t) and not t.startswith("__")]
    wanted = sorted({t.strip() for t in spec.split(",") if t.strip()})
    missing = [t for t in wanted if t not in names]
    if missing:
        raise OptionError(f"topic: no such topic: {', '.join(missing)}")
    return wanted


@dataclass(frozen=True, slots=True, order=True)
class LagRow:
    """One group's progress on one partition: ``committed`` is None when it never committed there."""

    group: str
    topic: str
    partition: int
    committed: int | None
    end_offset: int

    @property
    def lag(self) -> int:
        """Records after the committed offset, counted as the gateway's lag endpoint counts them."""
        return max(0, self.end_offset - (self.committed if self.committed is not None else 0))


def lag_rows(
    committed: Mapping[str, Mapping[TopicPartition, int]],
    partition_counts: Mapping[str, int],
    ends: Mapping[TopicPartition, int],
) -> list[LagRow]:
    """Every partition of every topic a group committed on, sorted; deleted topics are left out."""
    rows = []
    for group, offsets in committed.items():
        for topic in sorted({tp.topic for tp in offsets}):
            for partition in range(partition_counts.get(topic, 0)):
                tp = TopicPartition(topic, partition)
                rows.append(LagRow(group, topic, partition, offsets.get(tp), ends[tp]))
    return sorted(rows)
