"""How many requests may wait at once: long-polls and stateless reads hold a task and memory each.

Without a bound, one client opening thousands of long-polls holds the gateway's
memory and tasks for their whole timeout. Past the bound, or past the caller's fair
share of it (``fair.FairShare``: so one client cannot take what the others need), a
request is refused at once with 503 and ``Retry-After`` (the Confluent shape), never
queued. Open streams are bounded the same way, by the same code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from service.errors import BackendUnavailable

from .fair import FairCounter, FairShare


def _unavailable(reason: str) -> BackendUnavailable:
    return BackendUnavailable(f"{reason}; retry shortly.", retry_after=1)


class OpenWaits:
    """At most ``limit`` waiting requests (or open streams: ``what`` names them) at once on this
    replica, at most ``share`` of them one holder's (``fair.holder_of``); ``share`` defaults to
    the whole limit."""

    def __init__(
        self, limit: int = 1_000, what: str = "open long-polls and reads", share: int | None = None
    ) -> None:
        self.limit = limit
        self.what = what
        self._counter = FairCounter(FairShare(limit, limit if share is None else share, what), _unavailable)

    @property
    def open(self) -> int:
        return self._counter.open

    @contextmanager
    def enter(self, holder: str = "") -> Iterator[None]:
        with self._counter.hold(holder):
            yield
