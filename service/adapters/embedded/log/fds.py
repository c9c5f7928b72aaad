"""File descriptors as a budget: what this process may open, and what a new partition costs.

A partition keeps only its active segment's files open: the log file, plus its
offset and time indexes once written to. Sealed segments hold none of their
own: they open their log file when read, through the one ``FdCache`` of the
log, which keeps at most ``sealed_fds`` of them open however many segments
there are. Creating more partitions than ``RLIMIT_NOFILE`` leaves room for
would fail half way with EMFILE; worse, a restart would then fail on the same
topic. The log asks here first and refuses what would not fit, with the
numbers, keeping room for everything else and for the cache to fill up.
"""

from __future__ import annotations

import os
import resource
from typing import Final

from service.errors import InvalidTopicConfig

# A partition's active segment: its log file, then its two indexes with the first append.
FDS_PER_PARTITION: Final = 3
# Kept free for everything else: client connections, the backends' sockets, a Spark child.
FDS_OTHERS: Final = 128
# Default bound of the sealed-segment cache: reads that move around up to 128 segments reopen
# nothing, and a ``ulimit -n`` of 1024 still leaves room for over 200 partitions.
SEALED_FDS: Final = 128
# What is kept free at the default cache bound (a larger bound keeps more).
FDS_RESERVED: Final = FDS_OTHERS + SEALED_FDS


def fd_limit() -> int:
    """The soft ``RLIMIT_NOFILE`` of this process (a very large number when unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


def open_fds() -> int:
    """How many descriptors this process has open now (0 where the system does not say)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def check_room(topic: str, new_partitions: int, *, cache_spare: int = SEALED_FDS) -> None:
    """Refuse (``InvalidTopicConfig``, 422) ``new_partitions`` more partitions that would not fit.

    ``cache_spare``: how many more descriptors the sealed-segment cache may
    open (its bound less what it holds, which ``open_fds`` already counts).
    """
    limit = fd_limit()
    needed = new_partitions * FDS_PER_PARTITION
    free = limit - open_fds() - FDS_OTHERS - cache_spare
    if needed > free:
        raise InvalidTopicConfig(
            f"Topic {topic!r}: {new_partitions} more partition(s) need about {needed} file descriptors, "
            f"and this gateway has {max(free, 0)} to spare (ulimit -n is {limit}; {FDS_OTHERS} kept for "
            f"connections, {cache_spare} for reading sealed segments). Use fewer partitions, or raise "
            "the limit and restart."
        )


def descriptors_left() -> int:
    """How many more descriptors this process may open now (``fd_limit`` less ``open_fds``)."""
    return fd_limit() - open_fds()
