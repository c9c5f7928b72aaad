"""``record_rows``: a stored state in the previous version's form, a row per record in flight.

Over the share-partition state machine's random histories (``test_state.ShareModel``), the rows
made from a state's runs are exactly what the previous version's ``to_json`` stored, and read back
as the same state; a state already in rows, or one an older replica changed, comes out the same.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import settings
from hypothesis.stateful import invariant

from service.adapters.share_states import encode_state
from service.core.shares.state import SharePartition
from service.core.shares.stored import apply_change, change_records, record_rows

from .test_state import ShareModel


def previous_to_json(state: SharePartition) -> dict[str, Any]:
    """The previous version's ``to_json``: ``[offset, state, deliveries, owner, lock_until_ms, error]``
    per record in flight, ascending."""
    rows = [
        [o, r.state.value, r.deliveries, r.owner, r.lock_until_ms, r.error] for o, r in state.records.items()
    ]
    return {"start": state.start, "end": state.end, "records": rows}


class RecordRowsModel(ShareModel):
    @invariant()
    def its_rows_are_the_previous_versions(self) -> None:
        state = self.state
        old = previous_to_json(state)
        rows = record_rows(state.to_json())
        assert rows == old
        assert encode_state(rows, "p") == orjson.dumps(old)  # the bytes the previous version wrote
        assert SharePartition.from_json(rows, self.limits) == state
        assert record_rows(old) == old  # rows stay rows
        base = record_rows(getattr(self, "base", SharePartition(0).to_json()))
        assert record_rows(apply_change(base, state.change_json())) == old  # a change to rows
        assert change_records(base, state.change_json()) == old  # made to the rows themselves
        assert change_records(base, {**state.to_json(), "whole": True}) == old


TestRecordRows = RecordRowsModel.TestCase
TestRecordRows.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)


def test_runs_expand_in_offset_order_whatever_order_they_come_in() -> None:
    state = {
        "start": 7,
        "end": 20,
        "runs": [[15, 16, "AVAILABLE", 2, None, 0, "e"], [7, 9, "ACQUIRED", 1, "m", 50, None]],
    }
    assert record_rows(state) == {
        "start": 7,
        "end": 20,
        "records": [
            [7, "ACQUIRED", 1, "m", 50, None],
            [8, "ACQUIRED", 1, "m", 50, None],
            [9, "ACQUIRED", 1, "m", 50, None],
            [15, "AVAILABLE", 2, None, 0, "e"],
            [16, "AVAILABLE", 2, None, 0, "e"],
        ],
    }
    assert record_rows({"start": 3, "end": 3, "runs": []}) == {"start": 3, "end": 3, "records": []}


@pytest.mark.parametrize(
    "state",
    [
        {
            "start": 0,
            "end": 9,
            "runs": [[0, 5, "ACQUIRED", 1, "m", 5, None], [5, 6, "AVAILABLE", 1, None, 0, None]],
        },
        {"start": 0, "end": 9, "runs": [[4, 2, "ACQUIRED", 1, "m", 5, None]]},
        {"start": 0, "end": 9, "runs": [[0, 1, "ACQUIRED"]]},
        {"start": 0, "runs": []},
    ],
)
def test_what_is_not_runs_is_refused(state: dict[str, Any]) -> None:
    with pytest.raises((KeyError, ValueError)):
        record_rows(state)


def test_a_change_to_rows_not_as_written_reads_them_one_by_one() -> None:
    """Rows out of order (no version writes them so) are read as ``apply_change`` reads them."""
    state = {
        "start": 0,
        "end": 3,
        "records": [[2, "AVAILABLE", 1, None, 0, None], [0, "ACQUIRED", 1, "m", 9, None]],
    }
    change = {"start": 0, "end": 3, "spans": [[2, 2, [[2, 2, "ACQUIRED", 2, "n", 9, None]]]]}
    assert change_records(state, change) == {
        "start": 0,
        "end": 3,
        "records": [[0, "ACQUIRED", 1, "m", 9, None], [2, "ACQUIRED", 2, "n", 9, None]],
    }
    with pytest.raises(ValueError, match="overlap"):
        change_records({**state, "records": [*state["records"], [2, "AVAILABLE", 1, None, 0, None]]}, change)
