"""The export's commit protocol, as pure decisions over its progress record.

The output directory of an export holds the published Parquet files
(``date=YYYY-MM-DD/run-NNNNNNNN-part-….parquet``) and, in ``_brokergate/``
(which Spark and Parquet readers skip, as they skip every ``_`` name), the
progress record ``export.json`` and the staging area. One run:

1. **recover**: if the record names files still being published, publish
   them; then discard everything in ``staging/``: a run that died before its
   commit point left only files nobody will ever publish.
2. **plan**: per partition, from the recorded next offset (or the starting
   spec for partitions never exported) to the ending spec. Nothing to read:
   stop here, writing nothing at all.
3. **write** the records into ``staging/run-NNNNNNNN/`` with Spark, and fsync them.
4. **commit point**: atomically replace ``export.json`` with the new offsets
   *and* the list of staged files to publish (one rename).
5. **publish**: rename each staged file into its date directory (a rename per
   file; idempotent, so a crash in the middle is finished by step 1), then
   record that nothing is left to publish and remove the staging directory.

A run killed before step 4 leaves nothing visible and the offsets as they
were, so the next run reads the same records again; killed after it, the next
run finishes publishing before anything else. Either way every record lands
in exactly one published file. The only moment a reader can see part of a
run is the publish step itself: renames of already written files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any, Final

from service.core.models import TopicPartition

from .offsets import Bounds, OffsetRange, OffsetSpec, resolve

STATE_FORMAT: Final = 1
META_DIR: Final = "_brokergate"
STATE_FILE: Final = "export.json"
LOCK_FILE: Final = "export.lock"
STAGING_DIR: Final = "staging"


class CorruptState(Exception):
    """An ``export.json`` this version cannot read; the export refuses to guess."""


@dataclass(frozen=True, slots=True)
class Move:
    """One staged file of a committed run and where it is published, both relative paths."""

    staged: str
    final: str


@dataclass(frozen=True, slots=True)
class ExportState:
    """What ``export.json`` records: the last committed run and the next offset of every partition."""

    run: int = 0
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    publishing: tuple[Move, ...] = ()  # files of run ``run`` that may not be published yet
    topic: str = ""

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "format": STATE_FORMAT,
            "run": self.run,
            "topic": self.topic,
            "offsets": {},
            "publishing": [[m.staged, m.final] for m in self.publishing],
        }
        for tp in sorted(self.offsets):
            doc["offsets"].setdefault(tp.topic, {})[str(tp.partition)] = self.offsets[tp]
        return json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n"

    @classmethod
    def from_json(cls, raw: bytes) -> ExportState:
        try:
            doc = json.loads(raw)
            if doc.get("format") != STATE_FORMAT:
                raise CorruptState(f"unknown export.json format {doc.get('format')!r}")
            offsets = {
                TopicPartition(str(topic), int(p)): int(off)
                for topic, parts in doc["offsets"].items()
                for p, off in parts.items()
            }
            moves = tuple(Move(str(s), str(f)) for s, f in doc["publishing"])
            run = int(doc["run"])
        except CorruptState:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptState(f"export.json is damaged: {exc!r}") from exc
        for m in moves:
            _check_relative(m.staged)
            _check_relative(m.final)
        return cls(run=run, offsets=offsets, publishing=moves, topic=str(doc.get("topic", "")))


def staging_name(run: int) -> str:
    return f"run-{run:08d}"


def final_name(run: int, staged: str) -> str:
    """Where a staged file of ``run`` is published: same directory, name prefixed with the run."""
    path = PurePosixPath(_check_relative(staged))
    return str(path.with_name(f"{staging_name(run)}-{path.name}"))


def _check_relative(path: str) -> str:
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or any(p in ("..", ".", "") for p in parts) or parts[0] == META_DIR:
        raise CorruptState(f"{path!r} is not a file path inside the output")
    return path


@dataclass(frozen=True, slots=True)
class ExportPlan:
    """The ranges one run reads, and what the user should know about them."""

    ranges: list[OffsetRange]
    warnings: list[str]

    @property
    def records(self) -> int:
        """Offsets to read (the records, unless the log has gaps)."""
        return sum(r.size for r in self.ranges)


def plan_export(
    state: ExportState,
    tps: Iterable[TopicPartition],
    bounds: Mapping[TopicPartition, Bounds],
    starting: OffsetSpec,
    ending: OffsetSpec,
    *,
    committed: Mapping[str, Mapping[TopicPartition, int]] | None = None,
) -> ExportPlan:
    """From the recorded progress (or ``starting``, for new partitions) to ``ending``."""
    groups = committed or {}

    def of(spec: OffsetSpec) -> Mapping[TopicPartition, int] | None:
        return groups.get(getattr(spec, "group", ""))

    ranges, warnings = [], []
    for tp in sorted(set(tps)):
        log_start, log_end = bounds[tp]
        done = state.offsets.get(tp)
        if done is None:
            start = resolve(starting, tp, bounds[tp], side="start", committed=of(starting))
        elif done < log_start:
            warnings.append(f"{tp}: offsets {done}..{log_start - 1} were deleted by retention before export")
            start = log_start
        elif done > log_end:
            warnings.append(
                f"{tp}: exported up to {done} but the log ends at {log_end} (was the topic re-created?); "
                "waiting for it to pass the exported offset"
            )
            ranges.append(OffsetRange(tp.topic, tp.partition, done, done))
            continue
        else:
            start = done
        end = resolve(ending, tp, bounds[tp], side="end", committed=of(ending))
        ranges.append(OffsetRange(tp.topic, tp.partition, start, max(start, end)))
    return ExportPlan(ranges, warnings)


def committed_state(state: ExportState, run: int, plan: ExportPlan, moves: Iterable[Move]) -> ExportState:
    """The record written at the commit point: offsets advanced to the ends read, files to publish."""
    offsets = dict(state.offsets)
    offsets.update({r.tp: r.end for r in plan.ranges})
    return replace(state, run=run, offsets=offsets, publishing=tuple(moves))


def published_state(state: ExportState) -> ExportState:
    return replace(state, publishing=())
