"""The files of the embedded coordinator's committed offsets: names, layout, encoding, reading.

Pure format, no state: ``JournalStore`` writes these files and the gateway
reads them back at start; ``offsets_reader`` reads them from other processes.
They are the ``offsets`` journal of ``journal_format``, under
``<data_dir>/coordinator/``:

``offsets-<seq>.journal`` (the active one is the highest ``seq``)
    ``b"BGOJ"`` and the version (``OFFSETS_FORMAT``, 1), then one frame per ``commit`` call, appended and
    fdatasync'ed before the call returns.
``offsets.snapshot``
    ``b"BGOS"`` and the version, ``u64`` next journal seq, ``u32`` frame count, then
    one frame per group holding all its offsets. Replaced atomically (tmp
    file, fsync, rename, fsync of the directory).

A frame is ``u32 length | u32 crc32c(payload) | payload`` and a payload is
``u16 len | group (UTF-8) | u32 count | count x (u16 len | topic (UTF-8) |
i32 partition | i64 offset)``, all big-endian. Loading reads the snapshot,
then replays the journals from its next seq on; a frame cut short or failing
its CRC ends a journal (the torn tail of a crash), so each commit call is all
or nothing. Group names only ever appear inside payloads, never in a path.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

from service.core.models import TopicPartition

from ..format_versions import OFFSETS_FORMAT
from .journal_format import CorruptPayload, JournalFormat, frame

__all__ = [
    "COORDINATOR_DIR",
    "JOURNAL_HEADER",
    "LOCK_NAME",
    "OFFSETS",
    "SNAPSHOT_NAME",
    "Offsets",
    "commit_frame",
    "journal_name",
    "list_journals",
    "read_snapshot",
    "replay_journal",
    "snapshot_bytes",
]

COORDINATOR_DIR: Final = "coordinator"  # under the data dir
LOCK_NAME: Final = "offsets.lock"  # flock()ed by the one process that writes the coordinator's files
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_ENTRY_TAIL: Final = struct.Struct(">iq")
# Lone surrogates can reach us from JSON ("\ud800"); they must round-trip, not fail a commit.
_TEXT_ERRORS: Final = "surrogatepass"

Offsets = dict[TopicPartition, int]


def _fold(offsets: dict[str, Offsets], payload: bytes) -> None:
    group, group_offsets = _decode(payload)
    offsets.setdefault(group, {}).update(group_offsets)


def _payloads(offsets: Mapping[str, Offsets]) -> Iterator[bytes]:
    return (_encode(g, list(o.items())) for g, o in offsets.items() if o)


OFFSETS: Final[JournalFormat[dict[str, Offsets]]] = JournalFormat(
    name="offsets",
    what="offsets",
    journal_tag=b"BGOJ",
    snapshot_tag=b"BGOS",
    version=OFFSETS_FORMAT,
    new=dict,
    fold=_fold,
    payloads=_payloads,
)
JOURNAL_HEADER: Final = OFFSETS.journal_header
SNAPSHOT_NAME: Final = OFFSETS.snapshot_name


def journal_name(seq: int) -> str:
    return OFFSETS.journal_name(seq)


def list_journals(root: Path) -> list[tuple[int, Path]]:
    """(seq, path) of every offsets journal in ``root``, in seq order."""
    return OFFSETS.list_journals(root)


def commit_frame(group: str, entries: list[tuple[TopicPartition, int]]) -> bytes:
    """The journal frame of one commit call."""
    return frame(_encode(group, entries))


def snapshot_bytes(next_seq: int, offsets: Mapping[str, Offsets]) -> bytes:
    """A whole snapshot: every group with offsets, continued by journal ``next_seq``."""
    return OFFSETS.snapshot_bytes(next_seq, dict(offsets))


def read_snapshot(path: Path, offsets: dict[str, Offsets]) -> int:
    """Fold the snapshot at ``path`` into ``offsets``; the journal sequence it continues with."""
    return OFFSETS.read_snapshot(path, offsets)


def replay_journal(path: Path, offsets: dict[str, Offsets]) -> tuple[int, int]:
    """Fold the journal at ``path`` into ``offsets``: (bytes intact, bytes in the file)."""
    return OFFSETS.replay_journal(path, offsets)


def _encode(group: str, offsets: list[tuple[TopicPartition, int]]) -> bytes:
    raw_group = group.encode("utf-8", _TEXT_ERRORS)
    parts = [_U16.pack(len(raw_group)), raw_group, _U32.pack(len(offsets))]
    for tp, offset in offsets:
        raw_topic = tp.topic.encode("utf-8", _TEXT_ERRORS)
        parts.append(_U16.pack(len(raw_topic)))
        parts.append(raw_topic)
        parts.append(_ENTRY_TAIL.pack(tp.partition, offset))
    return b"".join(parts)


def _decode(payload: bytes) -> tuple[str, Offsets]:
    try:
        (n,) = _U16.unpack_from(payload, 0)
        pos = 2 + n
        group = payload[2:pos].decode("utf-8", _TEXT_ERRORS)
        (count,) = _U32.unpack_from(payload, pos)
        pos += 4
        offsets: Offsets = {}
        for _ in range(count):
            (n,) = _U16.unpack_from(payload, pos)
            topic = payload[pos + 2 : pos + 2 + n].decode("utf-8", _TEXT_ERRORS)
            partition, offset = _ENTRY_TAIL.unpack_from(payload, pos + 2 + n)
            pos += 2 + n + _ENTRY_TAIL.size
            offsets[TopicPartition(topic, partition)] = offset
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorruptPayload(str(exc)) from exc
    if pos != len(payload):
        raise CorruptPayload(f"{len(payload) - pos} trailing bytes")
    return group, offsets
