"""Offsets as spans: the stretches of consecutive offsets an acknowledgement names, and the
spans a state's changes touched, merged."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise


def stretches(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """``offsets`` as runs of consecutive ones, ``(first, last)`` each, when they ascend; else one
    by one, in their order (each offset is then settled as it comes, as it was given)."""
    if isinstance(offsets, range) and offsets.step == 1:
        return [(offsets.start, offsets.stop - 1)] if offsets else []
    seq = offsets if isinstance(offsets, list | tuple) else list(offsets)
    if not seq:
        return []
    first, last = seq[0], seq[-1]
    if last - first == len(seq) - 1 and list(seq) == list(range(first, last + 1)):
        return [(first, last)]  # the common case: a range, checked in C
    out: list[tuple[int, int]] = []
    ascending = all(a < b for a, b in pairwise(seq))
    for offset in seq:
        if ascending and out and out[-1][1] + 1 == offset:
            out[-1] = (out[-1][0], offset)
        else:
            out.append((offset, offset))
    return out


def merged_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, those that overlap or touch made one."""
    out: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if out and first <= out[-1][1] + 1:
            if last > out[-1][1]:
                out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return out
