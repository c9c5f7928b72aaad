"""The files every journal of the embedded coordinator is made of: names, framing, reading.

The coordinator keeps two journals side by side under ``<data_dir>/coordinator/``,
each described by a ``JournalFormat``: committed offsets (``offsets_format``)
and the states of share-partitions (``shares_format``). A journal called
``<name>`` is two kinds of file:

``<name>-<seq>.journal`` (the active one is the highest ``seq``)
    the format's header (four letters and its version, one byte), then one
    frame per write, appended and fdatasync'ed before the write returns.
``<name>.snapshot``
    the format's snapshot magic (four letters and the version), ``u64`` next
    journal seq, ``u32`` frame count, then the frames that rebuild everything.
    Replaced atomically (tmp file, fsync, rename, fsync of the directory).

A frame is ``u32 length | u32 crc32c(payload) | payload``, big-endian; what a
payload holds is the format's own (``fold`` applies one, ``payloads`` writes
a whole state as a snapshot's). Loading reads the snapshot, then replays the
journals from its next seq on; a frame cut short or failing its CRC ends a
journal (the torn tail of a crash), so each write is all or nothing.

Every file carries the version of the format it was written in. A version
newer than this release's is refused (``NewerFormat``), never read as damage:
its frames may hold what this release cannot fold. Older versions from
``oldest`` on are read; a journal of an older version is never appended to
(``JournalStore`` starts a new one), so a file says truly what is in it.

Pure format, no state: ``JournalStore`` (``journal_store``) writes these files.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Generic, TypeVar

import crc32c

from service.errors import BackendError, NewerFormat

__all__ = ["CorruptPayload", "JournalFormat", "frame"]

S = TypeVar("S")

_FRAME: Final = struct.Struct(">II")
_SNAPSHOT_HEADER: Final = struct.Struct(">QI")
# No honest frame comes near this; a larger length is garbage, not an allocation to attempt.
_MAX_FRAME: Final = 256 << 20


class CorruptPayload(Exception):
    """A payload that passed its CRC but does not parse (a bug or a foreign file)."""


@dataclass(frozen=True, slots=True)
class JournalFormat(Generic[S]):
    """One kind of journal: its file names and magic numbers, and how its payloads build a state ``S``.

    ``fold(state, payload)`` applies one payload (raising ``CorruptPayload`` for one it cannot
    read); ``payloads(state)`` is a whole state as the frames of a snapshot; ``new()`` an empty one.
    Files are written at ``version``; those of ``oldest`` to ``version`` are read (``fold``
    takes the payloads of each).
    """

    name: str
    what: str  # in messages: "offsets journal ...", "share states snapshot ..."
    journal_tag: bytes  # four letters; the header is the tag and the version
    snapshot_tag: bytes
    version: int
    new: Callable[[], S]
    fold: Callable[[S, bytes], None]
    payloads: Callable[[S], Iterable[bytes]]
    oldest: int = 1

    @property
    def journal_header(self) -> bytes:
        """The first bytes of a journal this release writes."""
        return self.journal_tag + bytes([self.version])

    @property
    def snapshot_magic(self) -> bytes:
        """The first bytes of a snapshot this release writes."""
        return self.snapshot_tag + bytes([self.version])

    @property
    def snapshot_name(self) -> str:
        return f"{self.name}.snapshot"

    def journal_name(self, seq: int) -> str:
        return f"{self.name}-{seq:016d}.journal"

    def list_journals(self, root: Path) -> list[tuple[int, Path]]:
        """(seq, path) of every journal file of this format in ``root``, in seq order."""
        pattern = rf"{re.escape(self.name)}-(\d{{16}})\.journal"
        found = ((re.fullmatch(pattern, p.name), p) for p in root.iterdir())
        return sorted((int(m.group(1)), p) for m, p in found if m is not None)

    def snapshot_bytes(self, next_seq: int, state: S) -> bytes:
        """A whole snapshot of ``state``, continued by journal ``next_seq``."""
        body = [frame(p) for p in self.payloads(state)]
        return self.snapshot_magic + _SNAPSHOT_HEADER.pack(next_seq, len(body)) + b"".join(body)

    def read_snapshot(self, path: Path, state: S) -> int:
        """Fold the snapshot at ``path`` into ``state``; the journal sequence it continues with.

        The snapshot is replaced atomically, so anything short of complete is damage, not a crash.
        """
        try:
            buf = path.read_bytes()
        except FileNotFoundError:
            return 0
        head = len(self.snapshot_magic) + _SNAPSHOT_HEADER.size
        if len(buf) < head or not buf.startswith(self.snapshot_tag):
            raise BackendError(f"{self.what} snapshot {path} is not a brokergate snapshot")
        self._check_version(buf[len(self.snapshot_tag)], f"{self.what} snapshot {path}")
        next_seq, count = _SNAPSHOT_HEADER.unpack_from(buf, len(self.snapshot_magic))
        payloads, end = _frames(buf, head)
        if len(payloads) != count or end != len(buf):
            raise BackendError(f"{self.what} snapshot {path} is damaged")
        self._apply(path, payloads, state)
        return int(next_seq)

    def replay_journal(self, path: Path, state: S) -> tuple[int, int]:
        """Fold the journal at ``path`` into ``state``: (bytes intact, bytes in the file).

        A torn last frame is a write that was never acknowledged; a journal whose header is
        still being written (or was cut by a crash) holds nothing yet.
        """
        buf = path.read_bytes()
        if self.journal_version(path, buf) is None:
            return 0, len(buf)
        payloads, intact = _frames(buf, len(self.journal_header))
        self._apply(path, payloads, state)
        return intact, len(buf)

    def journal_version(self, path: Path, buf: bytes | None = None) -> int | None:
        """The version the journal at ``path`` (whose bytes are ``buf``, when read) was written
        in; None while its header is incomplete (still being written, or cut by a crash)."""
        if buf is None:
            with path.open("rb") as f:
                buf = f.read(len(self.journal_header))
        tag = self.journal_tag
        if len(buf) <= len(tag) and tag.startswith(buf):
            return None
        if not buf.startswith(tag):
            raise BackendError(f"{self.what} journal {path} is not a brokergate journal")
        return self._check_version(buf[len(tag)], f"{self.what} journal {path}")

    def _check_version(self, version: int, what: str) -> int:
        if version > self.version:
            raise NewerFormat(what, version, self.version)
        if version < self.oldest:
            raise BackendError(
                f"{what} is of format {version}, which this release no longer reads (it reads "
                f"{self.oldest} to {self.version}); start a release that reads both first"
            )
        return version

    def _apply(self, path: Path, payloads: list[bytes], state: S) -> None:
        for payload in payloads:
            try:
                self.fold(state, payload)
            except CorruptPayload as exc:
                raise BackendError(f"{path} is damaged: {exc}") from exc


def frame(payload: bytes) -> bytes:
    """``payload`` framed for a journal or a snapshot."""
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
