"""The audit trail: one JSON line per security decision worth keeping, on the ``brokergate.audit`` logger.

Kept: every refusal (a failed authentication, an operation the ACLs do not allow), every ACL
change, every topic created (auto-creation included), deleted or altered, and every consumer
instance deleted by someone other than its creator. A line holds ``time`` (UTC, ISO 8601),
``event``, ``principal``, ``address``, ``operation``, ``resource`` (``TYPE:name``), ``outcome``
(``ALLOWED``, ``DENIED`` or ``FAILED``) and the event's details::

    {"time": "2026-11-24T09:12:03.514Z", "event": "authorization", "principal": "User:bob",
     "address": "10.0.4.7", "operation": "WRITE", "resource": "TOPIC:payments", "outcome": "DENIED"}

A client hammering the gateway with refused requests must not fill the disk through this log:
past ``MAX_LINES_PER_S`` lines in one second the rest of that second is counted, not written,
and the count is written as an ``audit.suppressed`` line once that second is over: by ``flush``,
which the application's lifespan calls a few times a second and once more at its exit (so a
count is neither held until the next event nor lost when the gateway stops), or by the next line.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime
from typing import Final

AUDIT: Final = logging.getLogger("brokergate.audit")
MAX_LINES_PER_S: Final = 200

ALLOWED: Final = "ALLOWED"
DENIED: Final = "DENIED"
FAILED: Final = "FAILED"


class _Budget:
    """At most ``per_s`` lines a second; how many were dropped, told once."""

    def __init__(self, per_s: int) -> None:
        self.per_s = per_s
        self.second = 0
        self.used = 0
        self.dropped = 0

    def take(self, now: float) -> tuple[bool, int]:
        """Whether a line may be written now, and how many were dropped in the second that ended."""
        second = int(now)
        ended = 0
        if second != self.second:
            ended, self.dropped = self.dropped, 0
            self.second, self.used = second, 0
        if self.used >= self.per_s:
            self.dropped += 1
            return False, ended
        self.used += 1
        return True, ended

    def ended(self, now: float, *, final: bool = False) -> int:
        """How many were dropped in a second that is over (``final``: in the current one too), once."""
        if not self.dropped or (int(now) == self.second and not final):
            return 0
        dropped, self.dropped = self.dropped, 0
        return dropped


_budget = _Budget(MAX_LINES_PER_S)
# ``record`` runs on the event loop and in worker threads alike: one budget, taken under a lock.
_lock = threading.Lock()


def record(
    event: str,
    *,
    principal: str,
    address: str | None,
    operation: str,
    resource: str,
    outcome: str,
    **details: object,
) -> None:
    """Write one audit line (if the ``brokergate.audit`` logger takes INFO)."""
    if not AUDIT.isEnabledFor(logging.INFO):
        return
    now = time.time()
    with _lock:
        allowed, dropped = _budget.take(now)
    if dropped:
        _write({"time": _iso(now), "event": "audit.suppressed", "count": dropped})
    if allowed:
        line = {
            "time": _iso(now),
            "event": event,
            "principal": principal,
            "address": address,
            "operation": operation,
            "resource": resource,
            "outcome": outcome,
            **details,
        }
        _write(line)


def flush(*, final: bool = False) -> None:
    """Write the count of lines dropped in a second that is over (``final``: at the exit, the
    current second's too), if any: the owner of the process's lifecycle calls this."""
    if not AUDIT.isEnabledFor(logging.INFO):
        return
    now = time.time()
    with _lock:
        dropped = _budget.ended(now, final=final)
    if dropped:
        _write({"time": _iso(now), "event": "audit.suppressed", "count": dropped})


def _write(line: dict[str, object]) -> None:
    AUDIT.info(json.dumps(line, ensure_ascii=False, separators=(", ", ": "), default=str))


def _iso(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
