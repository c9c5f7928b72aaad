"""What a replica saw of a subscription's deliveries: for describing it, and for ``/metrics``."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final

_RATE_WINDOW_S: Final = 10.0


@dataclass(slots=True)
class PushStats:
    """What this replica saw of a subscription's deliveries, for describing it and for ``/metrics``."""

    delivered: int = 0  # records settled by a 2xx
    requests: int = 0
    failures: int = 0  # requests that did not settle their records
    dead_lettered: int = 0
    in_flight: int = 0
    held: int = 0
    backlog: int = 0  # records of the topics not yet settled, as of the last look (every 5 s)
    last_status: int | None = None
    last_error: str | None = None
    last_error_ms: int | None = None
    _recent: deque[tuple[float, int]] = field(default_factory=deque)

    def settled(self, count: int, now: float) -> None:
        self.delivered += count
        self._recent.append((now, count))

    def rate(self, now: float) -> float:
        """Records settled per second over the last ten seconds."""
        recent = self._recent
        while recent and recent[0][0] < now - _RATE_WINDOW_S:
            recent.popleft()
        return sum(n for _, n in recent) / _RATE_WINDOW_S
