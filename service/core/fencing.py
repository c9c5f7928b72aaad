"""The commit fence: who may commit which partition's offset. Pure logic, shared by the coordinators.

Only the group's owners move its offsets, as Kafka refuses a commit from an unknown
member (UNKNOWN_MEMBER_ID) or an old generation (ILLEGAL_GENERATION):

- a subscribed instance is a group member; it commits only the partitions it owns in the
  current generation, continuously since the generation it read in (``fence``, applied by the
  coordinator atomically with the write);
- an instance with a manual assignment is outside the membership; it commits only the
  partitions it was assigned (``fence_assigned``, applied by ``ConsumerService``);
- an instance with neither commits nothing.

A refused commit stores nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from service.errors import IllegalState

from .models import GroupState, TopicPartition


def fence(
    group: str,
    state: GroupState,
    entries: Iterable[tuple[TopicPartition, int]],
    member_id: str,
    generation: int | None,
) -> None:
    """Refuse a member's commit unless it owns every partition, continuously since ``generation``.

    A member that lost a partition (or lost and regained it) after reading its
    positions would otherwise overwrite the new owner's progress.
    """
    owned = set(state.assignment.get(member_id, ()))
    for tp, _ in entries:
        if tp not in owned:
            raise IllegalState(
                f"consumer {member_id!r} does not own partition {tp} in generation "
                f"{state.generation} of group {group!r}; its offsets were not committed."
            )
        since = state.owned_since.get(tp, state.generation)
        if generation is not None and since > generation:
            raise IllegalState(
                f"consumer {member_id!r} has held partition {tp} only since generation {since} "
                f"of group {group!r}, after the generation {generation} it read in; "
                "its offsets were not committed."
            )


def fence_assigned(
    group: str,
    instance: str,
    assigned: Collection[TopicPartition] | None,
    partitions: Iterable[TopicPartition],
) -> None:
    """Refuse a commit by an instance outside the group's membership unless it was assigned every partition.

    ``assigned`` is the instance's manual assignment, or None when it has none (it never
    subscribed nor assigned, or unsubscribed): such an instance owns nothing and may commit nothing.
    """
    if assigned is None:
        raise IllegalState(
            f"consumer {instance!r} is not a member of group {group!r} and has no assigned partitions; "
            "subscribe or assign partitions first. Its offsets were not committed."
        )
    allowed = set(assigned)
    outside = sorted({tp for tp in partitions if tp not in allowed})
    if outside:
        listed = ", ".join(str(tp) for tp in outside)
        raise IllegalState(
            f"consumer {instance!r} of group {group!r} is not assigned partition(s) {listed}; "
            "its offsets were not committed."
        )
