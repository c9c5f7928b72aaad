"""The commit fence: who may commit which partition's offset. Pure logic, shared by every coordinator."""

from __future__ import annotations

from collections.abc import Iterable

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
