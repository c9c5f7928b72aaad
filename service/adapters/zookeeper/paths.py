"""Every znode path the ZooKeeper coordinator uses, and how names become znode names.

The layout, under the chroot of the ``zookeeper://`` URL when there is one::

    /brokergate/format                               JSON {"format": N}: the layout's format (format_marker)
    /brokergate/nodes/{node-id}                      ephemeral: one per live gateway replica
    /brokergate/election/{token}__{seq}              ephemeral sequential: leadership candidates
    /brokergate/groups/{group}/members/{instance}    JSON of a Member
    /brokergate/groups/{group}/state                 JSON of the GroupState; its stat.version is the CAS token
    /brokergate/locks/{name}/{uuid}__lock__{seq}     ephemeral sequential: kazoo Lock contenders
    /brokergate/share-groups/{group}/{topic}/{partition}
                                                     JSON of a share-partition state; stat.version: version
    /brokergate/push-subscriptions/{name}            JSON of a push subscription; stat.version: version
    /consumers/{group}/offsets/{topic}/{partition}   committed offset as ASCII digits
    /kafka-acl/{Topic|Group|Cluster}/{name}          JSON of the LITERAL ACL bindings of a resource
    /kafka-acl-extended/prefixed/{type}/{prefix}     JSON of the PREFIXED ACL bindings of a prefix
    /kafka-acl-changes/acl_changes_{seq}             sequential: a LITERAL resource whose ACLs changed
    /kafka-acl-extended-changes/acl_changes_{seq}    sequential: a PREFIXED one

``/consumers`` and the ACL paths are Kafka's classic layout, so ZooKeeper-era
tools read brokergate's commits and Kafka operators find its ACLs where
``kafka-acls --authorizer-properties zookeeper.connect=…`` keeps them. The ACL
paths are created with the first binding stored, the share groups' with the
first state. Names become znode names verbatim whenever ZooKeeper accepts
them, so ordinary group, topic and resource names read the same in ZooKeeper;
anything else is percent-encoded (see ``encode_name``).

The chroot is applied here rather than by kazoo because kazoo cannot create a
missing chroot, and a fresh ZooKeeper should work without preparation.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import unquote

from service.core.acl import PatternType, ResourceType
from service.core.models import TopicPartition

BROKERGATE: Final = "/brokergate"
FORMAT: Final = f"{BROKERGATE}/format"
NODES: Final = f"{BROKERGATE}/nodes"
ELECTION: Final = f"{BROKERGATE}/election"
GROUPS: Final = f"{BROKERGATE}/groups"
LOCKS: Final = f"{BROKERGATE}/locks"
SHARE_GROUPS: Final = f"{BROKERGATE}/share-groups"
PUSH_SUBSCRIPTIONS: Final = f"{BROKERGATE}/push-subscriptions"
CONSUMERS: Final = "/consumers"
KAFKA_ACL: Final = "/kafka-acl"
KAFKA_ACL_PREFIXED: Final = "/kafka-acl-extended/prefixed"  # Kafka's ``patternType.name.toLowerCase``
KAFKA_ACL_CHANGES: Final = "/kafka-acl-changes"
KAFKA_ACL_EXTENDED_CHANGES: Final = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX: Final = "acl_changes_"
# Kafka's names of the resource types in ACL paths (``SecurityUtils.resourceTypeName``).
ACL_TYPE_DIRS: Final = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
}

MEMBERS: Final = "members"
STATE: Final = "state"
OFFSETS: Final = "offsets"

# Separates a candidate's token from the sequence number ZooKeeper appends (10 digits).
CANDIDATE_SEPARATOR: Final = "__"
SEQUENCE_DIGITS: Final = 10

# Lone surrogates can reach us from JSON ("\ud800"); they must round-trip like any other name.
_TEXT_ERRORS: Final = "surrogatepass"
_RESERVED_NAMES: Final = {".": "%2E", "..": "%2E%2E"}


def _znode_safe(ch: str) -> bool:
    """Whether ZooKeeper takes ``ch`` in a znode name (its PathUtils.validatePath, on UTF-16 units).

    '%' is refused too: it is the escape character of our own encoding.
    """
    code = ord(ch)
    return not (
        code <= 0x1F
        or 0x7F <= code <= 0x9F
        or 0xD800 <= code <= 0xF8FF  # surrogates and private use
        or code >= 0xFFF0  # specials, and everything outside the BMP (a surrogate pair in Java)
        or ch in "/%"
    )


def encode_name(name: str) -> str:
    """A non-empty ``name`` as one znode name, reversible with ``decode_name``.

    Where this differs from Kafka, which writes ACL resource names verbatim: names holding
    '/', '%' or a character ZooKeeper refuses, and '.' and '..'. No topic name can hold any
    of these (Kafka's rule), so topic ACLs are spelled alike. A group name or prefix holding
    '/' is beyond Kafka's own ZooKeeper authorizer ('/' nests the path); one holding '%'
    reads to Kafka as spelled here ('50%25off' for '50%off'); ``AclStore`` reads and
    rewrites a znode Kafka named so where it is (``verbatim_name``), unless the name reads
    as an escape ('a%2Fb' is ours, for 'a/b').
    """
    if name in _RESERVED_NAMES:
        return _RESERVED_NAMES[name]
    if all(_znode_safe(ch) for ch in name):
        return name
    return "".join(
        ch if _znode_safe(ch) else "".join(f"%{b:02X}" for b in ch.encode("utf-8", _TEXT_ERRORS))
        for ch in name
    )


def verbatim_name(name: str) -> str | None:
    """``name`` as Kafka names its ACL znode, when ZooKeeper takes that and ``encode_name`` spells
    it otherwise: a name whose only character to escape is '%'. None for any other name."""
    if "%" not in name or name in _RESERVED_NAMES:
        return None
    return name if all(ch == "%" or _znode_safe(ch) for ch in name) else None


def decode_name(znode: str) -> str:
    return unquote(znode, encoding="utf-8", errors=_TEXT_ERRORS) if "%" in znode else znode


class ZnodePaths:
    """The layout above, rooted at a chroot ("" for none)."""

    def __init__(self, chroot: str = "") -> None:
        self.chroot = chroot.rstrip("/")
        self.format = self.chroot + FORMAT
        self.nodes = self.chroot + NODES
        self.election = self.chroot + ELECTION
        self.groups = self.chroot + GROUPS
        self.locks = self.chroot + LOCKS
        self.consumers = self.chroot + CONSUMERS
        self.share_groups = self.chroot + SHARE_GROUPS
        self.push_subscriptions = self.chroot + PUSH_SUBSCRIPTIONS
        self._acl_roots = {
            PatternType.LITERAL: self.chroot + KAFKA_ACL,
            PatternType.PREFIXED: self.chroot + KAFKA_ACL_PREFIXED,
        }
        self._acl_changes = {
            PatternType.LITERAL: self.chroot + KAFKA_ACL_CHANGES,
            PatternType.PREFIXED: self.chroot + KAFKA_ACL_EXTENDED_CHANGES,
        }

    def bases(self) -> tuple[str, ...]:
        """The persistent parents created on start (not the ACL paths: see ``AclStore``)."""
        return self.nodes, self.election, self.groups, self.consumers

    def node(self, node_id: str) -> str:
        return f"{self.nodes}/{encode_name(node_id)}"

    def candidate_prefix(self, token: str) -> str:
        return f"{self.election}/{token}{CANDIDATE_SEPARATOR}"

    def lock(self, name: str) -> str:
        """The parent of the contenders for the lock ``name`` (kazoo's ``Lock`` creates it)."""
        return f"{self.locks}/{encode_name(name)}"

    def group(self, group: str) -> str:
        return f"{self.groups}/{encode_name(group)}"

    def members(self, group: str) -> str:
        return self.members_of_znode(encode_name(group))

    def members_of_znode(self, znode: str) -> str:
        """The members of a group known by its znode name (as listed under ``groups``)."""
        return f"{self.groups}/{znode}/{MEMBERS}"

    def member(self, group: str, member_id: str) -> str:
        return f"{self.members(group)}/{encode_name(member_id)}"

    def state(self, group: str) -> str:
        return f"{self.group(group)}/{STATE}"

    def offsets(self, group: str) -> str:
        return self.offsets_of_znode(encode_name(group))

    def offsets_of_znode(self, znode: str) -> str:
        """The offsets of a group known by its znode name (as listed under ``consumers``)."""
        return f"{self.consumers}/{znode}/{OFFSETS}"

    def topic_offsets(self, group: str, topic: str) -> str:
        return f"{self.offsets(group)}/{encode_name(topic)}"

    def offset(self, group: str, tp: TopicPartition) -> str:
        return f"{self.topic_offsets(group, tp.topic)}/{tp.partition}"

    def share_group(self, group: str) -> str:
        return f"{self.share_groups}/{encode_name(group)}"

    def share_topic(self, group: str, topic: str) -> str:
        return f"{self.share_group(group)}/{encode_name(topic)}"

    def share_state(self, group: str, tp: TopicPartition) -> str:
        return f"{self.share_topic(group, tp.topic)}/{tp.partition}"

    def acl_type(self, pattern: PatternType, resource_type: ResourceType) -> str:
        """The parent of the ACL znodes of one pattern and resource type."""
        return f"{self._acl_roots[pattern]}/{ACL_TYPE_DIRS[resource_type]}"

    def acl_resource(self, pattern: PatternType, resource_type: ResourceType, name: str) -> str:
        return f"{self.acl_type(pattern, resource_type)}/{encode_name(name)}"

    def kafka_acl_resource(self, pattern: PatternType, resource_type: ResourceType, name: str) -> str | None:
        """Where Kafka would keep the bindings of ``name``, if not at ``acl_resource``."""
        verbatim = verbatim_name(name)
        return None if verbatim is None else f"{self.acl_type(pattern, resource_type)}/{verbatim}"

    def acl_changes(self, pattern: PatternType) -> str:
        """Where a change to the ACLs of a ``pattern`` resource is announced."""
        return self._acl_changes[pattern]

    def acl_change_prefix(self, pattern: PatternType) -> str:
        return f"{self._acl_changes[pattern]}/{ACL_CHANGE_PREFIX}"


def candidate_sequence(name: str) -> int:
    """The sequence number ZooKeeper appended to a candidate's name (-1 if it has none)."""
    digits = name[-SEQUENCE_DIGITS:]
    return int(digits) if len(name) > SEQUENCE_DIGITS and digits.isdigit() else -1


def acl_change_sequence(name: str) -> int:
    """The sequence number of an ACL change znode (-1 if ``name`` is not one)."""
    return candidate_sequence(name) if name.startswith(ACL_CHANGE_PREFIX) else -1
