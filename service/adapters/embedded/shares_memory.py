"""The embedded coordinator's share-partition states in memory: whole, or as rows a change edits.

A stored state (``StoredShare``) is what ``store_share_states`` wrote, as its JSON bytes, until
a change (``change_share_states``, a ``SharePartition.change_json``: the records it sets, the
offsets it drops, the new start and end) edits it: then it is kept as its start, end and one
JSON text per record in flight, so that a change costs what it touches, not the whole state,
and the whole JSON is assembled again only when it is read or snapshotted.

``ShareChange`` is a change checked and sized before anything is written (all or none), then
applied after its journal frame is durable; replaying the journal applies it the same way.

Pure, no I/O. Collaborators: ``shares_format`` (the frames), ``share_states`` (the checks).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from service.errors import InvalidPayload

from ..share_states import encode_state

__all__ = ["ShareChange", "StoredShare", "dumps", "prepare_change"]

_NOT_ROWS: Final = "is not a share-partition's state (start, end, records in flight)"


def dumps(value: Any) -> bytes:
    """Compact JSON, ASCII-escaped when a text is not valid UTF-8 (a lone surrogate)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


class StoredShare:
    """One partition's stored state and version (see the module docstring)."""

    __slots__ = ("_data", "end", "rows", "rows_bytes", "start", "version")

    def __init__(self, data: bytes, version: int) -> None:
        self._data: bytes | None = data
        self.version = version
        self.start = self.end = 0
        self.rows: dict[int, bytes] | None = None  # offset -> the record's JSON, once edited
        self.rows_bytes = 0  # of every row, and the commas between them

    @classmethod
    def empty(cls, version: int) -> StoredShare:
        """A partition first stored by a change: no rows yet."""
        stored = cls(b"", version)
        stored._data, stored.rows = None, {}
        return stored

    @property
    def data(self) -> bytes:
        """The whole state's JSON (assembled from the rows, once, after a change)."""
        if self._data is None:
            rows = self.rows
            assert rows is not None
            self._data = b"".join(
                (
                    b'{"start":%d,"end":%d,"records":[' % (self.start, self.end),
                    b",".join(rows[o] for o in sorted(rows)),
                    b"]}",
                )
            )
        return self._data

    def size(self) -> int:
        """The bytes of ``data``, without assembling it."""
        if self._data is not None:
            return len(self._data)
        return len(b'{"start":%d,"end":%d,"records":[]}' % (self.start, self.end)) + self.rows_bytes

    def edit(self) -> dict[int, bytes]:
        """The rows, split out of the whole JSON the first time a change edits it."""
        if self.rows is None:
            try:
                state = orjson.loads(self.data)
            except orjson.JSONDecodeError:
                state = json.loads(self.data)
            if not isinstance(state, dict) or not isinstance(state.get("records"), list):
                raise InvalidPayload(f"The stored state {_NOT_ROWS}; store it whole.")
            try:
                self.start, self.end = int(state["start"]), int(state["end"])
                rows = {int(row[0]): dumps(row) for row in state["records"]}
            except (KeyError, TypeError, ValueError, IndexError):
                raise InvalidPayload(f"The stored state {_NOT_ROWS}; store it whole.") from None
            self.rows = rows
            self.rows_bytes = sum(map(len, rows.values())) + max(0, len(rows) - 1)
        return self.rows

    def apply(self, change: ShareChange, version: int) -> None:
        """``change`` made (checked by ``prepare_change`` against this state), at ``version``."""
        rows = {} if change.whole else self.edit()
        if change.whole:
            self.rows, self.rows_bytes = rows, 0
        count = len(rows)
        total = self.rows_bytes - (count - 1 if count else 0)  # rows alone, commas apart
        for offset in change.drop:
            gone = rows.pop(offset, None)
            if gone is not None:
                total -= len(gone)
        for offset, row in change.rows:
            old = rows.get(offset)
            total += len(row) - (len(old) if old is not None else 0)
            rows[offset] = row
        self.rows_bytes = total + max(0, len(rows) - 1)
        self.start, self.end, self.version, self._data = change.start, change.end, version, None


@dataclass(frozen=True, slots=True)
class ShareChange:
    """A change of one partition's state, decoded: the rows it sets (JSON each), the offsets it
    drops, the new start and end, and whether it replaces every row (``whole``)."""

    start: int
    end: int
    rows: list[tuple[int, bytes]]
    drop: list[int]
    whole: bool

    def size_after(self, stored: StoredShare | None) -> int:
        """The bytes of the whole state once this change is applied to ``stored``."""
        head = len(b'{"start":%d,"end":%d,"records":[]}' % (self.start, self.end))
        if self.whole or stored is None:
            kept: Mapping[int, bytes] = {}
            count, total = 0, 0
        else:
            kept = stored.edit()
            count = len(kept)
            total = stored.rows_bytes - (count - 1 if count else 0)
        dropped = set(self.drop)
        for offset in dropped:
            gone = kept.get(offset)
            if gone is not None:
                total, count = total - len(gone), count - 1
        for offset, row in self.rows:
            old = kept.get(offset)
            if old is None or offset in dropped:
                count += 1
                total += len(row)
            else:
                total += len(row) - len(old)
        return head + total + max(0, count - 1)


def prepare_change(change: Mapping[str, Any], where: str) -> tuple[ShareChange, bytes]:
    """A change as given (``SharePartition.change_json``) checked and decoded, and its JSON for the
    journal. ``InvalidPayload`` for anything else."""
    try:
        rows = [(int(row[0]), dumps(row)) for row in change["records"]]
        drop = [int(o) for o in change.get("drop", ())]
        decoded = ShareChange(int(change["start"]), int(change["end"]), rows, drop, bool(change.get("whole")))
    except (KeyError, TypeError, ValueError, IndexError):
        raise InvalidPayload(f"The change of {where} is not a share-partition's change.") from None
    return decoded, encode_state(change, where)
