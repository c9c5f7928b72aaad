"""Every znode path the ZooKeeper coordinator uses, and how names become znode names.

The layout, under the chroot of the ``zookeeper://`` URL when there is one::

    /brokergate/nodes/{node-id}                      ephemeral: one per live gateway replica
    /brokergate/election/{token}__{seq}              ephemeral sequential: leadership candidates
    /brokergate/groups/{group}/members/{instance}    JSON of a Member
    /brokergate/groups/{group}/state                 JSON of the GroupState; its stat.version is the CAS token
    /consumers/{group}/offsets/{topic}/{partition}   committed offset as ASCII digits
    /kafka-acl…, /kafka-acl-extended/prefixed…       ACL bindings, Kafka's layout (see ``acls``)

The last one is Kafka's classic layout, so ZooKeeper-era tools read brokergate's
commits. Names become znode names verbatim whenever ZooKeeper accepts them, so
ordinary group and topic names read the same in ZooKeeper; anything else is
percent-encoded (see ``encode_name``).

The chroot is applied here rather than by kazoo because kazoo cannot create a
missing chroot, and a fresh ZooKeeper should work without preparation.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import unquote

from service.core.models import TopicPartition

BROKERGATE: Final = "/brokergate"
NODES: Final = f"{BROKERGATE}/nodes"
ELECTION: Final = f"{BROKERGATE}/election"
GROUPS: Final = f"{BROKERGATE}/groups"
CONSUMERS: Final = "/consumers"

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
    """A non-empty ``name`` as one znode name, reversible with ``decode_name``."""
    if name in _RESERVED_NAMES:
        return _RESERVED_NAMES[name]
    if all(_znode_safe(ch) for ch in name):
        return name
    return "".join(
        ch if _znode_safe(ch) else "".join(f"%{b:02X}" for b in ch.encode("utf-8", _TEXT_ERRORS))
        for ch in name
    )


def decode_name(znode: str) -> str:
    return unquote(znode, encoding="utf-8", errors=_TEXT_ERRORS) if "%" in znode else znode


class ZnodePaths:
    """The layout above, rooted at a chroot ("" for none)."""

    def __init__(self, chroot: str = "") -> None:
        self.chroot = chroot.rstrip("/")
        self.nodes = self.chroot + NODES
        self.election = self.chroot + ELECTION
        self.groups = self.chroot + GROUPS
        self.consumers = self.chroot + CONSUMERS

    def bases(self) -> tuple[str, ...]:
        """The persistent parents created on start."""
        return self.nodes, self.election, self.groups, self.consumers

    def node(self, node_id: str) -> str:
        return f"{self.nodes}/{encode_name(node_id)}"

    def candidate_prefix(self, token: str) -> str:
        return f"{self.election}/{token}{CANDIDATE_SEPARATOR}"

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


def candidate_sequence(name: str) -> int:
    """The sequence number ZooKeeper appended to a candidate's name (-1 if it has none)."""
    digits = name[-SEQUENCE_DIGITS:]
    return int(digits) if len(name) > SEQUENCE_DIGITS and digits.isdigit() else -1
