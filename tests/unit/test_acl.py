"""Kafka's ACL decisions: deny wins, implied operations, wildcard and prefixed patterns, super users."""

from __future__ import annotations

import pytest

from service.core.acl import (
    AclBinding,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation


def acl(principal, rtype, name, pattern, op, perm=ALLOW, host="*"):
    return AclBinding(principal, rtype, name, pattern, op, perm, host)


BINDINGS = [
    acl("User:alice", T, "orders", LIT, Op.WRITE),
    acl("User:alice", T, "team-a.", PRE, Op.ALL),
    acl("User:alice", T, "team-a.secret", LIT, Op.READ, DENY),
    acl("User:bob", T, "*", LIT, Op.READ),
    acl("User:bob", T, "orders", LIT, Op.ALL, DENY, host="10.0.0.9"),
    acl("User:*", G, "shared", LIT, Op.READ),
    acl("User:carol", C, "kafka-cluster", LIT, Op.CREATE),
    acl("User:dave", T, "configs", LIT, Op.ALTER_CONFIGS),
]


@pytest.mark.parametrize(
    ("principal", "host", "rtype", "name", "op", "expected"),
    [
        ("User:alice", "1.2.3.4", T, "orders", Op.WRITE, True),
        ("User:alice", "1.2.3.4", T, "orders", Op.DESCRIBE, True),  # WRITE implies DESCRIBE
        ("User:alice", "1.2.3.4", T, "orders", Op.READ, False),  # not granted
        ("User:alice", "1.2.3.4", T, "orders", Op.DELETE, False),
        ("User:alice", "1.2.3.4", T, "team-a.events", Op.DELETE, True),  # PREFIXED ALL
        ("User:alice", "1.2.3.4", T, "team-a.secret", Op.READ, False),  # deny wins over ALL
        ("User:alice", "1.2.3.4", T, "team-a.secret", Op.WRITE, True),  # the deny is READ only
        ("User:alice", "1.2.3.4", T, "team-b.events", Op.READ, False),
        ("User:bob", "1.2.3.4", T, "anything", Op.READ, True),  # LITERAL "*"
        ("User:bob", "1.2.3.4", T, "anything", Op.WRITE, False),
        ("User:bob", "10.0.0.9", T, "orders", Op.READ, False),  # denied from that host only
        ("User:bob", "10.0.0.8", T, "orders", Op.READ, True),
        ("User:eve", "1.2.3.4", G, "shared", Op.READ, True),  # User:*
        ("User:eve", "1.2.3.4", G, "shared", Op.DELETE, False),
        ("User:eve", "1.2.3.4", T, "orders", Op.DESCRIBE, False),  # nothing granted: no
        ("User:carol", "1.2.3.4", C, "kafka-cluster", Op.CREATE, True),
        ("User:carol", "1.2.3.4", T, "kafka-cluster", Op.CREATE, False),  # another resource type
        ("User:dave", "1.2.3.4", T, "configs", Op.DESCRIBE_CONFIGS, True),  # ALTER_CONFIGS implies it
        ("User:dave", "1.2.3.4", T, "configs", Op.DESCRIBE, False),
        ("User:admin", "1.2.3.4", T, "team-a.secret", Op.READ, True),  # super user
    ],
)
def test_decisions(principal, host, rtype, name, op, expected):
    authorizer = Authorizer(BINDINGS, super_users=["User:admin"])
    assert authorizer.allowed(principal, host, rtype, name, op) is expected


def test_replacing_the_bindings_changes_the_decisions():
    authorizer = Authorizer(BINDINGS)
    assert authorizer.allowed("User:alice", "h", T, "orders", Op.WRITE)
    authorizer.replace([])
    assert not authorizer.allowed("User:alice", "h", T, "orders", Op.WRITE)


@pytest.mark.parametrize(
    ("flt", "selected"),
    [
        (AclFilter(), 8),
        (AclFilter(principal="User:alice"), 3),
        (AclFilter(resource_type=T, resource_name="orders"), 2),  # exact names
        (AclFilter(resource_type=T, resource_name="orders", match=True), 3),  # and bob's "*"
        (AclFilter(resource_type=T, resource_name="team-a.secret", match=True), 3),  # prefixed, literal, "*"
        (AclFilter(pattern_type=PRE), 1),
        (AclFilter(permission=DENY), 2),
        (AclFilter(operation=Op.ALL, permission=ALLOW), 1),
        (AclFilter(host="10.0.0.9"), 1),
    ],
)
def test_filters(flt, selected):
    assert sum(flt.selects(b) for b in BINDINGS) == selected
