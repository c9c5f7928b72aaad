"""What the ZooKeeper coordinator stores in znodes, as bytes.

Members and group states are JSON objects (ASCII: ``json`` escapes
everything else, lone surrogates included, so any name round-trips);
committed offsets are ASCII decimal digits, as Kafka's ZooKeeper-era
consumers wrote them. Decoding is strict: a znode another program damaged is
reported as a ``BackendError`` naming it, never half-read.

Pure functions, no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from service.core.models import GroupState, Member, Subscription, TopicPartition
from service.core.rules import MAX_OFFSET, MAX_PARTITION
from service.errors import BackendError


class CorruptZnode(BackendError):
    """A znode whose data brokergate cannot read."""


def _dump(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise CorruptZnode(f"{what} in ZooKeeper is not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise CorruptZnode(f"{what} in ZooKeeper is not a JSON object.")
    return obj


def _int(value: object, what: str) -> int:
    if type(value) is not int:
        raise CorruptZnode(f"{what} in ZooKeeper holds {value!r} where an integer belongs.")
    return value


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise CorruptZnode(f"{what} in ZooKeeper holds {value!r} where a string belongs.")
    return value


def _tp(value: object, what: str) -> TopicPartition:
    if not isinstance(value, list) or len(value) != 2:
        raise CorruptZnode(f"{what} in ZooKeeper holds {value!r} where [topic, partition] belongs.")
    return TopicPartition(_str(value[0], what), _int(value[1], what))


# --- members -----------------------------------------------------------------------------


def encode_member(member: Member) -> bytes:
    sub = member.subscription
    return _dump(
        {
            "member_id": member.member_id,
            "subscription": {"topics": list(sub.topics), "pattern": sub.pattern},
            "strategy": member.strategy,
            "joined_ms": member.joined_ms,
        }
    )


def decode_member(data: bytes, what: str) -> Member:
    obj = _load(data, what)
    sub = obj.get("subscription")
    if not isinstance(sub, dict) or not isinstance(sub.get("topics"), list):
        raise CorruptZnode(f"{what} in ZooKeeper has no valid subscription.")
    pattern = sub.get("pattern")
    return Member(
        member_id=_str(obj.get("member_id"), what),
        subscription=Subscription(
            topics=tuple(_str(t, what) for t in sub["topics"]),
            pattern=None if pattern is None else _str(pattern, what),
        ),
        strategy=_str(obj.get("strategy"), what),
        joined_ms=_int(obj.get("joined_ms"), what),
    )


# --- group state -------------------------------------------------------------------------


def encode_state(state: GroupState) -> bytes:
    """The generation's content; ``version`` is not stored, it is the znode's own stat.version."""
    return _dump(
        {
            "generation": state.generation,
            "assignment": {
                member: [[tp.topic, tp.partition] for tp in tps] for member, tps in state.assignment.items()
            },
            "owned_since": [[tp.topic, tp.partition, gen] for tp, gen in state.owned_since.items()],
            "topics": state.topics,
        }
    )


def decode_state(data: bytes, version: int, what: str) -> GroupState:
    obj = _load(data, what)
    assignment = obj.get("assignment")
    owned_since = obj.get("owned_since")
    topics = obj.get("topics")
    if not isinstance(assignment, dict) or not isinstance(owned_since, list) or not isinstance(topics, dict):
        raise CorruptZnode(f"{what} in ZooKeeper lacks assignment, owned_since or topics.")
    since: dict[TopicPartition, int] = {}
    for entry in owned_since:
        if not isinstance(entry, list) or len(entry) != 3:
            raise CorruptZnode(f"{what} in ZooKeeper holds {entry!r} where [topic, partition, gen] belongs.")
        since[_tp(entry[:2], what)] = _int(entry[2], what)
    return GroupState(
        generation=_int(obj.get("generation"), what),
        assignment={
            _str(m, what): [_tp(tp, what) for tp in (tps if isinstance(tps, list) else [tps])]
            for m, tps in assignment.items()
        },
        owned_since=since,
        topics={_str(t, what): _int(n, what) for t, n in topics.items()},
        version=version,
    )


# --- offsets -----------------------------------------------------------------------------


def encode_offset(offset: int) -> bytes:
    return str(offset).encode("ascii")


def decode_offset(data: bytes) -> int | None:
    """The offset a znode holds, or None if it holds something else (another tool's leftovers)."""
    text = data.strip()
    if not text.isdigit():
        return None
    offset = int(text)
    return offset if offset <= MAX_OFFSET else None


def decode_partition(name: str) -> int | None:
    if not name.isdigit() or (name != "0" and name.startswith("0")):
        return None
    partition = int(name)
    return partition if partition <= MAX_PARTITION else None
