"""The Log port's rule for sharing a fetch's ``max_bytes`` among its partitions, without a log.

Both logs deliver through ``FetchBudget``; their own tests (``tests/unit/embedded_log``,
``tests/integration/kafka``) show it end to end.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from service.adapters.fetch_budget import FetchBudget


def grants(max_bytes: int, partitions: list[list[int]]) -> list[int]:
    budget = FetchBudget(max_bytes)
    return [budget.grant(sizes) for sizes in partitions]


def test_partitions_share_one_budget_in_order() -> None:
    assert grants(35, [[10, 10], [10, 10], [10]]) == [2, 1, 0]


def test_the_first_record_always_goes_even_alone_over_the_budget() -> None:
    assert grants(5, [[100, 1], [1]]) == [1, 0]
    assert grants(0, [[], [7]]) == [0, 1]


def test_once_a_partition_stops_short_the_later_ones_get_nothing() -> None:
    # The third partition's record would fit in what is left, but the second stopped short.
    assert grants(25, [[10], [10, 10], [1]]) == [1, 1, 0]


def test_a_budget_used_up_exactly_leaves_nothing_for_later_partitions() -> None:
    assert grants(100, [[50], [50], [1]]) == [1, 1, 0]


def test_spend_counts_what_a_reader_decoded_itself() -> None:
    budget = FetchBudget(100)
    assert (budget.left, budget.force_first, budget.exhausted) == (100, True, False)
    budget.spend(60, 3, stopped_short=False)
    assert (budget.left, budget.force_first, budget.exhausted) == (40, False, False)
    budget.spend(40, 1, stopped_short=True)
    assert (budget.left, budget.used, budget.taken, budget.exhausted) == (0, 100, 4, True)
    assert budget.grant([1]) == 0


def test_a_count_of_records_is_shared_in_order_too() -> None:
    budget = FetchBudget(1000, max_records=5)
    assert [budget.grant(sizes) for sizes in ([10, 10], [10, 10, 10, 10], [10])] == [2, 3, 0]
    assert (budget.taken, budget.records_left, budget.exhausted) == (5, 0, True)
    budget = FetchBudget(1000, max_records=3)  # as a reader that decodes spends it
    assert budget.records_left == 3
    budget.spend(30, 3, stopped_short=False)
    assert budget.exhausted and budget.grant([1]) == 0
    assert FetchBudget(1000).records_left == -1  # no count: the bytes alone


@given(
    st.integers(0, 200),
    st.lists(st.lists(st.integers(1, 80), max_size=6), max_size=6),
)
def test_what_is_delivered_is_the_longest_fitting_prefix(max_bytes: int, partitions: list[list[int]]) -> None:
    budget = FetchBudget(max_bytes)
    given_counts = [budget.grant(sizes) for sizes in partitions]
    flat = [size for sizes in partitions for size in sizes]
    delivered = [size for sizes, n in zip(partitions, given_counts, strict=True) for size in sizes[:n]]
    # Records go in order: a prefix of all records of all partitions, in the order given.
    assert delivered == flat[: len(delivered)]
    assert budget.used == sum(delivered) and budget.taken == len(delivered)
    if flat:
        assert delivered, "a reader never stalls: the first record always goes"
    assert sum(delivered) <= max_bytes or len(delivered) == 1
    if len(delivered) < len(flat):  # stopped only because the next record did not fit
        assert sum(delivered) + flat[len(delivered)] > max_bytes
