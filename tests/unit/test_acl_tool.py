"""``brokergate acls``'s argument handling: the bindings add makes, the filters list and remove send."""

from __future__ import annotations

import argparse

import pytest

from service.cli.acls import bindings_to_add, filters
from service.cli.common import ToolError
from service.cli.tools import add_commands
from service.client import acl_params
from service.core.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from service.errors import InvalidConsumerConfig, InvalidTopic


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="brokergate")
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["acls", *argv])


def binding(principal: str, name: str, op: str, **kw: str) -> AclBinding:
    return AclBinding(
        principal=principal,
        resource_type=ResourceType(kw.get("resource_type", "TOPIC")),
        resource_name=name,
        pattern_type=PatternType(kw.get("pattern_type", "LITERAL")),
        operation=Operation(op),
        permission=Permission(kw.get("permission", "ALLOW")),
        host=kw.get("host", "*"),
    )


def test_one_binding_per_principal_host_operation_and_resource():
    args = parse(
        "add",
        "--allow-principal",
        "User:a",
        "--allow-host",
        "10.0.0.1",
        "--allow-host",
        "10.0.0.2",
        "--deny-principal",
        "User:b",
        "--operation",
        "Read",
        "--operation",
        "describe",
        "--topic",
        "t",
        "--group",
        "g",
    )
    made = bindings_to_add(args)
    assert len(made) == len(set(made)) == (2 + 1) * 2 * 2
    assert made[0] == binding("User:a", "t", "READ", host="10.0.0.1")
    assert binding("User:b", "g", "DESCRIBE", resource_type="GROUP", permission="DENY") in made  # host *
    assert binding("User:a", "g", "DESCRIBE", resource_type="GROUP", host="10.0.0.2") in made
    assert not any(b.principal == "User:b" and b.permission is Permission.ALLOW for b in made)
    assert {(b.resource_type, b.resource_name) for b in made} == {
        (ResourceType.TOPIC, "t"),
        (ResourceType.GROUP, "g"),
    }
    cluster = parse("add", "--deny-principal", "User:b", "--cluster", "--operation", "AlterConfigs")
    assert bindings_to_add(cluster) == [
        binding("User:b", "kafka-cluster", "ALTER_CONFIGS", resource_type="CLUSTER", permission="DENY")
    ]


def test_add_defaults_to_every_operation_on_a_literal_name_and_lists_each_binding_once():
    args = parse(
        "add", "--allow-principal", "User:a", "--allow-principal", "User:a", "--group", "g", "--group", "g"
    )
    assert bindings_to_add(args) == [binding("User:a", "g", "ALL", resource_type="GROUP")]
    prefixed = parse(
        "add", "--allow-principal", "User:*", "--topic", "team.", "--resource-pattern-type", "PREFIXED"
    )
    assert bindings_to_add(prefixed) == [binding("User:*", "team.", "ALL", pattern_type="PREFIXED")]


@pytest.mark.parametrize(
    "spelling", ["IDEMPOTENT_WRITE", "IdempotentWrite", "idempotent-write", " idempotentwrite "]
)
def test_operations_are_taken_as_kafka_acls_and_v3_spell_them(spelling):
    args = parse("add", "--allow-principal", "User:a", "--cluster", "--operation", spelling)
    assert [b.operation for b in bindings_to_add(args)] == [Operation.IDEMPOTENT_WRITE]


@pytest.mark.parametrize(
    "argv",
    [
        ["add", "--operation", "FLY"],
        ["add", "--allow-principal", "alice"],
        ["list", "--principal", "Group:ops"],
        ["list", "--principal", "User:"],
        ["add", "--resource-pattern-type", "regex"],
        ["rename"],
    ],
)
def test_what_argparse_refuses(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        parse(*argv)
    assert exited.value.code == 2
    assert "brokergate acls: error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["add", "--allow-principal", "User:a"], "needs --topic, --group or --cluster"),
        (["add", "--topic", "t"], "needs --allow-principal or --deny-principal"),
        (
            ["add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
            "literal or prefixed",
        ),
        (
            ["add", "--allow-principal", "User:a", "--topic", "t", "--principal", "User:a"],
            "--principal filters",
        ),
        (
            ["add", "--allow-host", "h", "--deny-principal", "User:a", "--topic", "t"],
            "--allow-host goes with",
        ),
        (["add", "--allow-principal", "User:a", "--group", "g", "--operation", "WRITE"], "not WRITE"),
        (["add", "--allow-principal", "User:a", "--cluster", "--operation", "READ"], "not READ"),
        (
            ["add", "--allow-principal", "User:a", "--cluster", "--resource-pattern-type", "prefixed"],
            "LITERAL",
        ),
    ],
)
def test_what_add_refuses_before_sending_anything(argv, needle):
    with pytest.raises(ToolError) as refused:
        bindings_to_add(parse(*argv))
    assert refused.value.status == 2 and needle in str(refused.value)


def test_literal_names_follow_the_gateways_rules_and_star_is_every_name():
    with pytest.raises(InvalidTopic):
        bindings_to_add(parse("add", "--allow-principal", "User:a", "--topic", "a/b"))
    with pytest.raises(InvalidConsumerConfig):
        bindings_to_add(parse("add", "--allow-principal", "User:a", "--group", "g" * 256))
    assert (
        bindings_to_add(parse("add", "--allow-principal", "User:a", "--topic", "*"))[0].resource_name == "*"
    )
    prefixed = parse(
        "add", "--allow-principal", "User:a", "--topic", "a/", "--resource-pattern-type", "prefixed"
    )
    assert bindings_to_add(prefixed)[0].resource_name == "a/"  # a prefix is not a topic name


def test_list_without_flags_lists_everything():
    (everything,) = filters(parse("list"), remove=False)
    assert everything == AclFilter()
    assert acl_params(everything) == {
        "resource_type": "ANY",
        "pattern_type": "ANY",
        "operation": "ANY",
        "permission": "ANY",
    }


def test_a_resource_is_literal_unless_another_pattern_type_is_asked():
    (literal,) = filters(parse("list", "--topic", "t"), remove=False)
    assert (literal.pattern_type, literal.match) == (PatternType.LITERAL, False)
    (match,) = filters(parse("remove", "--topic", "t.x", "--resource-pattern-type", "match"), remove=True)
    assert acl_params(match) == {
        "resource_type": "TOPIC",
        "resource_name": "t.x",
        "pattern_type": "MATCH",
        "operation": "ANY",
        "permission": "ANY",
    }
    (any_type,) = filters(parse("list", "--group", "g", "--resource-pattern-type", "any"), remove=False)
    assert (any_type.pattern_type, any_type.match, any_type.resource_name) == (None, False, "g")
    (prefixed_only,) = filters(parse("list", "--resource-pattern-type", "prefixed"), remove=False)
    assert (prefixed_only.resource_type, prefixed_only.pattern_type) == (None, PatternType.PREFIXED)


def test_filters_combine_principals_hosts_operations_and_resources():
    args = parse(
        "remove",
        "--principal",
        "User:a",
        "--deny-principal",
        "User:b",
        "--deny-host",
        "10.0.0.1",
        "--operation",
        "READ",
        "--operation",
        "WRITE",
        "--topic",
        "t",
        "--group",
        "g",
    )
    made = filters(args, remove=True)
    assert len(made) == 2 * 2 * 2
    assert (
        AclFilter(
            principal="User:a",
            resource_type=ResourceType.GROUP,
            resource_name="g",
            pattern_type=PatternType.LITERAL,
            operation=Operation.WRITE,
        )
        in made
    )  # --principal: any permission, any host
    deny = [f for f in made if f.principal == "User:b"]
    assert {(f.permission, f.host) for f in deny} == {(Permission.DENY, "10.0.0.1")}
    # --allow-principal without --allow-host: any host, where add would use *
    (allow,) = filters(parse("list", "--allow-principal", "User:c"), remove=False)
    assert (allow.permission, allow.host) == (Permission.ALLOW, None)


def test_remove_needs_a_resource():
    with pytest.raises(ToolError) as refused:
        filters(parse("remove", "--principal", "User:a", "--force"), remove=True)
    assert refused.value.status == 2 and "needs --topic, --group or --cluster" in str(refused.value)
