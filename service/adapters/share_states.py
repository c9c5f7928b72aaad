"""What every coordinator keeps of a share-partition: the limits, the checks, and the stored bytes.

The core keeps the delivery state of a partition in a share group
(``service.core.shares.state.SharePartition``) through the Coordinator port, as a
JSON object and a version (``store_share_states``). Both coordinators check
what they are given here, so they refuse alike, and encode alike:
compact JSON, ASCII when a text holds what UTF-8 cannot carry (a lone
surrogate). (The ZooKeeper coordinator writes a state in runs as a row per
record, the form replicas of the previous version read; the bounds apply to
that.) Refusals are ``InvalidPayload`` (a name, a partition or a version no
coordinator stores), ``ShareStateTooLarge`` (a state, or one write, over its
bound) and ``IllegalState`` (a group or partition over ``ShareStoreLimits``).

Pure, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

import orjson

from service.core.models import TopicPartition
from service.core.ports import ShareStates
from service.core.rules import MAX_GROUP_CHARS, valid_group, valid_offset_key
from service.core.shares.stored import StateChange, StoredState, apply_change, change_records
from service.errors import BackendError, IllegalState, InvalidPayload, ShareStateTooLarge

__all__ = [
    "ABSENT",
    "DECODE_INLINE_BYTES",
    "MAX_WRITE_BYTES",
    "ShareStoreLimits",
    "ShareWrite",
    "change_by_whole_states",
    "check_room",
    "check_share_group",
    "check_sizes",
    "decode_state",
    "decode_states",
    "encode_state",
    "encode_writes",
    "stored_partitions",
]

ABSENT: Final = -1  # the version of a partition with nothing stored
# One write is one ZooKeeper request, which ZooKeeper caps at about 1 MiB (jute.maxbuffer):
# states, plus room for the paths and framing of a transaction.
MAX_WRITE_BYTES: Final = 900 << 10
_ENTRY_OVERHEAD: Final = 32  # what one partition of a write costs beside its state and topic
# States read back that weigh more than this together are better decoded off the event loop.
DECODE_INLINE_BYTES: Final = 256 << 10

ShareWrite = tuple[TopicPartition, bytes, int]  # (partition, state JSON, version)


@dataclass(frozen=True, slots=True)
class ShareStoreLimits:
    """How much share-group state a coordinator keeps: groups, partitions per group, bytes per state.

    A state's size follows from the records it has in flight (``ShareLimits.max_in_flight``,
    2,000 by default, about 100 bytes each with a member id) and the error texts members
    gave with them; ``max_state_bytes`` must leave room for both.
    """

    max_groups: int = 1_000
    max_partitions: int = 10_000  # per group
    max_state_bytes: int = 512 << 10

    def __post_init__(self) -> None:
        if self.max_groups < 1 or self.max_partitions < 1:
            raise ValueError("share groups and their partitions are limited to at least 1")
        if not 0 < self.max_state_bytes <= MAX_WRITE_BYTES:
            raise ValueError(f"a share-partition state is limited to 1 to {MAX_WRITE_BYTES} bytes")


def check_share_group(group: str) -> str:
    if not valid_group(group):
        raise InvalidPayload(f"A share group name is 1 to {MAX_GROUP_CHARS} characters.")
    return group


def encode_writes(
    group: str, updates: Mapping[TopicPartition, tuple[StoredState, int]], limits: ShareStoreLimits
) -> list[ShareWrite]:
    """The updates of one ``store_share_states`` call, checked and encoded: (partition, state JSON,
    expected version) each. Nothing is stored unless every one passes."""
    check_share_group(group)
    writes: list[ShareWrite] = []
    for tp, (state, version) in updates.items():
        where = f"partition {tp.topic}-{tp.partition} of share group {group!r}"
        if not valid_offset_key(tp):
            raise InvalidPayload(f"Cannot keep the state of {where}: no coordinator stores that partition.")
        if type(version) is not int or version < ABSENT:
            raise InvalidPayload(f"Cannot keep the state of {where}: {version!r} is not a version.")
        data = encode_state(state, where)
        writes.append((tp, data, version))
    check_sizes(group, [(tp, len(data), len(data)) for tp, data, _ in writes], limits)
    return writes


def check_sizes(
    group: str, sizes: Iterable[tuple[TopicPartition, int, int]], limits: ShareStoreLimits
) -> None:
    """Refuse a write whose (partition, bytes of its whole state once written, bytes it writes)
    pass the bound on a state, or together the bound on a write."""
    total = count = 0
    for tp, state_bytes, written in sizes:
        if state_bytes > limits.max_state_bytes:
            where = f"partition {tp.topic}-{tp.partition} of share group {group!r}"
            raise ShareStateTooLarge(
                f"The delivery state of {where} takes {state_bytes} bytes, more than the "
                f"{limits.max_state_bytes} a coordinator keeps; fewer records in flight (or shorter "
                "error texts) make it smaller."
            )
        total += written + len(tp.topic) + _ENTRY_OVERHEAD
        count += 1
    if total > MAX_WRITE_BYTES:
        raise ShareStateTooLarge(
            f"The states of {count} partitions of share group {group!r} take {total} bytes, "
            f"more than the {MAX_WRITE_BYTES} one write stores; store them in several."
        )


def check_room(
    group: str, new: int, *, groups: int, group_exists: bool, partitions: int, limits: ShareStoreLimits
) -> None:
    """Refuse ``new`` partitions more in ``group`` when they would pass a limit: ``groups`` are the
    groups with a state now, ``partitions`` the partitions of ``group`` with one."""
    if not new:
        return
    if not group_exists and groups >= limits.max_groups:
        raise IllegalState(
            f"The coordinator keeps the state of {groups} share groups, the most allowed; delete one first."
        )
    if partitions + new > limits.max_partitions:
        raise IllegalState(
            f"Share group {group!r} would keep the state of {partitions + new} partitions, more than "
            f"the {limits.max_partitions} allowed."
        )


def encode_state(state: Mapping[str, Any], where: str) -> bytes:
    """A state as stored: compact JSON (ASCII-escaped when a text is not valid UTF-8)."""
    if not isinstance(state, Mapping):
        raise InvalidPayload(f"The state of {where} is not a JSON object.")
    try:
        return orjson.dumps(state)
    except TypeError:  # a lone surrogate, an integer past 64 bits, or something no JSON holds
        pass
    try:
        return json.dumps(dict(state), separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"The state of {where} is not JSON: {exc}") from None


def decode_state(data: bytes, where: str) -> StoredState:
    """A stored state, a new object for every call (the caller may change it). Only its being a
    JSON object is checked here; the core checks the rest when it builds the state it is of."""
    try:
        state = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            state = json.loads(data)  # escapes orjson refuses (a lone surrogate)
        except ValueError as exc:
            raise BackendError(f"The stored state of {where} is not JSON: {exc}") from None
    if not isinstance(state, dict):
        raise BackendError(f"The stored state of {where} is not a JSON object.")
    return cast(StoredState, state)


def decode_states(
    group: str, found: Iterable[tuple[TopicPartition, bytes, int]]
) -> dict[TopicPartition, tuple[StoredState, int]]:
    """What ``share_states`` answers for the (partition, stored bytes, version) of ``group`` found."""
    return {
        tp: (decode_state(data, f"partition {tp.topic}-{tp.partition} of share group {group!r}"), version)
        for tp, data, version in found
    }


def stored_partitions(tps: Iterable[TopicPartition] | None) -> list[TopicPartition] | None:
    """The partitions a read or a delete names, once each, leaving out those no coordinator stores."""
    if tps is None:
        return None
    return [tp for tp in dict.fromkeys(tps) if valid_offset_key(tp)]


async def change_by_whole_states(
    store: ShareStates, group: str, changes: Mapping[TopicPartition, tuple[StateChange, int]]
) -> dict[TopicPartition, int] | None:
    """``change_share_states`` for a coordinator that stores whole states: each change made to the
    state read, stored whole at the version given (compare-and-set). No new version is given (it
    is known only to a read that may come after another replica's write). A state read as a row
    per record (the previous version's form, which the ZooKeeper coordinator writes) is changed
    as rows: the rows the change leaves are not decoded into runs and expanded again."""
    stored = await store.share_states(group, list(changes))
    updates: dict[TopicPartition, tuple[StoredState, int]] = {}
    for tp, (change, version) in changes.items():
        state, at = stored.get(tp, (None, ABSENT))
        if at != version:
            return None
        try:
            if state is not None and "records" in state and "runs" not in state:
                updates[tp] = (change_records(state, change), version)
            else:
                updates[tp] = (apply_change(state, change), version)
        except (KeyError, TypeError, IndexError, ValueError):
            where = f"partition {tp.topic}-{tp.partition} of share group {group!r}"
            raise InvalidPayload(f"The change of {where} is not a share-partition's change.") from None
    return {} if await store.store_share_states(group, updates) else None
