"""The embedded coordinator's share-state files, read and written without a coordinator.

What the coordinator does with them (writes, crashes, compaction) is tested in
``test_embedded_coordinator.py``; this is the format alone.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.adapters.embedded.offsets_format import OFFSETS, commit_frame
from service.adapters.embedded.shares_format import DELETED, SHARES, StoredShares, change_frame, write_frame
from service.adapters.embedded.shares_memory import StoredShare
from service.core.models import TopicPartition
from service.core.shares.delivery import AckType
from service.core.shares.state import SharePartition
from service.core.shares.stored import apply_change
from service.errors import BackendError

TP = TopicPartition
Plain = dict[str, dict[TopicPartition, tuple[bytes, int]]]  # (state JSON, version) by partition, by group


def stored(states: Plain) -> StoredShares:
    return {g: {tp: StoredShare(data, v) for tp, (data, v) in by.items()} for g, by in states.items()}


def plain(states: StoredShares) -> Plain:
    return {g: {tp: (kept.data, kept.version) for tp, kept in by.items()} for g, by in states.items()}


_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=20)  # surrogates too
_GROUP = st.dictionaries(
    st.builds(TopicPartition, _TEXT, st.integers(0, 2**31 - 1)),
    st.tuples(st.binary(max_size=50), st.integers(0, 2**63 - 1)),
    min_size=1,
    max_size=5,
)


@given(st.dictionaries(_TEXT, _GROUP, max_size=4), st.integers(0, 2**64 - 1))
def test_a_snapshot_reads_back_what_was_written(states: Plain, next_seq: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / SHARES.snapshot_name
        path.write_bytes(SHARES.snapshot_bytes(next_seq, stored(states)))
        read: StoredShares = {}
        assert SHARES.read_snapshot(path, read) == next_seq
    assert plain(read) == states


def test_a_large_group_takes_several_snapshot_frames(tmp_path: Path) -> None:
    big = b"x" * (300 << 10)
    states: Plain = {"sg": {TP("t", p): (big, p) for p in range(10)}, "small": {TP("u", 0): (b"{}", 0)}}
    data = SHARES.snapshot_bytes(7, stored(states))
    assert int.from_bytes(data[13:17], "big") == 4  # frames: 3 for "sg" (4, 4 and 2 states), 1 for "small"
    path = tmp_path / SHARES.snapshot_name
    path.write_bytes(data)
    read: StoredShares = {}
    assert SHARES.read_snapshot(path, read) == 7
    assert plain(read) == states


def test_a_journal_replays_writes_and_deletes_in_order_and_stops_at_a_torn_tail(tmp_path: Path) -> None:
    first = write_frame("sg", [(TP("t", 0), b'{"n":1}', 0), (TP("t", 1), b'{"n":1}', 0)])
    second = write_frame("sg", [(TP("t", 0), b'{"n":2}', 1), (TP("t", 1), b"", DELETED)])
    full = SHARES.journal_header + first + second
    path = tmp_path / SHARES.journal_name(0)
    for cut in range(len(SHARES.journal_header) + len(first), len(full) + 1):
        path.write_bytes(full[:cut])
        states: StoredShares = {}
        intact, size = SHARES.replay_journal(path, states)
        if cut == len(full):
            assert (intact, plain(states)) == (cut, {"sg": {TP("t", 0): (b'{"n":2}', 1)}})
        else:  # the second write is not there at all: never acknowledged
            assert (intact, size) == (len(SHARES.journal_header) + len(first), cut)
            assert plain(states) == {"sg": {TP("t", 0): (b'{"n":1}', 0), TP("t", 1): (b'{"n":1}', 0)}}


def test_a_group_whose_last_state_is_deleted_is_gone(tmp_path: Path) -> None:
    path = tmp_path / SHARES.journal_name(0)
    path.write_bytes(
        SHARES.journal_header
        + write_frame("sg", [(TP("t", 0), b"{}", 0)])
        + write_frame("sg", [(TP("t", 0), b"", DELETED), (TP("t", 9), b"", DELETED)])
    )
    states: StoredShares = {}
    SHARES.replay_journal(path, states)
    assert states == {}


def test_share_and_offsets_journals_are_told_apart(tmp_path: Path) -> None:
    for seq in (3, 1):
        (tmp_path / SHARES.journal_name(seq)).write_bytes(SHARES.journal_header)
        (tmp_path / OFFSETS.journal_name(seq)).write_bytes(OFFSETS.journal_header)
    assert SHARES.list_journals(tmp_path) == [
        (1, tmp_path / SHARES.journal_name(1)),
        (3, tmp_path / SHARES.journal_name(3)),
    ]
    assert [seq for seq, _ in OFFSETS.list_journals(tmp_path)] == [1, 3]
    # An offsets journal read as a share journal (or the other way round) is refused, not misread.
    offsets = tmp_path / OFFSETS.journal_name(5)
    offsets.write_bytes(OFFSETS.journal_header + commit_frame("g", [(TP("t", 0), 1)]))
    with pytest.raises(BackendError, match=r"share states journal .* is not a brokergate journal"):
        SHARES.replay_journal(offsets, {})


def test_a_payload_that_passes_its_crc_but_does_not_parse_is_damage(tmp_path: Path) -> None:
    path = tmp_path / SHARES.journal_name(0)
    path.write_bytes(SHARES.journal_header + commit_frame("g", [(TP("t", 0), 1)]))  # an offsets payload
    with pytest.raises(BackendError, match="is damaged"):
        SHARES.replay_journal(path, {})


def test_changes_replay_onto_the_whole_state_before_them_and_a_torn_one_is_not_there(tmp_path: Path) -> None:
    sp = SharePartition(0)
    sp.acquire("m", 1000, max_records=10, log_offsets=range(6))
    whole = sp.to_json()
    sp.stored()
    sp.acknowledge("m", [0, 2], AckType.ACCEPT, 1001)
    sp.acknowledge("m", [3], AckType.RELEASE, 1001, error="caf\ud800")  # a lone surrogate round-trips
    first = sp.change_json()
    sp.stored()
    sp.acquire("n", 1002, max_records=1, log_offsets=[6])
    second = sp.change_json()
    frames = [
        write_frame("sg", [(TP("t", 0), orjson.dumps(whole), 0)]),
        change_frame(
            "sg", [(TP("t", 0), json.dumps(first).encode(), 1), (TP("t", 1), orjson.dumps(whole), 5)]
        ),
        change_frame("sg", [(TP("t", 0), json.dumps(second).encode(), 2)]),
    ]
    full = SHARES.journal_header + b"".join(frames)
    path = tmp_path / SHARES.journal_name(0)
    for cut in (len(full) - 1, len(full)):
        path.write_bytes(full[:cut])
        states: StoredShares = {}
        SHARES.replay_journal(path, states)
        t0, t1 = states["sg"][TP("t", 0)], states["sg"][TP("t", 1)]
        size = t0.size()
        expected = apply_change(whole, first) if cut < len(full) else sp.to_json()
        assert (json.loads(t0.data), t0.version) == (expected, 1 if cut < len(full) else 2)
        assert (json.loads(t1.data), t1.version) == (apply_change(None, whole), 5)  # new by a change
        assert size == len(t0.data)
