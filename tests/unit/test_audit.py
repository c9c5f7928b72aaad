"""The audit trail's lines, and its bound: a flood of refusals is counted, not written."""

from __future__ import annotations

import json
import logging

import pytest

from service.core import audit


def test_a_line_is_one_json_object_whatever_the_names_hold(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="brokergate.audit"):
        audit.record(
            "authorization",
            principal='User:eve\n{"forged": 1}',
            address="10.0.0.1",
            operation="READ",
            resource="TOPIC:t\r\nx",
            outcome=audit.DENIED,
        )
    (message,) = [r.getMessage() for r in caplog.records]
    assert "\n" not in message and "\r" not in message
    line = json.loads(message)
    assert line["principal"] == 'User:eve\n{"forged": 1}'
    assert line["outcome"] == "DENIED"


def test_past_the_budget_lines_are_counted_and_the_count_written_next_second() -> None:
    budget = audit._Budget(3)
    assert [budget.take(100.1)[0] for _ in range(5)] == [True, True, True, False, False]
    assert budget.take(100.9) == (False, 0)
    assert budget.take(101.0) == (True, 3)  # the new second: a line may go, and 3 were dropped
    assert budget.take(101.5) == (True, 0)


def test_the_count_of_a_second_that_is_over_is_told_once_without_another_line() -> None:
    budget = audit._Budget(3)
    for _ in range(5):
        budget.take(100.1)
    assert budget.ended(100.9) == 0  # the second is not over
    assert budget.ended(101.2) == 2  # it is: the flush writes its count, no new line needed
    assert budget.ended(101.3) == 0 and budget.take(101.4) == (True, 0)  # told once
    for _ in range(5):
        budget.take(101.5)
    assert budget.ended(101.6, final=True) == 3  # at the exit, the current second's too
