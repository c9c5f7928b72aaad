"""The files of the embedded coordinator's share-partition states: layout and encoding.

Pure format, no state: the ``shares`` journal of ``journal_format``, under
``<data_dir>/coordinator/`` beside the offsets:

``shares-<seq>.journal``
    ``b"BGSJ"`` and the version (``SHARES_FORMAT``, 2), then one frame per write (``store_share_states`` or
    ``delete_share_states``), appended and fdatasync'ed before the call
    returns. Created with the first write: a gateway that never kept a
    share group has no file of it.
``shares.snapshot``
    ``b"BGSS"`` and the version, ``u64`` next journal seq, ``u32`` frame count, then
    frames holding every stored state, none larger than about 1 MiB.

A payload is ``u16 len | group (UTF-8) | u32 count | count x (u16 len | topic
(UTF-8) | i32 partition | i64 version | u32 len | state)``, big-endian; the
state is the partition's JSON object, as stored, and the version the one it
was stored at. Version -1 with an empty state deletes the partition's state.
A write of several partitions is one frame: replayed whole or, torn by a
crash, not at all.

A change (``change_share_states``) is a frame of its own kind: ``0xFF``, then
the same payload with each partition's change (``SharePartition.change_json``:
the records set, the offsets dropped, start and end) in place of its state,
applied to the state before it on replay (``shares_memory``). No payload of a
whole write starts with ``0xFF`` (a group name is never that long). Changes and
states as runs are format 2; format 1 (a row per record, whole writes only) is
read as well, and so are the runs and changes that a release before the
version marks wrote under format 1's header. Snapshots
hold whole states only: a compaction folds the changes into them, so a
partition's journal never grows past the compaction's bound, and a load is
the snapshot, then the writes and changes after it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

import orjson

from service.core.models import TopicPartition
from service.errors import InvalidPayload

from ..format_versions import SHARES_FORMAT
from .journal_format import CorruptPayload, JournalFormat, frame
from .shares_memory import ShareChange, StoredShare, prepare_change

__all__ = [
    "DELETED",
    "SHARES",
    "StoredShares",
    "apply_changes",
    "apply_writes",
    "change_frame",
    "write_frame",
]

DELETED: Final = -1  # the version that removes a state
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_ENTRY: Final = struct.Struct(">iqI")  # partition, version, state length
# A snapshot frame is cut after this many bytes of states (one state may go past it alone).
_SNAPSHOT_FRAME_BYTES: Final = 1 << 20
# Lone surrogates can reach us from JSON ("\ud800"); they must round-trip, not fail a write.
_TEXT_ERRORS: Final = "surrogatepass"

_CHANGE: Final = b"\xff"  # the first byte of a change's payload
StoredShares = dict[str, dict[TopicPartition, StoredShare]]  # by group


def write_frame(group: str, entries: Sequence[tuple[TopicPartition, bytes, int]]) -> bytes:
    """The journal frame of one write: (partition, state JSON, new version) each; ``DELETED``
    with ``b""`` forgets a partition's state."""
    return frame(_encode(group, entries))


def change_frame(group: str, entries: Sequence[tuple[TopicPartition, bytes, int]]) -> bytes:
    """The journal frame of one change: (partition, change JSON, new version) each."""
    return frame(_CHANGE + _encode(group, entries))


def apply_writes(
    states: StoredShares, group: str, entries: Iterable[tuple[TopicPartition, bytes, int]]
) -> None:
    """What a write does to the states in memory (replayed from its frame, or just appended)."""
    stored = states.setdefault(group, {})
    for tp, data, version in entries:
        if version == DELETED:
            stored.pop(tp, None)
        else:
            stored[tp] = StoredShare(data, version)
    if not stored:
        del states[group]


def apply_changes(
    states: StoredShares, group: str, entries: Iterable[tuple[TopicPartition, ShareChange, int]]
) -> None:
    """What a change does to the states in memory (checked first: see ``prepare_change``)."""
    stored = states.setdefault(group, {})
    for tp, change, version in entries:
        kept = stored.get(tp)
        if kept is None:
            kept = stored[tp] = StoredShare.empty(version)
        kept.apply(change, version)


def _fold(states: StoredShares, payload: bytes) -> None:
    if not payload.startswith(_CHANGE):
        apply_writes(states, *_decode(payload))
        return
    group, entries = _decode(payload[1:])
    changes = []
    for tp, data, version in entries:
        try:
            try:
                change = orjson.loads(data)
            except orjson.JSONDecodeError:
                change = json.loads(data)  # escapes orjson refuses (a lone surrogate)
            decoded, _ = prepare_change(change, f"{tp.topic}-{tp.partition}")
        except (ValueError, InvalidPayload) as exc:
            raise CorruptPayload(f"a change that is not one: {exc}") from exc
        changes.append((tp, decoded, version))
    try:
        apply_changes(states, group, changes)
    except InvalidPayload as exc:
        raise CorruptPayload(str(exc)) from exc


def _payloads(states: StoredShares) -> Iterator[bytes]:
    for group, stored in states.items():
        chunk: list[tuple[TopicPartition, bytes, int]] = []
        size = 0
        for tp, kept in stored.items():
            data = kept.data
            chunk.append((tp, data, kept.version))
            size += len(data)
            if size >= _SNAPSHOT_FRAME_BYTES:
                yield _encode(group, chunk)
                chunk, size = [], 0
        if chunk:
            yield _encode(group, chunk)


SHARES: Final[JournalFormat[StoredShares]] = JournalFormat(
    name="shares",
    what="share states",
    journal_tag=b"BGSJ",
    snapshot_tag=b"BGSS",
    version=SHARES_FORMAT,
    new=dict,
    fold=_fold,
    payloads=_payloads,
)


def _encode(group: str, entries: Sequence[tuple[TopicPartition, bytes, int]]) -> bytes:
    raw_group = group.encode("utf-8", _TEXT_ERRORS)
    parts = [_U16.pack(len(raw_group)), raw_group, _U32.pack(len(entries))]
    for tp, data, version in entries:
        raw_topic = tp.topic.encode("utf-8", _TEXT_ERRORS)
        parts += (_U16.pack(len(raw_topic)), raw_topic, _ENTRY.pack(tp.partition, version, len(data)), data)
    return b"".join(parts)


def _decode(payload: bytes) -> tuple[str, list[tuple[TopicPartition, bytes, int]]]:
    try:
        (n,) = _U16.unpack_from(payload, 0)
        pos = 2 + n
        group = payload[2:pos].decode("utf-8", _TEXT_ERRORS)
        (count,) = _U32.unpack_from(payload, pos)
        pos += 4
        entries: list[tuple[TopicPartition, bytes, int]] = []
        for _ in range(count):
            (n,) = _U16.unpack_from(payload, pos)
            topic = payload[pos + 2 : pos + 2 + n].decode("utf-8", _TEXT_ERRORS)
            partition, version, length = _ENTRY.unpack_from(payload, pos + 2 + n)
            pos += 2 + n + _ENTRY.size
            data = payload[pos : pos + length]
            if len(data) != length:
                raise CorruptPayload(f"a state of {length} bytes is cut short")
            pos += length
            entries.append((TopicPartition(topic, partition), data, version))
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptPayload(str(exc)) from exc
    if pos != len(payload):
        raise CorruptPayload(f"{len(payload) - pos} trailing bytes")
    return group, entries
