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

A side may be given by time instead, as Spark's Kafka source takes it, and
the time options win over the offsets (``parse_side``): ``startingTimestamp``
(one time for every partition) over ``startingOffsetsByTimestamp`` (JSON,
``{"orders": {"0": 1700000000000}}``, naming every partition read) over
``startingOffsets``; ``ending…`` likewise. A time stands for the first offset
whose record is timestamped at or after it, which the log looks up
(``LogSource.offset_for_timestamp``); where no record is, the partition's end.
The planner turns such a spec into the offsets found (``times_for``,
``found_offsets``) before the arithmetic here sees it.

An offset below the log start is raised to it: records that retention
removed cannot be read. An offset past the log end is not clamped: no record
is there (a ``committed:`` offset of a topic made again with fewer records, an
offset mistyped), and a batch read refuses it (``OptionError`` from
``resolve``, naming the option, the partition, the offset and the bounds), as
Spark's Kafka source fails a batch whose beginning offset is after its ending
one, or whose records up to its ending offset cannot be fetched. So does a
start after the end (``plan_ranges``). A stream takes the offset as it is
(``named_offset``) and says what it does with it (``PastEnd``, ``stream_source``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from service.core.models import TopicPartition
from service.core.rules import INT64_MAX

EARLIEST_CODE: Final = -2
LATEST_CODE: Final = -1
COMMITTED_PREFIX: Final = "committed:"
# Characters of a Kafka topic name, plus the comma that separates a list of them.
_NAME_LIST_RE: Final = re.compile(r"[A-Za-z0-9._\-,\s]+")
_DIGITS_RE: Final = re.compile(r"[0-9]+")  # str.isdigit() takes superscripts and other scripts' digits too

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


@dataclass(frozen=True, slots=True)
class AtTime:
    """Every partition at its first record timestamped at or after ``ms`` (``startingTimestamp``);
    where there is none, its end, or an error with ``strict`` (Spark's
    ``startingOffsetsByTimestampStrategy=error``)."""

    ms: int
    option: str
    strict: bool = False


@dataclass(frozen=True, slots=True)
class ByTimestamp:
    """Each partition at its first record at or after its own time (``startingOffsetsByTimestamp``);
    ``strict`` as ``AtTime``'s."""

    times: Mapping[TopicPartition, int]
    option: str
    strict: bool = False


TimeSpec = AtTime | ByTimestamp
OffsetSpec = Earliest | Latest | Committed | Explicit | AtTime | ByTimestamp
STRATEGY: Final = "startingOffsetsByTimestampStrategy"
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


def parse_side(lowered: Mapping[str, str], side: Side) -> OffsetSpec:
    """The start (or end) a read's options give, by Spark's precedence: ``startingTimestamp`` over
    ``startingOffsetsByTimestamp`` over ``startingOffsets`` (``ending…`` likewise); every one given
    is checked. ``lowered`` is Spark's option map with lower-case keys. Raises ``OptionError``."""
    prefix = "starting" if side == "start" else "ending"
    at, by, offsets = f"{prefix}Timestamp", f"{prefix}OffsetsByTimestamp", f"{prefix}Offsets"
    strict = side == "start" and _strategy(lowered) == "error"
    given: list[OffsetSpec] = []
    if (raw := lowered.get(at.lower())) is not None:
        given.append(AtTime(parse_timestamp(raw, option=at), at, strict))
    if (raw := lowered.get(by.lower())) is not None:
        given.append(ByTimestamp(parse_timestamps_json(raw, option=by), by, strict))
    if (raw := lowered.get(offsets.lower())) is not None:
        given.append(parse_offset_spec(raw, option=offsets))
    return given[0] if given else (EARLIEST if side == "start" else LATEST)


def _strategy(lowered: Mapping[str, str]) -> str:
    """``startingOffsetsByTimestampStrategy``: what a starting time no record reaches gives."""
    raw = lowered.get(STRATEGY.lower(), "latest")
    if raw.strip().lower() not in ("latest", "error"):
        raise OptionError(f"{STRATEGY}: {raw!r} is not latest or error")
    return raw.strip().lower()


def parse_count(text: str, *, option: str) -> int:
    """A whole number of 1 or more, in ASCII digits; raises ``OptionError``."""
    if _DIGITS_RE.fullmatch(text) is None or int(text) < 1:
        raise OptionError(f"{option}: {text!r} is not a positive number")
    return int(text)


def parse_timestamp(text: str, *, option: str) -> int:
    """A time in milliseconds since the epoch, 0 or later; raises ``OptionError``."""
    if _DIGITS_RE.fullmatch(text.strip()) is None or int(text) > INT64_MAX:
        raise OptionError(f"{option}: {text!r} is not a time in milliseconds since the epoch (0 or more)")
    return int(text)


def parse_timestamps_json(text: str, *, option: str) -> dict[TopicPartition, int]:
    """``{"topic": {"partition": ms}}`` -> a time per partition; raises ``OptionError``."""
    out: dict[TopicPartition, int] = {}
    for tp, ms in _partition_json(text, option=option, example='{"orders": {"0": 1700000000000}}').items():
        if type(ms) is not int or not 0 <= ms <= INT64_MAX:
            raise OptionError(
                f"{option}: {ms!r} of {tp.topic}-{tp.partition} is not a time in milliseconds since the epoch"
            )
        out[tp] = ms
    return out


def parse_offsets_json(text: str, *, option: str) -> dict[TopicPartition, int]:
    """``{"topic": {"partition": offset}}`` -> offsets per partition; raises ``OptionError``."""
    out: dict[TopicPartition, int] = {}
    for tp, offset in _partition_json(text, option=option, example='{"orders": {"0": 42}}').items():
        if type(offset) is not int or offset < EARLIEST_CODE:
            raise OptionError(
                f"{option}: offset {offset!r} of {tp.topic}-{tp.partition} is not an offset, -1 or -2"
            )
        out[tp] = offset
    return out


def _partition_json(text: str, *, option: str, example: str) -> dict[TopicPartition, object]:
    """``{"topic": {"partition": value}}`` -> the values per partition, unchecked."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise OptionError(f"{option}: not valid JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise OptionError(f"{option}: expected an object like {example}")
    out: dict[TopicPartition, object] = {}
    for topic, partitions in doc.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"{option}: the value of topic {topic!r} must be an object of partitions")
        for partition, value in partitions.items():
            if _DIGITS_RE.fullmatch(partition) is None:
                raise OptionError(f"{option}: {partition!r} of topic {topic!r} is not a partition number")
            out[TopicPartition(topic, int(partition))] = value
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
    """The offset ``spec`` names for ``tp`` (``named_offset``); one past the log end is an
    ``OptionError`` saying so (``PastEnd``)."""
    offset = named_offset(spec, tp, bounds, side=side, committed=committed)
    if offset > bounds[1]:
        raise OptionError(PastEnd(spec, side, tp, offset, bounds).describe())
    return offset


def named_offset(
    spec: OffsetSpec,
    tp: TopicPartition,
    bounds: Bounds,
    *,
    side: Side,
    committed: Mapping[TopicPartition, int] | None = None,
) -> int:
    """The offset ``spec`` names for ``tp``: raised to the log start if below it, and kept as it
    is past the log end."""
    log_start, log_end = bounds
    if isinstance(spec, Earliest):
        offset = log_start
    elif isinstance(spec, Latest):
        offset = log_end
    elif isinstance(spec, Committed):
        if committed is None:
            raise OptionError(f"committed:{spec.group} needs the group's committed offsets")
        offset = committed.get(tp, log_start)
    elif isinstance(spec, AtTime | ByTimestamp):
        raise OptionError(f"{spec.option} needs the offsets the log finds for its times (found_offsets)")
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
    return max(offset, log_start)


@dataclass(frozen=True, slots=True)
class PastEnd:
    """An offset a spec named past its partition's log end, where no record is."""

    spec: OffsetSpec
    side: Side
    tp: TopicPartition
    offset: int
    bounds: Bounds

    def describe(self) -> str:
        where, (log_start, log_end) = f"{self.tp.topic}-{self.tp.partition}", self.bounds
        past = f"past its log end (log start {log_start}, log end {log_end}), where no record is"
        if isinstance(self.spec, Committed):
            # A consumer of the group resets such a position by its auto.offset.reset.
            return (
                f"committed:{self.spec.group}: {where} is committed at {self.offset}, {past}; a consumer "
                "of the group resets it by its auto.offset.reset. Read from earliest, latest or "
                "per-partition JSON offsets instead"
            )
        option = "startingOffsets" if self.side == "start" else "endingOffsets"
        return f"{option}: {where} is given offset {self.offset}, {past} yet"


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
        if start > end:  # as Spark's Kafka source fails such a range, rather than read nothing
            raise OptionError(
                f"startingOffsets: {tp.topic}-{tp.partition} begins at {start}, after its ending offset "
                f"{end} (log start {b[0]}, log end {b[1]})"
            )
        out.append(OffsetRange(tp.topic, tp.partition, start, end))
    return out


def times_for(spec: TimeSpec, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """The time to look up in each of ``tps``, the partitions read.

    Per-partition times must name exactly the partitions read, as Spark's
    Kafka source wants them: one not read, or one read and left out, is an
    ``OptionError``.
    """
    wanted = sorted(set(tps))
    if isinstance(spec, AtTime):
        return dict.fromkeys(wanted, spec.ms)
    if unknown := sorted(set(spec.times) - set(wanted)):
        raise OptionError(f"{spec.option}: {_listed(unknown)} is not a partition of the topics read")
    if missing := sorted(set(wanted) - set(spec.times)):
        raise OptionError(
            f"{spec.option}: no time for {_listed(missing)}; name every partition of the topics read"
        )
    return {tp: spec.times[tp] for tp in wanted}


def found_offsets(found: Mapping[TopicPartition, int | None], spec: TimeSpec) -> Explicit:
    """The offsets the log found for ``spec``'s times: where no record is at or after the time
    (None), the partition's end, as Spark's ``startingOffsetsByTimestampStrategy=latest`` does,
    or, for a strict ``spec`` (``…=error``), an ``OptionError`` naming the partitions."""
    if spec.strict and (none := sorted(tp for tp, offset in found.items() if offset is None)):
        raise OptionError(
            f"{spec.option}: {_listed(none)} has no record at or after its time "
            f"({STRATEGY}=error; latest starts there at the end)"
        )
    return Explicit({tp: LATEST_CODE if offset is None else offset for tp, offset in found.items()})


def _listed(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in tps)


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
        """Records after the committed offset, counted as the gateway's lag endpoint counts them:
        negative for a commit past the log end, a position no record is at (never shown as 0)."""
        return self.end_offset - (self.committed if self.committed is not None else 0)


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
