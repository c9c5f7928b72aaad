"""The process log's bound: a flood of failures writes a bounded number of bytes, and tells how many
lines it left out."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from service.server.logs import LogBudget

FORMAT = "%(levelname)s %(name)s: %(message)s"


@pytest.fixture
def written() -> tuple[logging.Handler, LogBudget, io.StringIO]:
    """A handler writing into a buffer through a budget of 10 lines a second."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter(FORMAT))
    budget = LogBudget(lines_per_s=10, traceback_bytes=2048)
    handler.addFilter(budget)
    return handler, budget, out


def _deep_failure(depth: int) -> None:
    if depth:
        _deeper_failure(depth - 1)  # two functions in turn: no "previous line repeated" shortens it
    raise RuntimeError("the input made it fail " + "x" * 200)


def _deeper_failure(depth: int) -> None:
    _deep_failure(depth)


def _records(n: int, at: float) -> list[logging.LogRecord]:
    """``n`` error records with the same deep traceback, all in the second ``at`` begins."""
    try:
        _deep_failure(300)  # a traceback of some 60 KiB, as a RecursionError's
    except RuntimeError:
        exc_info = sys.exc_info()
    records = []
    for i in range(n):
        record = logging.LogRecord(
            "brokergate.x", logging.ERROR, __file__, 42, "request %d failed", (i,), exc_info
        )
        record.created = at + i / (n * 10)
        records.append(record)
    return records


def test_a_thousand_failures_write_a_bounded_number_of_bytes(written) -> None:
    handler, budget, out = written
    records = _records(1000, at=1000.0)
    whole = len(logging.Formatter(FORMAT).format(logging.makeLogRecord(records[0].__dict__)))
    assert whole > 50_000  # what the log took before, a thousand times: some 60 MiB
    for record in records:
        handler.handle(record)
    text = out.getvalue()
    assert len(text) < 2048 + 10 * 600  # one cut traceback, nine one-line repeats
    assert text.count("request ") == 10
    assert "bytes of traceback cut" in text and "(traceback as logged before from here)" in text
    assert "RuntimeError: the input made it fail" in text  # the end of a traceback is what is kept
    assert budget.ended(1000.5) == 0  # the second is not over: nothing yet
    told: list[logging.LogRecord] = []
    catch = logging.Handler()
    catch.emit = told.append  # type: ignore[method-assign]
    logging.getLogger("brokergate").addHandler(catch)
    try:
        budget.flush()  # the real clock is far past second 1000
    finally:
        logging.getLogger("brokergate").removeHandler(catch)
    [summary] = [r.getMessage() for r in told]
    assert summary == "log.suppressed: 990 log lines not written (past 10 a second)"
    assert budget.filter(told[0])  # the count itself is always written
    assert budget.ended(2000.0) == 0  # counted once


def test_each_second_has_its_budget_and_the_count_is_final_at_the_exit(written) -> None:
    handler, budget, out = written
    for second in (1000.0, 1001.0):
        for record in _records(15, at=second):
            handler.handle(record)
    assert out.getvalue().count("request ") == 20
    assert budget.ended(1001.5) == 5  # second 1000's, over
    assert budget.ended(1001.5) == 0
    assert budget.ended(1001.5, final=True) == 5  # the current second's, at the exit


def test_a_record_through_several_handlers_is_counted_once(written) -> None:
    handler, budget, out = written
    second = io.StringIO()
    other = logging.StreamHandler(second)
    other.addFilter(budget)
    for record in _records(10, at=1000.0):
        handler.handle(record)
        other.handle(record)
    assert out.getvalue().count("request ") == second.getvalue().count("request ") == 10


def test_the_audit_trail_is_not_the_process_logs_to_bound(written) -> None:
    _, budget, _ = written
    audit = logging.getLogger("brokergate.audit")
    for i in range(50):
        record = audit.makeRecord(audit.name, logging.INFO, __file__, 1, "line %d", (i,), None)
        record.created = 1000.0
        assert budget.filter(record)
