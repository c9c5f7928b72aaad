"""The embedded coordinator's share-partition states in memory: each as its whole JSON, which a
change (``change_share_states``) replaces.

A stored state (``StoredShare``) is what ``store_share_states`` wrote, or what the changes since
made of it: its JSON bytes and its version. A change (``SharePartition.change_json``: per span
of offsets it touched, the runs now in flight there; the new start and end) is made to the
state's runs (``service.core.shares.runs``): a state holds a run per stretch of records in one
delivery state, not a row per record, so decoding, changing and encoding it again costs what
its runs do, a few for a poll's records. A state or a change of the previous version (a row per
record) is read as runs of one record, so its data still loads.

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

from service.core.shares.runs import Row, Span, apply_spans, change_spans, state_rows
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


class StoredShare:
    """One partition's stored state (its JSON, as ``share_states`` answers it) and version."""

    __slots__ = ("data", "version")

    def __init__(self, data: bytes, version: int) -> None:
        self.data = data
        self.version = version

    @classmethod
    def empty(cls, version: int) -> StoredShare:
        """A partition first stored by a change: nothing in flight yet."""
        return cls(b"", version)

    def size(self) -> int:
        """The bytes of the whole state's JSON."""
        return len(self.data)

    def rows(self) -> list[Row]:
        """The runs in flight, decoded (a new list every call)."""
        if not self.data:
            return []
        try:
            state = orjson.loads(self.data)
        except orjson.JSONDecodeError:
            state = json.loads(self.data)  # escapes orjson refuses (a lone surrogate)
        try:
            if not isinstance(state, dict):
                raise TypeError(type(state).__name__)
            return state_rows(state)
        except _MALFORMED:
            raise InvalidPayload(f"The stored state {_NOT_RUNS}; store it whole.") from None

    def apply(self, change: ShareChange, version: int) -> None:
        """``change`` made (checked by ``prepare_change``), at ``version``."""
        self.data = change.after(self)
        self.version = version


@dataclass(slots=True)
class ShareChange:
    """A change of one partition's state, decoded: the spans it sets, the new start and end, and
    with ``whole`` every run (it replaces what was stored). ``after`` computes the state it makes
    of a stored one once: sizing it before the write, then applying it, cost one pass."""

    start: int
    end: int
    spans: list[Span]
    whole: list[Row] | None
    _made: tuple[bytes | None, bytes] | None = field(default=None, repr=False)  # (of what, made)

    def after(self, stored: StoredShare | None) -> bytes:
        """The whole state's JSON once this change is made to ``stored``."""
        base = None if stored is None or not stored.data else stored.data
        made = self._made
        if made is not None and made[0] is base:
            return made[1]
        if self.whole is not None:
            rows = list(self.whole)
        else:
            rows = stored.rows() if stored is not None else []
            apply_spans(rows, self.spans)
        data = dumps({"start": self.start, "end": self.end, "runs": rows})
        self._made = (base, data)
        return data

    def size_after(self, stored: StoredShare | None) -> int:
        """The bytes of the whole state once this change is made to ``stored``."""
        return len(self.after(stored))


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
