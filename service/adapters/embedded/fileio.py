"""Durable-file helpers shared by the embedded adapters (the log and the coordinator's offsets).

Everything here is synchronous and meant to run in a worker thread (or in a
process without an event loop). Descriptors are opened close-on-exec, so a
Spark job or subprocess started by the gateway inherits none of them.

A failed file operation is told a client by ``unavailable``: the cause without the file it
names (no answer carries a path of the server's disk; the log keeps the whole error), and a
``Retry-After`` only when a retry may cure it (``lasting``).
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from service.errors import BackendError, BackendUnavailable, NewerFormat

_OPEN_FLAGS: Final = os.O_CLOEXEC

# fdatasync covers the data and the file size, which is all an append needs.
datasync = getattr(os, "fdatasync", os.fsync)


def os_reason(exc: OSError) -> str:
    """What went wrong, without the file ``exc`` names (its ``strerror``, else its text)."""
    return exc.strerror or str(exc)


def lasting(exc: OSError) -> bool:
    """Whether no retry can cure ``exc``: the filesystem is read-only (as ext4 remounts itself
    after a disk error), and stays so until an operator acts."""
    return exc.errno == errno.EROFS


def unavailable(what: str, exc: OSError, *, broken: bool = False) -> BackendUnavailable:
    """``what`` (e.g. "Cannot create topic 'q'") failed with ``exc``, as a client is told: 503 with
    the cause and no path, and ``Retry-After`` unless the filesystem is read-only or the store
    written to is ``broken`` (a failed write it could not undo: it takes no more)."""
    if broken:
        return BackendUnavailable(f"{what}: {os_reason(exc)}.", retry_after=None)
    if lasting(exc):
        return BackendUnavailable(
            f"{what}: {os_reason(exc)} (the data dir's filesystem; a retry will not help).", retry_after=None
        )
    return BackendUnavailable(f"{what}: {os_reason(exc)}.")


def opening_failed(what: str, failed: Sequence[BaseException]) -> Exception:
    """What a client is told when ``what`` (e.g. "Cannot open topic 'q'") failed with ``failed``
    (one error a part): a newer format as it is, else the first error without the file it names."""
    newer = [exc for exc in failed if isinstance(exc, NewerFormat)]
    if newer:
        return newer[0]
    first = failed[0]
    why = os_reason(first) if isinstance(first, OSError) else str(first)
    return BackendError(f"{what}: {why}")


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (created, renamed, removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _OPEN_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    """Create ``path`` and any missing parents, each made durable in its own parent.

    ``mkdir(parents=True)`` alone leaves a fresh data dir's entry in its parent to the page
    cache: a power cut could take the whole directory, and what was acknowledged in it, away.
    """
    path = Path(path)
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        path = path.parent
    for new in reversed(missing):
        try:
            new.mkdir()
        except FileExistsError:
            if not new.is_dir():
                raise
        fsync_dir(new.parent)


def lock_dir(path: Path, name: str, what: str, *, per_process: bool = False) -> int:
    """Lock ``path/name`` exclusively for as long as the returned descriptor is open.

    Raises ``BlockingIOError`` with ``what`` and the directory in its message when another
    process holds it: two writers on one directory would interleave their files. By default
    the lock is a ``flock``, which a second open in the same process also finds taken; with
    ``per_process`` it is a POSIX record lock, which belongs to the process: another process
    is refused, while this one may open the directory again (and, closing any descriptor of
    the file, lets the lock go).
    """
    fd = os.open(Path(path) / name, os.O_RDWR | os.O_CREAT | _OPEN_FLAGS, 0o644)
    try:
        if per_process:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError) as exc:  # lockf's "taken" may be either
        os.close(fd)
        raise BlockingIOError(exc.errno, f"{what} in {path} is in use by another brokergate process") from exc
    return fd


def replace_file(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``<path>.tmp`` (created with ``mode``), fsync it and rename it over ``path``.

    A crash leaves the old or the new file; the rename itself is durable only
    once the directory is fsynced (``atomic_write`` does both).
    """
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)  # a stale one would keep its own mode
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _OPEN_FLAGS, mode)
    try:
        write_all(fd, [data], 0)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file."""
    replace_file(path, data, mode=mode)
    fsync_dir(path.parent)


def write_all(fd: int, bufs: Sequence[bytes], pos: int) -> int:
    """Write ``bufs`` back to back at ``pos``; return the bytes written (all of them or raise)."""
    total = sum(len(b) for b in bufs)
    done = os.pwritev(fd, bufs, pos)
    if done < total:
        # A short write (signal, quota edge): finish from a flat copy, rare enough to not care.
        rest = memoryview(b"".join(bufs))[done:]
        while rest:
            n = os.pwrite(fd, rest, pos + done)
            if n <= 0:
                raise OSError(f"short write at position {pos + done}")
            done += n
            rest = rest[n:]
    return total


def create_file(path: Path, *, truncate: bool = False) -> int:
    """Create an empty file and return a read-write descriptor.

    Fails if ``path`` exists with anything in it, unless ``truncate`` (then an existing file is
    emptied). An empty one is taken as it is: a creation whose directory fsync failed leaves it
    behind, and its retry must not be refused for good.
    """
    if truncate:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | _OPEN_FLAGS, 0o644)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o644)
    except FileExistsError:
        fd = os.open(path, os.O_RDWR | _OPEN_FLAGS)
        if os.fstat(fd).st_size == 0:
            return fd
        os.close(fd)
        raise


def open_file(path: Path, *, write: bool = True) -> int:
    return os.open(path, (os.O_RDWR if write else os.O_RDONLY) | _OPEN_FLAGS)
