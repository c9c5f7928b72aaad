"""File descriptors as a budget: what this process may open, and what a new partition costs.

A partition keeps only its active segment's files open: the log file, plus its
offset and time indexes once written to. Sealed segments hold none of their
own: they open their log file when read, through the one ``FdCache`` of the
log, which keeps at most ``sealed_fds`` of them open however many segments
there are. Creating more partitions than ``RLIMIT_NOFILE`` leaves room for
would fail half way with EMFILE; worse, a restart would then fail on the same
topic. The log asks here first and refuses what would not fit, with the
numbers.

The budget is what the files will hold, not what they hold now: a partition not
yet written to holds one descriptor and will hold three (``to_open`` counts
the difference for every partition there is), and the sockets are reserved
whole, open or not: ``max_connections`` of them for clients (the server admits
no more) and ``FDS_OTHERS`` for the backends, a Spark child and a burst of
accepts. So no write to any partition, and no accept of a connection the
server may serve, can meet EMFILE, however the partitions are written.
"""

from __future__ import annotations

import os
import resource
from typing import Final

from service.errors import InvalidTopicConfig

# A partition's active segment: its log file, then its two indexes with the first append.
FDS_PER_PARTITION: Final = 3
# Kept free for everything but files and client connections: the backends' sockets, a Spark
# child's pipes, the event loop's own, connections accepted in a burst before any is refused.
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


def open_files() -> int:
    """How many descriptors this process has open now that are not sockets (0 where the system
    does not say): the sockets are budgeted whole, whether open now or not."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return 0
    files = 0
    for name in names:
        try:
            files += not os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
        except OSError:  # closed since the listing (the listing's own descriptor among them)
            continue
    return files


def check_room(
    topic: str, new_partitions: int, *, cache_spare: int = SEALED_FDS, to_open: int = 0, connections: int = 0
) -> None:
    """Refuse (``InvalidTopicConfig``, 422) ``new_partitions`` more partitions that would not fit.

    ``cache_spare``: how many more descriptors the sealed-segment cache may
    open (its bound less what it holds, which ``open_files`` already counts);
    ``to_open``: how many the existing partitions will open once written to;
    ``connections``: the client connections the server may hold at once.
    """
    limit = fd_limit()
    needed = new_partitions * FDS_PER_PARTITION
    free = limit - open_files() - to_open - cache_spare - connections - FDS_OTHERS
    if needed > free:
        raise InvalidTopicConfig(
            f"Topic {topic!r}: {new_partitions} more partition(s) need about {needed} file descriptors, "
            f"and this gateway has {max(free, 0)} to spare (ulimit -n is {limit}; {to_open} kept for the "
            f"partitions there are to be written to, {connections} for client connections "
            f"(max_connections), {FDS_OTHERS} for the backends' sockets and others, {cache_spare} for "
            "reading sealed segments). Use fewer partitions, or raise the limit and restart."
        )


def descriptors_left() -> int:
    """How many more descriptors this process may open now (``fd_limit`` less ``open_fds``)."""
    return fd_limit() - open_fds()
