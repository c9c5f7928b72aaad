"""Python's garbage collector, tuned for a server that holds many live objects.

The default first threshold (700 allocations) makes a collection run every few requests, and the
older generations' collections walk every object still alive: with thousands of connections,
consumer instances and waiting polls open, those walks were more than half of the gateway's CPU
(4,000 idle long-polls answered at their timeout and asked again: 20 % of a core, 8-12 % with the
thresholds raised; ``bench/idle.py``). What the start made is frozen (never walked again: it lives
as long as the process), and the young generation is collected every ``YOUNG`` allocations.
Collections still run, so garbage in cycles is still freed.
"""

from __future__ import annotations

import gc
from typing import Final

YOUNG: Final = 50_000  # allocations between collections of the youngest generation (default 700)
MIDDLE: Final = 20  # of those between collections of the middle one (default 10)
OLD: Final = 100  # of those between full collections, which also wait for a quarter more objects


def tune_collector() -> None:
    """Freeze what exists now and raise the collection thresholds: call once, just before serving."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, MIDDLE, OLD)
