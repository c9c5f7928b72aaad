"""The commit fence, without servers: who may commit which partition."""

from __future__ import annotations

import pytest

from service.core.fencing import fence, fence_assigned
from service.core.models import GroupState, TopicPartition
from service.errors import ErrorCode, GatewayError

TP = TopicPartition
STATE = GroupState(
    generation=4,
    assignment={"a": [TP("t", 0), TP("t", 1)], "b": [TP("t", 2)]},
    owned_since={TP("t", 0): 1, TP("t", 1): 3, TP("t", 2): 4},
)


def refused(call: object) -> str:
    assert callable(call)
    with pytest.raises(GatewayError) as caught:
        call()
    assert caught.value.http_status == 409 and caught.value.error_code == ErrorCode.ILLEGAL_STATE
    return caught.value.message


def test_member_commits_what_it_owns_since_its_generation() -> None:
    fence("g", STATE, [(TP("t", 0), 5), (TP("t", 1), 6)], "a", 3)
    fence("g", STATE, [(TP("t", 0), 5)], "a", None)


@pytest.mark.parametrize(
    ("member", "tps", "generation"),
    [
        ("a", [TP("t", 2)], 4),  # another member's partition
        ("a", [TP("t", 0), TP("t", 2)], 4),  # one not owned spoils the whole commit
        ("a", [TP("t", 1)], 2),  # owned only since after the generation it read in
        ("ghost", [TP("t", 0)], 4),  # not a member at all
    ],
)
def test_member_is_refused_what_it_does_not_own(
    member: str, tps: list[TopicPartition], generation: int
) -> None:
    message = refused(lambda: fence("g", STATE, [(tp, 1) for tp in tps], member, generation))
    assert "not committed" in message


def test_manual_assignment_commits_only_its_partitions() -> None:
    fence_assigned("g", "m", [TP("t", 2), TP("u", 0)], [TP("t", 2), TP("u", 0)])
    fence_assigned("g", "m", [TP("t", 2)], [])
    message = refused(lambda: fence_assigned("g", "m", [TP("t", 2)], [TP("t", 2), TP("t", 1), TP("t", 0)]))
    assert "t-0, t-1" in message and "t-2" not in message
    refused(lambda: fence_assigned("g", "m", [], [TP("t", 2)]))


def test_instance_with_no_membership_nor_assignment_commits_nothing() -> None:
    message = refused(lambda: fence_assigned("g", "idle", None, [TP("t", 0)]))
    assert "not a member of group 'g'" in message
