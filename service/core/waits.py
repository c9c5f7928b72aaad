"""How many requests may wait at once: long-polls and stateless reads hold a task and memory each.

Without a bound, one client opening thousands of long-polls holds the gateway's
memory and tasks for their whole timeout. Past the bound a request is refused at
once with 503 and ``Retry-After`` (the Confluent shape), never queued.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from service.errors import BackendUnavailable


class OpenWaits:
    """At most ``limit`` waiting requests (or open streams: ``what`` names them) at once, on this replica."""

    def __init__(self, limit: int = 1_000, what: str = "open long-polls and reads") -> None:
        self.limit = limit
        self.what = what
        self.open = 0

    @contextmanager
    def enter(self) -> Iterator[None]:
        if self.open >= self.limit:
            raise BackendUnavailable(
                f"This gateway already holds {self.limit} {self.what}; retry shortly.",
                retry_after=1,
            )
        self.open += 1
        try:
            yield
        finally:
            self.open -= 1
