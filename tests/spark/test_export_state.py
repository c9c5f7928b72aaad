"""The export's commit protocol without Spark: its decisions, and recovery from every point a run can die."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from service.core.models import TopicPartition
from spark_jobs.export import ExportOutput, recover
from spark_jobs.export_state import (
    CorruptState,
    ExportPlan,
    ExportState,
    Move,
    committed_state,
    final_name,
    plan_export,
    published_state,
    staging_name,
)
from spark_jobs.offsets import EARLIEST, LATEST, Committed, OffsetRange
from spark_jobs.progress import Progress

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)


def test_the_progress_record_round_trips() -> None:
    state = ExportState(
        run=3,
        offsets={A0: 10, A1: 0},
        publishing=(Move("date=2024-05-01/part-0.parquet", "date=2024-05-01/run-00000003-part-0.parquet"),),
        topic="a",
    )
    assert ExportState.from_json(state.to_json()) == state


@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b'{"format": 99}',
        b'{"format": 1, "run": 1, "offsets": {"a": {"0": "x"}}, "publishing": []}',
        b'{"format": 1, "run": 1, "offsets": {}, "publishing": [["../../etc/passwd", "x"]]}',
        b'{"format": 1, "run": 1, "offsets": {}, "publishing": [["a.parquet", "_brokergate/export.json"]]}',
    ],
)
def test_a_damaged_progress_record_is_refused(raw: bytes) -> None:
    with pytest.raises(CorruptState):
        ExportState.from_json(raw)


def test_published_names_carry_the_run() -> None:
    assert final_name(7, "date=2024-05-01/part-00000-x.c000.snappy.parquet") == (
        "date=2024-05-01/run-00000007-part-00000-x.c000.snappy.parquet"
    )
    assert staging_name(7) == "run-00000007"


def test_a_run_continues_where_the_last_one_stopped() -> None:
    state = ExportState(run=2, offsets={A0: 7})
    bounds = {A0: (0, 12), A1: (0, 5)}
    plan = plan_export(state, [A0, A1], bounds, LATEST, LATEST)
    # a-0 from its recorded offset; a-1, never exported, from the starting spec (latest: nothing old)
    assert plan.ranges == [OffsetRange("a", 0, 7, 12), OffsetRange("a", 1, 5, 5)]
    assert plan.records == 5 and plan.warnings == []
    again = plan_export(committed_state(state, 3, plan, ()), [A0, A1], bounds, EARLIEST, LATEST)
    assert again.records == 0


def test_records_lost_to_retention_or_a_recreated_topic_are_reported() -> None:
    state = ExportState(run=1, offsets={A0: 3, A1: 50})
    plan = plan_export(state, [A0, A1], {A0: (10, 20), A1: (0, 8)}, EARLIEST, LATEST)
    assert plan.ranges == [OffsetRange("a", 0, 10, 20), OffsetRange("a", 1, 50, 50)]
    assert "offsets 3..9 were deleted by retention" in plan.warnings[0]
    assert "re-created" in plan.warnings[1]
    # The recreated partition keeps its recorded offset until the log passes it.
    assert committed_state(state, 2, plan, ()).offsets[A1] == 50


def test_ending_at_a_groups_commits() -> None:
    plan = plan_export(
        ExportState(),
        [A0, A1],
        {A0: (0, 10), A1: (0, 10)},
        EARLIEST,
        Committed("g"),
        committed={"g": {A0: 4}},
    )
    assert plan.ranges == [OffsetRange("a", 0, 0, 4), OffsetRange("a", 1, 0, 0)]


def test_the_commit_point_records_offsets_and_files_together() -> None:
    plan = ExportPlan([OffsetRange("a", 0, 0, 5), OffsetRange("a", 1, 2, 2)], [])
    moves = (Move("d/x.parquet", "d/run-00000001-x.parquet"),)
    state = committed_state(ExportState(offsets={A1: 2}), 1, plan, moves)
    assert (state.run, dict(state.offsets), state.publishing) == (1, {A0: 5, A1: 2}, moves)
    assert published_state(state).publishing == ()


def staged(out: ExportOutput, run: int, names: list[str]) -> list[Move]:
    directory = out.staging / staging_name(run)
    moves = []
    for name in names:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(name.encode())
        moves.append(Move(name, final_name(run, name)))
    return moves


def visible(out: ExportOutput) -> list[str]:
    return sorted(
        str(p.relative_to(out.root)) for p in out.root.rglob("*.parquet") if "_brokergate" not in p.parts
    )


def test_recovery_publishes_what_a_run_committed_and_discards_what_it_had_not(tmp_path: Path) -> None:
    out = ExportOutput(tmp_path / "export")
    out.meta.mkdir(parents=True)
    # Run 4 died in the middle of publishing: one of its files is already in place.
    moves = staged(out, 4, ["date=2024-05-01/p0.parquet", "date=2024-05-02/p1.parquet"])
    first = out.root / moves[0].final
    first.parent.mkdir(parents=True)
    (out.staging / staging_name(4) / moves[0].staged).rename(first)
    out.save(ExportState(run=4, offsets={A0: 40}, publishing=tuple(moves)))
    # A run 5 started afterwards and died before its commit point.
    staged(out, 5, ["date=2024-05-02/p9.parquet"])

    said = io.StringIO()
    state = recover(out, out.load(), Progress("export", out=said))
    assert state == ExportState(run=4, offsets={A0: 40})
    assert out.load() == state
    assert visible(out) == [
        "date=2024-05-01/run-00000004-p0.parquet",
        "date=2024-05-02/run-00000004-p1.parquet",
    ]
    assert out.staged_runs() == []
    assert "finished publishing run 4" in said.getvalue() and "discarding run-00000005" in said.getvalue()


def test_recovery_refuses_when_a_committed_file_is_gone(tmp_path: Path) -> None:
    out = ExportOutput(tmp_path / "export")
    out.meta.mkdir(parents=True)
    out.save(ExportState(run=1, publishing=(Move("d/x.parquet", "d/run-00000001-x.parquet"),)))
    with pytest.raises(FileNotFoundError, match="changed by something else"):
        recover(out, out.load(), Progress("export", out=io.StringIO()))
