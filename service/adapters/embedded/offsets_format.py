"""The files of the embedded coordinator's committed offsets: names, layout, encoding, reading.

Pure format, no state: ``OffsetStore`` writes these files and the gateway
reads them back at start; ``offsets_reader`` reads them from other processes.
They live under ``<data_dir>/coordinator/`` in two kinds of file:

``offsets-<seq>.journal`` (the active one is the highest ``seq``)
    ``b"BGOJ\\x01"``, then one frame per ``commit`` call, appended and
    fdatasync'ed before the call returns.
``offsets.snapshot``
    ``b"BGOS\\x01"``, ``u64`` next journal seq, ``u32`` frame count, then
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

import re
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import crc32c

from service.core.models import TopicPartition
from service.errors import BackendError

__all__ = [
    "COORDINATOR_DIR",
    "JOURNAL_HEADER",
    "LOCK_NAME",
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
SNAPSHOT_NAME: Final = "offsets.snapshot"
LOCK_NAME: Final = "offsets.lock"  # flock()ed by the one process that writes the offsets
JOURNAL_HEADER: Final = b"BGOJ\x01"
_SNAPSHOT_MAGIC: Final = b"BGOS\x01"
_JOURNAL_RE: Final = re.compile(r"offsets-(\d{16})\.journal")
_FRAME: Final = struct.Struct(">II")
_SNAPSHOT_HEADER: Final = struct.Struct(">QI")
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_ENTRY_TAIL: Final = struct.Struct(">iq")
# No honest frame comes near this; a larger length is garbage, not an allocation to attempt.
_MAX_FRAME: Final = 256 << 20
# Lone surrogates can reach us from JSON ("\ud800"); they must round-trip, not fail a commit.
_TEXT_ERRORS: Final = "surrogatepass"

Offsets = dict[TopicPartition, int]


class _Corrupt(Exception):
    """A payload that passed its CRC but does not parse (a bug or a foreign file)."""


def journal_name(seq: int) -> str:
    return f"offsets-{seq:016d}.journal"


def list_journals(root: Path) -> list[tuple[int, Path]]:
    """(seq, path) of every journal file in ``root``, in seq order."""
    found = ((_JOURNAL_RE.fullmatch(p.name), p) for p in root.iterdir())
    return sorted((int(m.group(1)), p) for m, p in found if m is not None)


def commit_frame(group: str, entries: list[tuple[TopicPartition, int]]) -> bytes:
    """The journal frame of one commit call."""
    return _frame(_encode(group, entries))


def snapshot_bytes(next_seq: int, offsets: Mapping[str, Offsets]) -> bytes:
    """A whole snapshot: every group with offsets, continued by journal ``next_seq``."""
    body = [_frame(_encode(g, list(o.items()))) for g, o in offsets.items() if o]
    return _SNAPSHOT_MAGIC + _SNAPSHOT_HEADER.pack(next_seq, len(body)) + b"".join(body)


def read_snapshot(path: Path, offsets: dict[str, Offsets]) -> int:
    """Fold the snapshot at ``path`` into ``offsets``; the journal sequence it continues with.

    The snapshot is replaced atomically, so anything short of complete is damage, not a crash.
    """
    try:
        buf = path.read_bytes()
    except FileNotFoundError:
        return 0
    head = len(_SNAPSHOT_MAGIC) + _SNAPSHOT_HEADER.size
    if len(buf) < head or not buf.startswith(_SNAPSHOT_MAGIC):
        raise BackendError(f"offsets snapshot {path} is not a brokergate snapshot")
    next_seq, count = _SNAPSHOT_HEADER.unpack_from(buf, len(_SNAPSHOT_MAGIC))
    payloads, end = _frames(buf, head)
    if len(payloads) != count or end != len(buf):
        raise BackendError(f"offsets snapshot {path} is damaged")
    _apply(path, payloads, offsets)
    return int(next_seq)


def replay_journal(path: Path, offsets: dict[str, Offsets]) -> tuple[int, int]:
    """Fold the journal at ``path`` into ``offsets``: (bytes intact, bytes in the file).

    A torn last frame is a commit that was never acknowledged; a journal whose header is
    still being written (or was cut by a crash) holds nothing yet.
    """
    buf = path.read_bytes()
    if not buf.startswith(JOURNAL_HEADER):
        if len(buf) < len(JOURNAL_HEADER) and JOURNAL_HEADER.startswith(buf):
            return 0, len(buf)
        raise BackendError(f"offsets journal {path} is not a brokergate journal")
    payloads, intact = _frames(buf, len(JOURNAL_HEADER))
    _apply(path, payloads, offsets)
    return intact, len(buf)


def _apply(path: Path, payloads: list[bytes], offsets: dict[str, Offsets]) -> None:
    for payload in payloads:
        try:
            group, group_offsets = _decode(payload)
        except _Corrupt as exc:
            raise BackendError(f"{path} is damaged: {exc}") from exc
        offsets.setdefault(group, {}).update(group_offsets)


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
        raise _Corrupt(str(exc)) from exc
    if pos != len(payload):
        raise _Corrupt(f"{len(payload) - pos} trailing bytes")
    return group, offsets


def _frame(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), crc32c.crc32c(payload)) + payload


def _frames(buf: bytes, pos: int) -> tuple[list[bytes], int]:
    """The intact frames of ``buf`` from ``pos`` on, and where the intact part ends."""
    payloads: list[bytes] = []
    end = len(buf)
    while pos + _FRAME.size <= end:
        length, crc = _FRAME.unpack_from(buf, pos)
        start = pos + _FRAME.size
        if length > _MAX_FRAME or start + length > end:
            break
        payload = buf[start : start + length]
        if crc32c.crc32c(payload) != crc:
            break
        payloads.append(payload)
        pos = start + length
    return payloads, pos
