"""The ``ShareStates`` port's wire format: a share-partition's state as stored, and a change to it.

The core hands the port a ``StoredState`` (``SharePartition.to_json``) or a ``StateChange``
(``SharePartition.change_json``) and reads back ``StoredState``; each adapter writes them as JSON
and reads them with the functions here, never with the share-group logic that made them.

A stored state holds ``runs``: rows ``[first, last, state,
deliveries, owner, lock_until_ms, error]``, every offset from ``first`` to ``last`` (both
included) in flight in that one state, as Kafka's share-partitions keep in-flight batches. Rows
are *canonical*: sorted, disjoint, and no two adjacent rows (one's ``last + 1`` the other's
``first``) alike in all else; so equal states store equal rows, and a poll of 500 new records
is one row.

A change (``SharePartition.change_json``) holds ``spans``: ``[first, last, rows]`` each, the
rows now in flight between ``first`` and ``last``; ``splice`` puts them in place of whatever
was there.

The previous version stored a row per offset (``records``: ``[offset, state, deliveries, owner,
lock_until_ms, error]``) and changes as the rows they set (``records``) and the offsets they
dropped (``drop``); both are read here, so its data still loads, and ``record_rows`` writes a
state in its form, for a store it shares with replicas of that version.

Pure, no I/O. Malformed input raises ``KeyError``, ``TypeError``, ``ValueError`` or ``IndexError``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from itertools import pairwise
from operator import ge, itemgetter
from typing import Any, NotRequired, TypedDict

Row = list[Any]  # [first, last, state, deliveries, owner, lock_until_ms, error]
Span = tuple[int, int, list[Row]]  # (first, last, the rows now in flight between them)


class StoredState(TypedDict):
    """A share-partition's state as stored: every offset before ``start`` done, none from ``end``
    acquired yet, and the runs in flight between (``runs``), or, as the previous version wrote it,
    a row per record in flight (``records``)."""

    start: int
    end: int
    runs: NotRequired[list[Row]]
    records: NotRequired[list[list[Any]]]


class StateChange(TypedDict):
    """A change to a stored state: the new ``start`` and ``end``, and per span of offsets it
    touched the runs now in flight there (``spans``: ``[first, last, rows]`` each); with ``whole``,
    ``runs`` replaces every run. The previous version's form: ``records`` set and ``drop`` gone."""

    start: int
    end: int
    spans: NotRequired[list[list[Any]]]
    whole: NotRequired[bool]
    runs: NotRequired[list[Row]]
    records: NotRequired[list[list[Any]]]
    drop: NotRequired[list[int]]


_FIRST = itemgetter(0)
_LAST = itemgetter(1)


def run_row(row: Any) -> Row:
    """A stored run, checked: ``[first, last, state, deliveries, owner, lock_until_ms, error]``."""
    first, last, state, deliveries, owner, until, error = row
    first, last = int(first), int(last)
    if last < first:
        raise ValueError(f"a run from {first} to {last}")
    return [first, last, state, int(deliveries), owner, int(until), error]


def legacy_row(row: Any) -> Row:
    """A run of one offset from the previous version's row: ``[offset, state, deliveries, owner,
    lock_until_ms, error]``."""
    offset, state, deliveries, owner, until, error = row
    offset = int(offset)
    return [offset, offset, state, int(deliveries), owner, int(until), error]


def state_rows(state: Mapping[str, Any]) -> list[Row]:
    """The canonical rows of a stored state, of this version (``runs``) or the previous (``records``)."""
    if "runs" in state:
        rows = [run_row(row) for row in state["runs"]]
    else:
        rows = [legacy_row(row) for row in state["records"]]
    rows.sort(key=_FIRST)
    for before, after in pairwise(rows):
        if after[0] <= before[1]:
            raise ValueError(f"runs overlap at offset {after[0]}")
    return canonical(rows)


def record_rows(state: Mapping[str, Any]) -> StoredState:
    """A stored state (of this version or the previous) in the previous version's form, which
    every version reads: ``{"start", "end", "records"}``, a row ``[offset, state, deliveries,
    owner, lock_until_ms, error]`` per record in flight, ascending. It costs a row per record, so
    only a store that replicas of both versions share writes it (the ZooKeeper coordinator's)."""
    records: list[Row] = []
    add = records.extend
    for first, last, state_, deliveries, owner, until, error in state_rows(state):
        add([[o, state_, deliveries, owner, until, error] for o in range(first, last + 1)])
    return {"start": state["start"], "end": state["end"], "records": records}


def change_records(state: Mapping[str, Any], change: Mapping[str, Any]) -> StoredState:
    """``record_rows(apply_change(state, change))`` for a ``state`` of the previous version's form
    (``records``, a row per record, ascending), made to its rows: each span of the change takes
    the place of the rows between its ends, so that a change costs the records it sets, and the
    rows it leaves are not read one by one."""
    if change.get("whole"):
        return record_rows(change)
    records = list(state["records"])
    offsets = list(map(_FIRST, records))
    if any(map(ge, offsets, offsets[1:])) or set(map(len, records)) - {6}:
        return record_rows(apply_change(state, change))  # not as written: read row by row
    for first, last, new in change_spans(change):
        lo, hi = bisect_left(records, first, key=_FIRST), bisect_right(records, last, key=_FIRST)
        records[lo:hi] = [[o, *row[2:]] for row in new for o in range(row[0], row[1] + 1)]
    return {"start": change["start"], "end": change["end"], "records": records}


def change_spans(change: Mapping[str, Any]) -> list[Span]:
    """What a change sets, span by span, in order: of this version (``spans``; or ``runs``, a span
    each) or the previous (``drop``, then ``records``: a span of one offset each)."""
    if "spans" in change:
        spans: list[Span] = []
        for first, last, rows in change["spans"]:
            first, last = int(first), int(last)
            runs = [run_row(row) for row in rows]
            if any(row[0] < first or row[1] > last for row in runs):
                raise ValueError(f"a run outside its span {first}-{last}")
            spans.append((first, last, runs))
        return spans
    if "runs" in change:  # a state given as a change: its runs set, the rest left as it was
        return [(row[0], row[1], [row]) for row in map(run_row, change["runs"])]
    dropped: list[Span] = [(int(o), int(o), []) for o in change.get("drop", ())]
    return dropped + [(row[0], row[0], [row]) for row in map(legacy_row, change["records"])]


def canonical(rows: Iterable[Row]) -> list[Row]:
    """``rows`` (sorted, disjoint) with every two adjacent alike merged into one."""
    out: list[Row] = []
    for row in rows:
        if out:
            before = out[-1]
            if before[1] + 1 == row[0] and before[2:] == row[2:]:
                out[-1] = [before[0], row[1], *row[2:]]
                continue
        out.append(row)
    return out


def splice_plan(rows: list[Row], first: int, last: int, new: list[Row]) -> tuple[int, int, list[Row]]:
    """What ``splice`` does to ``rows``: ``rows[lo:hi]`` becomes the rows given, canonical."""
    i = bisect_left(rows, first, key=_LAST)
    j = bisect_right(rows, last, key=_FIRST)
    middle: list[Row] = []
    if i < j and rows[i][0] < first:  # the run cut at ``first`` keeps what lies before it
        middle.append([rows[i][0], first - 1, *rows[i][2:]])
    middle += new
    if i < j and rows[j - 1][1] > last:  # and the run cut at ``last`` what lies after
        middle.append([last + 1, *rows[j - 1][1:]])
    lo, hi = max(i - 1, 0), min(j + 1, len(rows))  # the neighbours, which may now merge with it
    return lo, hi, canonical([*rows[lo:i], *middle, *rows[j:hi]])


def splice(rows: list[Row], first: int, last: int, new: list[Row]) -> None:
    """Put ``new`` (sorted rows between ``first`` and ``last``) in place of whatever canonical
    ``rows`` held between them, keeping ``rows`` canonical."""
    lo, hi, replacement = splice_plan(rows, first, last, new)
    rows[lo:hi] = replacement


def apply_spans(rows: list[Row], spans: Iterable[Span]) -> None:
    """Every span of a change spliced into ``rows``, in order."""
    for first, last, new in spans:
        splice(rows, first, last, new)


def apply_change(state: Mapping[str, Any] | None, change: Mapping[str, Any]) -> StoredState:
    """The stored form (``to_json``) a ``change_json`` makes of ``state`` (None: nothing stored);
    either may be of the previous version (a row per record)."""
    if change.get("whole"):
        rows = state_rows(change)
    else:
        rows = [] if state is None else state_rows(state)
        apply_spans(rows, change_spans(change))
    return {"start": change["start"], "end": change["end"], "runs": rows}
