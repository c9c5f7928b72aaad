"""The files of the embedded coordinator's share-partition states: layout and encoding.

Pure format, no state: the ``shares`` journal of ``journal_format``, under
``<data_dir>/coordinator/`` beside the offsets:

``shares-<seq>.journal``
    ``b"BGSJ\\x01"``, then one frame per write (``store_share_states`` or
    ``delete_share_states``), appended and fdatasync'ed before the call
    returns. Created with the first write: a gateway that never kept a
    share group has no file of it.
``shares.snapshot``
    ``b"BGSS\\x01"``, ``u64`` next journal seq, ``u32`` frame count, then
    frames holding every stored state, none larger than about 1 MiB.

A payload is ``u16 len | group (UTF-8) | u32 count | count x (u16 len | topic
(UTF-8) | i32 partition | i64 version | u32 len | state)``, big-endian; the
state is the partition's JSON object, as stored, and the version the one it
was stored at. Version -1 with an empty state deletes the partition's state.
A write of several partitions is one frame: replayed whole or, torn by a
crash, not at all.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

from service.core.models import TopicPartition

from .journal_format import CorruptPayload, JournalFormat, frame

__all__ = ["DELETED", "SHARES", "ShareEntry", "ShareStates", "apply_writes", "write_frame"]

DELETED: Final = -1  # the version that removes a state
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_ENTRY: Final = struct.Struct(">iqI")  # partition, version, state length
# A snapshot frame is cut after this many bytes of states (one state may go past it alone).
_SNAPSHOT_FRAME_BYTES: Final = 1 << 20
# Lone surrogates can reach us from JSON ("\ud800"); they must round-trip, not fail a write.
_TEXT_ERRORS: Final = "surrogatepass"

ShareEntry = tuple[bytes, int]  # (the state's JSON, its version)
ShareStates = dict[str, dict[TopicPartition, ShareEntry]]  # by group


def write_frame(group: str, entries: Sequence[tuple[TopicPartition, bytes, int]]) -> bytes:
    """The journal frame of one write: (partition, state JSON, new version) each; ``DELETED``
    with ``b""`` forgets a partition's state."""
    return frame(_encode(group, entries))


def apply_writes(
    states: ShareStates, group: str, entries: Iterable[tuple[TopicPartition, bytes, int]]
) -> None:
    """What a write does to the states in memory (replayed from its frame, or just appended)."""
    stored = states.setdefault(group, {})
    for tp, data, version in entries:
        if version == DELETED:
            stored.pop(tp, None)
        else:
            stored[tp] = (data, version)
    if not stored:
        del states[group]


def _fold(states: ShareStates, payload: bytes) -> None:
    apply_writes(states, *_decode(payload))


def _payloads(states: ShareStates) -> Iterator[bytes]:
    for group, stored in states.items():
        chunk: list[tuple[TopicPartition, bytes, int]] = []
        size = 0
        for tp, (data, version) in stored.items():
            chunk.append((tp, data, version))
            size += len(data)
            if size >= _SNAPSHOT_FRAME_BYTES:
                yield _encode(group, chunk)
                chunk, size = [], 0
        if chunk:
            yield _encode(group, chunk)


SHARES: Final[JournalFormat[ShareStates]] = JournalFormat(
    name="shares",
    what="share states",
    journal_header=b"BGSJ\x01",
    snapshot_magic=b"BGSS\x01",
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
