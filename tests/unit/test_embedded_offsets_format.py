"""The embedded coordinator's offsets files, read and written without a coordinator.

What the coordinator does with them (commits, crashes, compaction) is tested in
``test_embedded_coordinator.py``; this is the format alone.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.adapters.embedded.offsets_format import (
    JOURNAL_HEADER,
    Offsets,
    commit_frame,
    journal_name,
    list_journals,
    read_snapshot,
    replay_journal,
    snapshot_bytes,
)
from service.core.models import TopicPartition
from service.errors import BackendError

_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=20)  # surrogates too
_OFFSETS = st.dictionaries(
    st.builds(TopicPartition, _TEXT, st.integers(0, 2**31 - 1)), st.integers(0, 2**63 - 1), max_size=5
)


@given(st.dictionaries(_TEXT, _OFFSETS, max_size=4), st.integers(0, 2**64 - 1))
def test_a_snapshot_reads_back_what_was_written(groups: dict[str, Offsets], next_seq: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "offsets.snapshot"
        path.write_bytes(snapshot_bytes(next_seq, groups))
        offsets: dict[str, Offsets] = {}
        assert read_snapshot(path, offsets) == next_seq
    assert offsets == {g: o for g, o in groups.items() if o}  # a group without offsets is left out


def test_a_journal_replays_its_commits_in_order_and_stops_at_a_torn_tail(tmp_path: Path) -> None:
    first = commit_frame("g", [(TopicPartition("t", 0), 1)])
    second = commit_frame("g", [(TopicPartition("t", 0), 2), (TopicPartition("t", 1), 5)])
    full = JOURNAL_HEADER + first + second
    path = tmp_path / journal_name(0)
    for cut in range(len(JOURNAL_HEADER) + len(first), len(full) + 1):
        path.write_bytes(full[:cut])
        offsets: dict[str, Offsets] = {}
        intact, size = replay_journal(path, offsets)
        if cut == len(full):
            assert (intact, offsets) == (cut, {"g": {TopicPartition("t", 0): 2, TopicPartition("t", 1): 5}})
        else:  # the second commit is not there: never acknowledged
            assert (intact, size) == (len(JOURNAL_HEADER) + len(first), cut)
            assert offsets == {"g": {TopicPartition("t", 0): 1}}


def test_journals_are_listed_in_sequence_order_and_nothing_else_is(tmp_path: Path) -> None:
    for name in (journal_name(10), journal_name(2), "offsets.snapshot", "offsets-2.journal", "x.tmp"):
        (tmp_path / name).write_bytes(b"")
    assert list_journals(tmp_path) == [(2, tmp_path / journal_name(2)), (10, tmp_path / journal_name(10))]


def test_a_foreign_file_is_refused_not_read(tmp_path: Path) -> None:
    path = tmp_path / "offsets.snapshot"
    path.write_bytes(b"not a snapshot at all")
    with pytest.raises(BackendError, match="not a brokergate snapshot"):
        read_snapshot(path, {})
    journal = tmp_path / journal_name(0)
    journal.write_bytes(b"garbage!")
    with pytest.raises(BackendError, match="not a brokergate journal"):
        replay_journal(journal, {})
    assert read_snapshot(tmp_path / "absent", {}) == 0  # no snapshot yet: journals from 0
