"""The embedded coordinator's share-partition states in memory: each as its whole JSON, which a
change (``change_share_states``) replaces.

A stored state (``StoredShare``) is what ``store_share_states`` wrote, as its JSON bytes, until
a change (``change_share_states``, a ``SharePartition.change_json``: per span of offsets it
touched, the runs now in flight there; the new start and end) edits it: then it is kept as its
runs (``service.core.shares.stored``: a run per stretch of records in one delivery state, not a
row per record) with each run's JSON, so that a change costs what it touches, and the whole JSON
is assembled again only when it is read or snapshotted. A state or a change of the previous
version (a row per record) is read as runs of one record, so its data still loads.

``ShareChange`` is a change checked and sized before anything is written (all or none), then
applied after its journal frame is durable; replaying the journal applies it the same way.

Pure, no I/O. Collaborators: ``shares_format`` (the frames), ``share_states`` (the checks).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from service.core.shares.stored import Row, Span, change_spans, splice_plan, state_rows
from service.errors import InvalidPayload

from ..share_states import encode_state

__all__ = ["ShareChange", "StoredShare", "dumps", "prepare_change"]

_NOT_RUNS: Final = "is not a share-partition's state (start, end, runs in flight)"
_MALFORMED: Final = (KeyError, TypeError, ValueError, IndexError, AttributeError)


def dumps(value: Any) -> bytes:
    """Compact JSON, ASCII-escaped when a text is not valid UTF-8 (a lone surrogate)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


class Runs:
    """A stored state decoded: start, end, its canonical rows and each row's JSON (the bytes of
    all of them in ``total``), so that a change re-encodes only the rows it makes."""

    __slots__ = ("end", "rows", "start", "texts", "total")

    def __init__(
        self, start: int, end: int, rows: list[Row], texts: list[bytes], total: int | None = None
    ) -> None:
        self.start, self.end, self.rows, self.texts = start, end, rows, texts
        self.total = sum(map(len, texts)) if total is None else total

    def size(self) -> int:
        """The bytes of the whole state's JSON."""
        return len(_HEAD % (self.start, self.end)) + 3 + self.total + max(0, len(self.rows) - 1)

    def json(self) -> bytes:
        return b"".join((_HEAD % (self.start, self.end), b"[", b",".join(self.texts), b"]}"))


_HEAD: Final = b'{"start":%d,"end":%d,"runs":'


class StoredShare:
    """One partition's stored state (its JSON, as ``share_states`` answers it) and version: the
    JSON as written until a change edits it, then its runs (``Runs``), assembled again into the
    whole JSON only when it is read or snapshotted."""

    __slots__ = ("_data", "_runs", "version")

    def __init__(self, data: bytes, version: int) -> None:
        self._data: bytes | None = data
        self._runs: Runs | None = None
        self.version = version

    @classmethod
    def empty(cls, version: int) -> StoredShare:
        """A partition first stored by a change: nothing in flight yet."""
        stored = cls(b"", version)
        stored._data, stored._runs = None, Runs(0, 0, [], [])
        return stored

    @property
    def data(self) -> bytes:
        """The whole state's JSON (assembled from its runs, once, after a change)."""
        if self._data is None:
            assert self._runs is not None
            self._data = self._runs.json()
        return self._data

    def size(self) -> int:
        """The bytes of ``data``, without assembling it."""
        return len(self._data) if self._data is not None else self.runs().size()

    def runs(self) -> Runs:
        """The state decoded into runs (the first time a change edits it)."""
        if self._runs is None:
            try:
                state = orjson.loads(self.data)
            except orjson.JSONDecodeError:
                state = json.loads(self.data)  # escapes orjson refuses (a lone surrogate)
            try:
                if not isinstance(state, dict):
                    raise TypeError(type(state).__name__)
                rows = state_rows(state)
                self._runs = Runs(int(state["start"]), int(state["end"]), rows, [dumps(r) for r in rows])
            except _MALFORMED:
                raise InvalidPayload(f"The stored state {_NOT_RUNS}; store it whole.") from None
        return self._runs

    def apply(self, change: ShareChange, version: int) -> None:
        """``change`` made (checked by ``prepare_change``), at ``version``."""
        self._runs = change.after(self)
        self._data = None
        self.version = version


@dataclass(slots=True)
class ShareChange:
    """A change of one partition's state, decoded: the spans it sets, the new start and end, and
    with ``whole`` every run (it replaces what was stored). ``after`` makes it, once, to copies of
    a stored state's rows: sizing it before the write, then applying it, cost one pass, and one
    that is refused leaves the stored state as it was."""

    start: int
    end: int
    spans: list[Span]
    whole: list[Row] | None
    _made: tuple[Runs | None, Runs] | None = field(default=None, repr=False)  # (of what, made)

    def after(self, stored: StoredShare | None) -> Runs:
        """The stored state's runs once this change is made to ``stored``."""
        base = None if stored is None else stored.runs()
        made = self._made
        if made is not None and made[0] is base:
            return made[1]
        if self.whole is not None:
            result = Runs(self.start, self.end, self.whole, [dumps(r) for r in self.whole])
        else:
            rows = [] if base is None else list(base.rows)  # copies: C, a pointer a run
            texts = [] if base is None else list(base.texts)
            total = 0 if base is None else base.total
            for first, last, new in self.spans:
                lo, hi, replacement = splice_plan(rows, first, last, new)
                encoded = [dumps(r) for r in replacement]
                total += sum(map(len, encoded)) - sum(map(len, texts[lo:hi]))
                rows[lo:hi] = replacement
                texts[lo:hi] = encoded
            result = Runs(self.start, self.end, rows, texts, total)
        self._made = (base, result)
        return result

    def size_after(self, stored: StoredShare | None) -> int:
        """The bytes of the whole state once this change is made to ``stored``."""
        return self.after(stored).size()


def prepare_change(change: Mapping[str, Any], where: str) -> tuple[ShareChange, bytes]:
    """A change as given (``SharePartition.change_json``, or the previous version's) checked and
    decoded, and its JSON for the journal. ``InvalidPayload`` for anything else."""
    try:
        whole = state_rows(change) if change.get("whole") else None
        spans = [] if whole is not None else change_spans(change)
        decoded = ShareChange(int(change["start"]), int(change["end"]), spans, whole)
    except _MALFORMED:
        raise InvalidPayload(f"The change of {where} is not a share-partition's change.") from None
    return decoded, encode_state(change, where)
