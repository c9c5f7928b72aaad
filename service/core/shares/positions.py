"""Where a share poll reads each partition (``read_positions``), and where a share-partition whose
offsets fell out of its log starts again (``fit_to_log``).

A stored share-partition state can be past its log's end: the topic was deleted and made again
with the same name and fewer records, or the state outlived the log it was made on. Kafka keys a
share-partition by the topic's id, so a topic made again starts a new state where
``share.auto.offset.reset`` says; a state kept by name must do the same when the log says its
offsets are gone, else its consumers acquire nothing for good. What was in flight there is of a
log that is gone: it is dropped. Before the log start is another case: retention removed records
there, and the state only forgets them (``SharePartition.truncate``), as Kafka's share fetch
moves its start offset on OFFSET_OUT_OF_RANGE.

No I/O: the caller read the log at ``position`` and got ``part``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Literal

from ..models import PartitionData, TopicPartition
from .state import SharePartition

log = logging.getLogger(__name__)


def read_positions(states: Mapping[TopicPartition, tuple[SharePartition, int]]) -> dict[TopicPartition, int]:
    """Where to read each partition that can give a record now: its first available one (records
    to deliver again are in the window, new ones past its end), or its end if its window has
    room; a full window with nothing available is not read. From a partition picked at random
    on: the log fills the byte budget partition by partition, so each gets its turn first."""
    positions: dict[TopicPartition, int] = {}
    for tp, (sp, _) in states.items():
        available = sp.first_available()
        if available is not None:
            positions[tp] = available
        elif sp.has_room():
            positions[tp] = sp.end
    order = list(positions)
    first = random.randrange(len(order)) if order else 0
    return {tp: positions[tp] for tp in order[first:] + order[:first]}


def restart_at(
    sp: SharePartition, position: int, part: PartitionData, start_at: Literal["earliest", "latest"]
) -> int | None:
    """Where ``sp`` starts over, by ``start_at``, if reading it at ``position`` found its offsets past
    the log end; None if they are in the log. Past the end: the read is out of range above the
    log start, or found the log ending at ``position`` though ``sp`` has records in flight beyond
    (they were read from a log that held more)."""
    past = part.out_of_range and position > part.log_start_offset
    short = not part.records and position == part.high_watermark < sp.end
    if not (past or short):
        return None
    return part.log_start_offset if start_at == "earliest" else part.high_watermark


def fit_to_log(
    sp: SharePartition,
    position: int,
    part: PartitionData,
    start_at: Literal["earliest", "latest"],
    *,
    where: str,
) -> None:
    """Start ``sp`` over if it is past the log end (``restart_at``), else forget what it has
    before the log start; ``where`` names it in the warning a restart logs."""
    again = restart_at(sp, position, part, start_at)
    if again is None:
        sp.truncate(part.log_start_offset)
        return
    log.warning(
        "%s: offsets %d to %d are past the log end %d; starting over at %d (share.auto.offset.reset %s)",
        where,
        sp.start,
        sp.end,
        part.high_watermark,
        again,
        start_at,
    )
    sp.reset(again)
