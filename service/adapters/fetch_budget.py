"""How a fetch's ``max_bytes`` is shared by its partitions: the ``Log`` port's rule, in one place.

Every log adapter delivers a fetch the same way: partitions in the order
given, each taking from what the ones before it left of one ``max_bytes``
budget; the first record of the whole fetch is always delivered, even if it
alone exceeds the budget (a reader never stalls behind one large record); and
once a partition stops short because the budget ran out, the partitions after
it get nothing. A record costs its ``Record.size``. A fetch may also bound its records in
all (``max_records``), shared the same way: once that many are delivered, the rest get nothing.

``FetchBudget`` keeps that count while an adapter reads: the embedded log
asks it how much is ``left`` and whether to ``force_first`` while it decodes
a partition, then ``spend``s what was read; the Kafka log, which already holds
the records and their sizes, lets ``grant`` decide how many it delivers. Pure
and per partition (never per record), so it costs the fetch path nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["FetchBudget", "take"]


def take(sizes: Sequence[int], budget: int, *, force_first: bool) -> int:
    """How many records, of the given ``Record.size``s, fit in ``budget`` bytes, in order.

    With ``force_first`` the first record is taken even if it alone exceeds the
    budget: a reader must never stall behind one large record.
    """
    return _fit(sizes, budget, force_first)[0]


def _fit(sizes: Sequence[int], budget: int, force_first: bool) -> tuple[int, int]:
    """(records that fit, their bytes)."""
    total = sum(sizes)
    if total <= budget:
        return len(sizes), total
    used = 0
    n = 0
    for size in sizes:
        if used + size > budget and not (force_first and n == 0):
            break
        used += size
        n += 1
    return n, used


class FetchBudget:
    """One fetch's ``max_bytes``, spent by its partitions in the order they are read."""

    __slots__ = ("_max_bytes", "_max_records", "exhausted", "taken", "used")

    def __init__(self, max_bytes: int, max_records: int | None = None) -> None:
        self._max_bytes = max_bytes
        self._max_records = max_records
        self.used = 0  # bytes delivered so far
        self.taken = 0  # records delivered so far
        self.exhausted = False  # a partition stopped short: the rest get nothing

    @property
    def left(self) -> int:
        """What the next partition may take (it may take more for the fetch's first record)."""
        return max(self._max_bytes - self.used, 0)

    @property
    def records_left(self) -> int:
        """How many records the next partition may take (-1: no bound but the bytes)."""
        return -1 if self._max_records is None else max(self._max_records - self.taken, 0)

    @property
    def force_first(self) -> bool:
        """Whether the next record must be taken whatever its size (nothing delivered yet)."""
        return self.taken == 0

    def spend(self, size: int, records: int, *, stopped_short: bool) -> None:
        """Count what a partition read within ``left``; ``stopped_short`` when the budget cut it."""
        self.used += size
        self.taken += records
        if stopped_short or self.records_left == 0:
            self.exhausted = True

    def grant(self, sizes: Sequence[int]) -> int:
        """How many of a partition's records (of these sizes, in order) are delivered; spends them."""
        if self.exhausted or not sizes:
            return 0
        most = self.records_left
        n, size = _fit(sizes if most < 0 else sizes[:most], self.left, self.taken == 0)
        self.spend(size, n, stopped_short=n < len(sizes))
        return n
