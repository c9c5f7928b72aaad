"""An exclusive, non-blocking lock file: one run at a time, across processes.

``flock`` on a file that stays in place: the kernel releases it when the
holder exits, however it exits (``kill -9`` included), so a crashed run never
leaves a stale lock. The holder's pid is written into the file for the message
the next would-be holder gets.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

# sysexits.h EX_TEMPFAIL: "try again later", what a run that found another one running exits with.
EXIT_BUSY: Final = 75


class Busy(Exception):
    """Another process holds the lock."""


@contextmanager
def exclusive(path: Path, what: str) -> Iterator[None]:
    """Hold ``path`` locked for the block; raise ``Busy`` at once if another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise Busy(f"{what} is already running (pid {holder}, lock {path})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)
