"""A share consumer's acknowledgements applied to the delivery states of its group's partitions.

``Acknowledgement`` is what a member says of records it holds; ``settle_acks`` applies those of
one partition to its ``SharePartition``, ``settle_acks_in`` a poll's to the states the poll
acquires from (and to the stored states of the others), so that ``ShareGroups.poll`` stores
the settlements and the acquisition in one write.

Collaborators: ``state.SharePartition``, the ``Coordinator`` (stored states).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..models import TopicPartition
from ..ports import Coordinator
from .state import AckType, Exhausted, ShareLimits, SharePartition


@dataclass(frozen=True, slots=True)
class Acknowledgement:
    """What a member says of records it holds: ``kind`` for ``offsets`` of ``tp`` (RELEASE and
    REJECT may carry the error the member met, kept for the dead-letter copy)."""

    tp: TopicPartition
    offsets: tuple[int, ...]
    kind: AckType
    error: str | None = None


def by_partition(acks: Iterable[Acknowledgement]) -> dict[TopicPartition, list[Acknowledgement]]:
    """``acks`` by partition, in their order."""
    by_tp: dict[TopicPartition, list[Acknowledgement]] = {}
    for ack in acks:
        by_tp.setdefault(ack.tp, []).append(ack)
    return by_tp


def settle_acks(
    sp: SharePartition, member: str, acks: Iterable[Acknowledgement], now: int
) -> tuple[dict[int, str], list[Exhausted]]:
    """``acks`` (of one partition) applied to ``sp``: the offsets refused (with why), the records
    a RELEASE archived at the delivery limit."""
    refused: dict[int, str] = {}
    exhausted: list[Exhausted] = []
    for ack in acks:
        no, gone = sp.acknowledge(member, ack.offsets, ack.kind, now, error=ack.error)
        refused.update(no)
        exhausted += gone
    return refused, exhausted


async def settle_acks_in(
    coordinator: Coordinator,
    group: str,
    member: str,
    states: dict[TopicPartition, tuple[SharePartition, int]],
    by_tp: Mapping[TopicPartition, list[Acknowledgement]],
    now: int,
    updates: dict[TopicPartition, tuple[dict[str, Any], int]],
    limits: ShareLimits,
) -> tuple[dict[TopicPartition, dict[int, str]], list[tuple[TopicPartition, Exhausted]], bool]:
    """Apply a poll's acknowledgements (``by_tp``) to ``states``, the partitions it acquires
    from, and to the stored states of the others, read here (none stored: nothing is held,
    every offset is refused); those others that changed are put in ``updates``. What it
    refused, the records it archived at the delivery limit, and whether it settled anything."""
    refusals: dict[TopicPartition, dict[int, str]] = {}
    exhausted: list[tuple[TopicPartition, Exhausted]] = []
    settled = False
    if not by_tp:
        return refusals, exhausted, settled
    others = [tp for tp in by_tp if tp not in states]
    stored = await coordinator.share_states(group, others) if others else {}
    for tp, acks in by_tp.items():
        if tp in states:
            sp, version = states[tp]
        elif tp in stored:
            data, version = stored[tp]
            sp = SharePartition.from_json(data, limits)
        else:
            sp, version = SharePartition(0, limits=limits), -1
        before = sp.changes
        refused, gone = settle_acks(sp, member, acks, now)
        if refused:
            refusals[tp] = refused
        exhausted += [(tp, e) for e in gone]
        settled = settled or sp.changes != before
        if tp not in states and version != -1 and sp.changes:
            updates[tp] = (sp.to_json(), version)
    return refusals, exhausted, settled
