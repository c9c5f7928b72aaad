"""What a share consumer is handed: each record with how many times it was delivered."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
from typing import NamedTuple

from ..models import Polled, Record, RecordColumns, TopicPartition


class Delivered(NamedTuple):
    """A record a member acquired, with the number of times it has been delivered (1: the first).
    A tuple: one is made per record a poll hands out."""

    tp: TopicPartition
    record: Record
    deliveries: int


def by_partition_run(delivered: Sequence[Delivered]) -> Polled:
    """A share poll's records as the consumer is given them: partition by partition, as columns
    with how many times each was delivered."""
    polled: Polled = []
    for tp, run in groupby(delivered, key=itemgetter(0)):
        items = list(run)
        records = RecordColumns.of([d.record for d in items])
        polled.append((tp, records.with_deliveries([d.deliveries for d in items])))
    return polled
