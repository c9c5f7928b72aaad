"""The process log's bound: what a flood of failures may write, whatever their kind.

A client that makes the gateway log (a malformed request uvicorn warns about, an error some
input provokes) must not fill the disk or drown the lines that matter. ``LogBudget`` is a
``logging.Filter`` put on the handlers that write the process log (the root logger's and
uvicorn's) while the application runs:

- at most ``lines_per_s`` records a second pass; the rest are counted, and the count is logged
  once that second is over (``brokergate`` logger, ``log.suppressed``), as the audit trail does;
- a traceback is written whole once per error site (logger, file, line, exception type) per
  ``SITE_INTERVAL_S``; a repeat says so in one line instead;
- no traceback is longer than ``traceback_bytes``: its start and its end (where the error is) are
  kept, the middle cut.

The audit trail has its own budget (``service.core.audit``) and passes untouched. ``bounded_logs``
is what the application's lifespan enters: it puts the filter on, flushes both budgets' counts a
few times a second and at its exit, and takes the filter off. ``audit_trail`` is where the audit
trail goes while the application runs (the process log, or a file of its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import traceback
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Final

from service.core import audit

SITE_INTERVAL_S: Final = 60.0
FLUSH_EVERY_S: Final = 0.5
_SUMMARY: Final = "brokergate_log_summary"  # the attribute that marks the budget's own lines
# Loggers whose handlers write the process log: the root's (``brokergate serve``'s basicConfig),
# and uvicorn's own, which do not propagate.
_LOGGERS: Final = ("", "uvicorn", "uvicorn.error", "uvicorn.access")

log = logging.getLogger("brokergate")


class LogBudget(logging.Filter):
    """At most ``lines_per_s`` records a second, tracebacks bounded and not repeated (see the module).

    One instance may sit on several handlers: a record is decided once, whichever sees it first.
    Records come from the event loop and from worker threads: the state is taken under a lock.
    """

    def __init__(self, lines_per_s: int, traceback_bytes: int) -> None:
        super().__init__()
        self.lines_per_s = lines_per_s
        self.traceback_bytes = traceback_bytes
        self._lock = threading.Lock()
        self._second = 0
        self._used = 0
        self._dropped = 0  # in the current second
        self._untold = 0  # in seconds that are over, not logged yet
        self._sites: dict[tuple[str, str, int, str], float] = {}
        self._last: tuple[logging.LogRecord | None, bool] = (
            None,
            True,
        )  # the last record decided, its verdict

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == audit.AUDIT.name or getattr(record, _SUMMARY, False):
            return True
        with self._lock:
            last, verdict = self._last
            if last is record:
                return verdict
            verdict = self._take(record.created)
            self._last = (record, verdict)
            if verdict and record.exc_info and record.exc_info[1] is not None:
                self._bound_traceback(record)
            return verdict

    def _take(self, now: float) -> bool:
        second = int(now)
        if second != self._second:
            self._second, self._used = second, 0
            self._untold, self._dropped = self._untold + self._dropped, 0
        if self._used >= self.lines_per_s:
            self._dropped += 1
            return False
        self._used += 1
        return True

    def _bound_traceback(self, record: logging.LogRecord) -> None:
        """The record's traceback, written once per site and interval, cut to ``traceback_bytes``."""
        assert record.exc_info is not None
        kind, error, tb = record.exc_info
        site = (record.name, record.pathname, record.lineno, kind.__name__ if kind else "")
        now = record.created
        if now - self._sites.get(site, -SITE_INTERVAL_S) < SITE_INTERVAL_S:
            shown = "".join(traceback.format_exception_only(kind, error)).strip()
            record.exc_text = f"{_cut(shown, self.traceback_bytes)} (traceback as logged before from here)"
            return
        if len(self._sites) >= 1024:  # sites are lines of code, few; a bound all the same
            self._sites.clear()
        self._sites[site] = now
        text = "".join(traceback.format_exception(kind, error, tb)).rstrip("\n")
        record.exc_text = _cut(text, self.traceback_bytes)

    def ended(self, now: float, *, final: bool = False) -> int:
        """How many records were dropped in a second that is over (``final``: the current one too), once."""
        with self._lock:
            if final or int(now) != self._second:
                self._untold, self._dropped = self._untold + self._dropped, 0
            untold, self._untold = self._untold, 0
            return untold

    def flush(self, *, final: bool = False) -> None:
        """Log how many records were dropped, once their second is over (or now, ``final``)."""
        dropped = self.ended(time.time(), final=final)
        if dropped:
            log.warning(
                "log.suppressed: %d log lines not written (past %d a second)",
                dropped,
                self.lines_per_s,
                extra={_SUMMARY: True},
            )


def _cut(text: str, limit: int) -> str:
    """``text`` within about ``limit`` bytes: its first quarter and its end, the middle said cut."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    head, tail = limit // 4, limit - limit // 4
    cut = len(data) - head - tail
    return (
        data[:head].decode("utf-8", "ignore")
        + f"\n  ... {cut} bytes of traceback cut ...\n"
        + data[-tail:].decode("utf-8", "ignore")
    )


@contextlib.contextmanager
def _installed(budget: LogBudget) -> Iterator[None]:
    handlers = {id(h): h for name in _LOGGERS for h in logging.getLogger(name).handlers}
    for handler in handlers.values():
        handler.addFilter(budget)
    try:
        yield
    finally:
        for handler in handlers.values():
            handler.removeFilter(budget)


@contextlib.asynccontextmanager
async def bounded_logs(lines_per_s: int, traceback_bytes: int) -> AsyncIterator[LogBudget]:
    """The process log bounded by a ``LogBudget`` while inside; the counts of both budgets (this
    one's and the audit trail's) written every ``FLUSH_EVERY_S`` once their second is over, and at
    the exit whatever second it is."""
    budget = LogBudget(lines_per_s, traceback_bytes)

    def flush(final: bool = False) -> None:
        audit.flush(final=final)
        budget.flush(final=final)

    async def flushing() -> None:
        while True:
            await asyncio.sleep(FLUSH_EVERY_S)
            flush()

    with _installed(budget):
        task = asyncio.create_task(flushing(), name="log budgets")
        try:
            yield budget
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            flush(final=True)


@contextlib.contextmanager
def audit_trail(path: Path | None) -> Iterator[None]:
    """The audit logger at INFO whatever the process's level; into ``path`` (appended) if given."""
    level = audit.AUDIT.level
    audit.AUDIT.setLevel(logging.INFO)
    handler: logging.Handler | None = None
    if path is not None:
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        audit.AUDIT.addHandler(handler)
        audit.AUDIT.propagate = False
    try:
        yield
    finally:
        audit.AUDIT.setLevel(level)
        if handler is not None:
            audit.AUDIT.removeHandler(handler)
            audit.AUDIT.propagate = True
            handler.close()
