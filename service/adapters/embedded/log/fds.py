"""File descriptors as a budget: what this process may open, and what a new partition costs.

A partition keeps its active segment's log file open, plus its offset and time
indexes once written to, and one descriptor per sealed segment. Creating more
partitions than ``RLIMIT_NOFILE`` leaves room for would fail half way with
EMFILE; worse, a restart would then fail on the same topic. The log asks here
first and refuses what would not fit, with the numbers.
"""

from __future__ import annotations

import os
import resource
from typing import Final

from service.errors import InvalidTopicConfig

# A fresh partition: its log file, then its two indexes with the first append.
FDS_PER_PARTITION: Final = 3
# Kept free for everything else: client connections, the backends' sockets, a Spark child.
FDS_RESERVED: Final = 256


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


def check_room(topic: str, new_partitions: int) -> None:
    """Refuse (``InvalidTopicConfig``, 422) ``new_partitions`` more partitions that would not fit."""
    limit = fd_limit()
    needed = new_partitions * FDS_PER_PARTITION
    free = limit - open_fds() - FDS_RESERVED
    if needed > free:
        raise InvalidTopicConfig(
            f"Topic {topic!r}: {new_partitions} more partition(s) need about {needed} file descriptors, "
            f"and this gateway has {max(free, 0)} to spare (ulimit -n is {limit}, {FDS_RESERVED} kept for "
            "connections). Use fewer partitions, or raise the limit and restart."
        )
