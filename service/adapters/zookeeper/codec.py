"""What the ZooKeeper coordinator stores in znodes, as bytes.

Members and group states are JSON objects (ASCII: ``json`` escapes
everything else, lone surrogates included, so any name round-trips);
both carry brokergate's ``format`` (``ZOOKEEPER_FORMAT``; none is 1,
as the releases before it wrote them), and one of a newer format is refused as
``NewerFormat``, never read as damage; committed offsets are ASCII decimal digits, as Kafka's ZooKeeper-era
consumers wrote them; ACL bindings and their change events are what Kafka's
``AclAuthorizer`` writes (``ResourceZNode``, ``LiteralAclChangeStore``,
``ExtendedAclChangeStore``), with Kafka's spellings. Decoding is strict: a
znode another program damaged is reported as a ``BackendError`` naming it,
never half-read. The one leniency is Kafka's own: an ACL entry brokergate
cannot model (an operation it does not know) is kept aside, verbatim.

Pure functions, no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, NamedTuple, TypeVar

from service.core.acl import ANONYMOUS, AclBinding, Operation, PatternType, Permission, ResourceType
from service.core.models import GroupState, Member, Subscription, TopicPartition
from service.core.rules import MAX_OFFSET, MAX_PARTITION
from service.errors import BackendError

from ..format_versions import ZOOKEEPER_FORMAT, check_version


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


def _load_ours(data: bytes, what: str) -> dict[str, Any]:
    """A znode brokergate lays out itself: JSON whose ``format`` this release reads."""
    obj = _load(data, what)
    check_version(f"{what} in ZooKeeper", obj.get("format", 1), ZOOKEEPER_FORMAT)
    return obj


def encode_format_marker() -> bytes:
    """The data of ``/brokergate/format``: this release's format of the layout."""
    return _dump({"format": ZOOKEEPER_FORMAT})


def decode_format_marker(data: bytes, what: str) -> int:
    """The format ``/brokergate/format`` names (refused if newer than this release reads)."""
    found = _int(_load(data, what).get("format"), what)
    check_version(f"{what} in ZooKeeper", found, ZOOKEEPER_FORMAT)
    return found


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
            "format": ZOOKEEPER_FORMAT,
            "member_id": member.member_id,
            "subscription": {"topics": list(sub.topics), "pattern": sub.pattern},
            "strategy": member.strategy,
            "joined_ms": member.joined_ms,
            "principal": member.principal,
        }
    )


def decode_member(data: bytes, what: str) -> Member:
    obj = _load_ours(data, what)
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
        principal=_str(obj.get("principal", ANONYMOUS), what),  # members written before there were principals
    )


# --- group state -------------------------------------------------------------------------


def encode_state(state: GroupState) -> bytes:
    """The generation's content; ``version`` is not stored, it is the znode's own stat.version."""
    return _dump(
        {
            "format": ZOOKEEPER_FORMAT,
            "generation": state.generation,
            "assignment": {
                member: [[tp.topic, tp.partition] for tp in tps] for member, tps in state.assignment.items()
            },
            "owned_since": [[tp.topic, tp.partition, gen] for tp, gen in state.owned_since.items()],
            "topics": state.topics,
        }
    )


def decode_state(data: bytes, version: int, what: str) -> GroupState:
    obj = _load_ours(data, what)
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


# --- ACL bindings ------------------------------------------------------------------------

ACLS_VERSION: Final = 1  # of Kafka's ACL znode format and of its extended change events

E = TypeVar("E", bound=StrEnum)


class AclResource(NamedTuple):
    """The resource pattern one ACL znode holds the bindings of."""

    resource_type: ResourceType
    pattern_type: PatternType
    name: str

    @classmethod
    def of(cls, binding: AclBinding) -> AclResource:
        return cls(binding.resource_type, binding.pattern_type, binding.resource_name)

    def __str__(self) -> str:
        return f"{self.pattern_type.value.lower()} {self.resource_type.value.lower()} {self.name!r}"


@dataclass(frozen=True, slots=True)
class AclEntries:
    """What one ACL znode holds: its bindings, and the entries brokergate cannot model, which a
    rewrite of the znode keeps as they are (another Kafka version's operations, say)."""

    bindings: tuple[AclBinding, ...]
    foreign: tuple[Any, ...] = ()


def kafka_name(value: StrEnum) -> str:
    """Kafka's spelling in ZooKeeper: CLUSTER_ACTION -> ClusterAction, ALLOW -> Allow."""
    return "".join(part.capitalize() for part in value.value.split("_"))


def from_kafka_name(text: object, enum: type[E]) -> E | None:
    """The member ``text`` names in any of Kafka's spellings (ClusterAction, CLUSTER_ACTION,
    Cluster_Action, clusteraction); None if there is none."""
    if not isinstance(text, str):
        return None
    key = text.replace("_", "").upper()
    return next((m for m in enum if m.value.replace("_", "") == key), None)


def encode_acls(bindings: tuple[AclBinding, ...], foreign: tuple[Any, ...] = ()) -> bytes:
    """A resource's bindings (all of one ``AclResource``) as Kafka's ACL znode data."""
    entries = [
        {
            "principal": b.principal,
            "permissionType": kafka_name(b.permission),
            "operation": kafka_name(b.operation),
            "host": b.host,
        }
        for b in bindings
    ]
    return _dump({"version": ACLS_VERSION, "acls": [*entries, *foreign]})


def decode_acls(data: bytes, resource: AclResource, what: str) -> AclEntries:
    """The bindings of ``resource`` in an ACL znode (no data at all: none, as Kafka reads it)."""
    if not data:
        return AclEntries(())
    obj = _load(data, what)
    check_version(f"{what} in ZooKeeper", obj.get("version"), ACLS_VERSION)  # Kafka's own number
    if obj.get("version") != ACLS_VERSION or not isinstance(obj.get("acls"), list):
        raise CorruptZnode(f'{what} in ZooKeeper is not {{"version": 1, "acls": [...]}}.')
    bindings: dict[AclBinding, None] = {}
    foreign: list[Any] = []
    for entry in obj["acls"]:
        binding = _binding(entry, resource)
        if binding is None:
            foreign.append(entry)
        else:
            bindings[binding] = None
    return AclEntries(tuple(bindings), tuple(foreign))


def _binding(entry: object, resource: AclResource) -> AclBinding | None:
    if not isinstance(entry, dict):
        return None
    principal, host = entry.get("principal"), entry.get("host")
    operation = from_kafka_name(entry.get("operation"), Operation)
    permission = from_kafka_name(entry.get("permissionType"), Permission)
    if not (isinstance(principal, str) and principal and isinstance(host, str) and host):
        return None
    if operation is None or permission is None:
        return None
    return AclBinding(
        principal, resource.resource_type, resource.name, resource.pattern_type, operation, permission, host
    )


def encode_acl_change(resource: AclResource) -> bytes:
    """The data of the change znode announcing that ``resource``'s bindings changed."""
    if resource.pattern_type is PatternType.LITERAL:  # Kafka's legacy form, "TOPIC:orders"
        return f"{resource.resource_type.value}:{resource.name}".encode("utf-8", "surrogatepass")
    return _dump(
        {
            "version": ACLS_VERSION,
            "resourceType": resource.resource_type.value,
            "name": resource.name,
            "patternType": resource.pattern_type.value,
        }
    )


def decode_acl_change(data: bytes, pattern: PatternType, what: str) -> AclResource | None:
    """The resource a change znode under the ``pattern`` change path names; None if it is one
    brokergate does not keep (another resource or pattern type)."""
    type_name: object
    found: PatternType | None
    if pattern is PatternType.LITERAL:  # "TOPIC:orders" (Kafka 1.x wrote "Topic:orders")
        try:
            type_name, colon, name = data.decode("utf-8", "surrogatepass").partition(":")
        except UnicodeDecodeError as exc:
            raise CorruptZnode(f"{what} in ZooKeeper is not UTF-8.") from exc
        found = PatternType.LITERAL if colon else None
    else:
        obj = _load(data, what)
        if obj.get("version") != ACLS_VERSION:
            raise CorruptZnode(f"{what} in ZooKeeper has an unknown version {obj.get('version')!r}.")
        type_name, name = obj.get("resourceType"), _str(obj.get("name"), what)
        found = from_kafka_name(obj.get("patternType"), PatternType)
    if not name or (pattern is PatternType.LITERAL and found is None):
        raise CorruptZnode(f"{what} in ZooKeeper names no resource.")
    resource_type = from_kafka_name(type_name, ResourceType)
    if resource_type is None or found is None:
        return None
    return AclResource(resource_type, found, name)
