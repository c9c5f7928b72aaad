"""A share consumer's acknowledgements applied to the delivery states of its group's partitions.

``Acknowledgement`` is what a member says of records it holds; ``settle_acks`` applies those of
one partition to its ``SharePartition``, ``settle_acks_in`` a poll's to the states the poll
acquires from and to the stored states of the others, so that ``ShareGroups.poll`` stores
the settlements and the acquisition in one write.

Collaborators: ``state.SharePartition``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..models import TopicPartition
from .delivery import AckType, Exhausted, ShareLimits
from .state import SharePartition


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


def settle_acks_in(
    member: str,
    states: Mapping[TopicPartition, tuple[SharePartition, int]],
    others: Mapping[TopicPartition, tuple[SharePartition, int]],
    by_tp: Mapping[TopicPartition, list[Acknowledgement]],
    now: int,
    limits: ShareLimits,
) -> tuple[dict[TopicPartition, dict[int, str]], list[tuple[TopicPartition, Exhausted]], bool]:
    """Apply a poll's acknowledgements (``by_tp``) to ``states``, the partitions it acquires
    from, and to ``others``, the stored states of the others (a partition in neither has
    nothing held: every offset is refused). What it refused, the records it archived at the
    delivery limit, and whether it settled anything."""
    refusals: dict[TopicPartition, dict[int, str]] = {}
    exhausted: list[tuple[TopicPartition, Exhausted]] = []
    settled = False
    for tp, acks in by_tp.items():
        found = states.get(tp) or others.get(tp)
        sp = found[0] if found is not None else SharePartition(0, limits=limits)
        before = sp.changes
        refused, gone = settle_acks(sp, member, acks, now)
        if refused:
            refusals[tp] = refused
        exhausted += [(tp, e) for e in gone]
        settled = settled or sp.changes != before
    return refusals, exhausted, settled
