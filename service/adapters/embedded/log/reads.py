"""One fetch's read of the embedded log: every partition's view read in order within one budget.

``EmbeddedLog.fetch`` runs it in a worker thread, with the views pinned so that retention
cannot close a segment under it.
"""

from __future__ import annotations

from service.core.models import PartitionData, RecordColumns, TopicPartition

from ...fetch_budget import FetchBudget
from .partition import PartitionView


def read_views(
    reads: list[tuple[TopicPartition, int, PartitionView]], max_bytes: int, max_records: int | None
) -> tuple[dict[TopicPartition, PartitionData], int, bool]:
    """Runs in a worker thread: read every partition in order within one shared budget. The third
    of what it returns: whether to answer now though fewer than ``min_bytes`` were read (a position
    out of range, or ``max_records`` read)."""
    result: dict[TopicPartition, PartitionData] = {}
    budget = FetchBudget(max_bytes, max_records)
    out_of_range = False
    for tp, offset, view in reads:
        records = RecordColumns.empty()
        if not budget.exhausted:
            n, hit = view.read(
                offset, records, budget=budget.left, force_first=budget.force_first, most=budget.records_left
            )
            budget.spend(n, len(records), stopped_short=hit)
        outside = not view.log_start_offset <= offset <= view.high_watermark
        out_of_range = out_of_range or outside
        result[tp] = PartitionData(records, view.high_watermark, view.log_start_offset, outside)
    return result, budget.used, out_of_range or budget.records_left == 0
