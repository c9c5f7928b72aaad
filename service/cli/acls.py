"""``brokergate acls add|list|remove``: ACL bindings, in the manner of Kafka's ``kafka-acls``.

``add`` makes one binding per combination of principal (each ``--allow-principal`` with each
``--allow-host``, each ``--deny-principal`` with each ``--deny-host``; host ``*`` when none is
given), operation (each ``--operation``; ``ALL`` when none) and resource (each ``--topic``,
each ``--group``, ``--cluster``), and stores each with a request of its own, as kafka-acls
does. Its ``--resource-pattern-type`` is ``literal`` (the default) or ``prefixed``.

``list`` and ``remove`` take the same flags as filters, where what is left out matches
anything: ``--principal`` selects a principal's bindings whatever their permission,
``--allow-principal``/``--deny-principal`` its ALLOW/DENY ones (``--allow-host``/``--deny-host``
narrow those to hosts), ``--operation`` an operation. With a resource, the pattern type is
``literal`` unless ``--resource-pattern-type`` says ``prefixed``, ``any`` (the name exactly,
whatever the pattern type) or ``match`` (every binding that applies to the named resource:
LITERAL, ``*`` and PREFIXED ones). ``list`` without a resource lists every binding; ``remove``
needs one, shows what it would delete and asks first unless ``--force``, and refuses to ask
when stdin is not a terminal.

Built on ``GatewayClient.acls``, ``create_acl`` and ``delete_acls`` (Confluent v3's ``/acls``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Final

from service.cli.common import ToolError, emit
from service.client.gateway_client import ClientError, GatewayClient
from service.core.acl import CLUSTER_NAME, WILDCARD, AclBinding, AclFilter, Operation, PatternType, Permission
from service.core.acl import ResourceType as Resource
from service.core.rules import check_group, check_topic
from service.tables import format_table

HEADER: Final = (
    "RESOURCE-TYPE",
    "RESOURCE-NAME",
    "PATTERN-TYPE",
    "PRINCIPAL",
    "PERMISSION",
    "OPERATION",
    "HOST",
)
PATTERN_TYPES: Final = ("literal", "prefixed", "any", "match")

# What kafka-acls lets a binding of each resource type name, besides ALL.
SUPPORTED: Final[dict[Resource, frozenset[Operation]]] = {
    Resource.TOPIC: frozenset(
        Operation(op)
        for op in (
            "READ",
            "WRITE",
            "CREATE",
            "DESCRIBE",
            "DELETE",
            "ALTER",
            "DESCRIBE_CONFIGS",
            "ALTER_CONFIGS",
        )
    ),
    Resource.GROUP: frozenset(Operation(op) for op in ("READ", "DESCRIBE", "DELETE")),
    Resource.CLUSTER: frozenset(
        Operation(op)
        for op in (
            "CREATE",
            "CLUSTER_ACTION",
            "DESCRIBE_CONFIGS",
            "ALTER_CONFIGS",
            "IDEMPOTENT_WRITE",
            "ALTER",
            "DESCRIBE",
        )
    ),
}
_BY_SPELLING: Final = {op.value.replace("_", ""): op for op in Operation}

Entry = tuple[str | None, Permission | None, str | None]  # principal, permission, host


def operation(text: str) -> Operation:
    """An operation as kafka-acls spells it (``Read``, ``DescribeConfigs``) or as v3 does
    (``DESCRIBE_CONFIGS``)."""
    found = _BY_SPELLING.get(text.strip().upper().replace("_", "").replace("-", ""))
    if found is None:
        known = ", ".join(op.value for op in Operation)
        raise argparse.ArgumentTypeError(f"unknown operation {text!r}; one of {known}")
    return found


def principal(text: str) -> str:
    """A principal as Kafka writes it: ``User:NAME``, or ``User:*`` for every user."""
    kind, sep, name = text.partition(":")
    if kind != "User" or not sep or not name:
        raise argparse.ArgumentTypeError(f"a principal is User:NAME (or User:*), not {text!r}")
    return text


def resources(args: argparse.Namespace) -> list[tuple[Resource, str]]:
    """The resources named, each once, in the order given: topics, groups, then the cluster."""
    named = [(Resource.TOPIC, t) for t in args.topic] + [(Resource.GROUP, g) for g in args.group]
    if args.cluster:
        named.append((Resource.CLUSTER, CLUSTER_NAME))
    return list(dict.fromkeys(named))


def _entries(args: argparse.Namespace, *, any_host: str | None) -> list[tuple[str, Permission, str | None]]:
    """Each ALLOW and DENY principal with each of its hosts (``any_host`` when none is given)."""
    entries: list[tuple[str, Permission, str | None]] = []
    for flag, permission, principals, hosts in (
        ("allow", Permission.ALLOW, args.allow_principal, args.allow_host),
        ("deny", Permission.DENY, args.deny_principal, args.deny_host),
    ):
        if hosts and not principals:
            raise ToolError(f"--{flag}-host goes with --{flag}-principal", 2)
        entries += [(p, permission, h) for p in principals for h in hosts or [any_host]]
    return entries


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    """Every binding ``acls add`` stores, each once, in the order the flags give them."""
    if args.principal:
        raise ToolError(
            "--principal filters list and remove; add takes --allow-principal or --deny-principal", 2
        )
    targets = resources(args)
    if not targets:
        raise ToolError("acls add needs --topic, --group or --cluster", 2)
    pattern = args.resource_pattern_type or "literal"
    if pattern not in ("literal", "prefixed"):
        raise ToolError(f"acls add takes --resource-pattern-type literal or prefixed, not {pattern}", 2)
    pattern_type = PatternType(pattern.upper())
    entries = _entries(args, any_host=WILDCARD)
    if not entries:
        raise ToolError("acls add needs --allow-principal or --deny-principal", 2)
    operations = args.operation or [Operation.ALL]
    for resource, name in targets:
        _check_resource(resource, name, pattern_type, operations)
    return list(
        dict.fromkeys(
            AclBinding(
                principal=who,
                resource_type=resource,
                resource_name=name,
                pattern_type=pattern_type,
                operation=op,
                permission=permission,
                host=host or WILDCARD,
            )
            for resource, name in targets
            for who, permission, host in entries
            for op in operations
        )
    )


def _check_resource(
    resource: Resource, name: str, pattern: PatternType, operations: Sequence[Operation]
) -> None:
    unsupported = [op.value for op in operations if op is not Operation.ALL and op not in SUPPORTED[resource]]
    if unsupported:
        takes = ", ".join(sorted(op.value for op in SUPPORTED[resource]))
        raise ToolError(f"a {resource.value} binding takes {takes} or ALL, not {', '.join(unsupported)}", 2)
    if resource is Resource.CLUSTER and pattern is not PatternType.LITERAL:
        raise ToolError(f"--cluster is the LITERAL resource {CLUSTER_NAME!r}: no other pattern type", 2)
    if pattern is PatternType.LITERAL and name != WILDCARD:
        # The gateway's own name rules (InvalidTopic, InvalidConsumerConfig), before anything is sent.
        if resource is Resource.TOPIC:
            check_topic(name)
        elif resource is Resource.GROUP:
            check_group(name)


def filters(args: argparse.Namespace, *, remove: bool) -> list[AclFilter]:
    """The filters ``list`` or ``remove`` sends, one per combination of the flags given."""
    targets = resources(args)
    if remove and not targets:
        raise ToolError("acls remove needs --topic, --group or --cluster", 2)
    pattern = args.resource_pattern_type or ("literal" if targets else "any")
    pattern_type = PatternType(pattern.upper()) if pattern in ("literal", "prefixed") else None
    entries: list[Entry] = [(p, None, None) for p in args.principal]
    entries.extend(_entries(args, any_host=None))
    where: list[tuple[Resource | None, str | None]] = [*targets] or [(None, None)]
    return list(
        dict.fromkeys(
            AclFilter(
                principal=who,
                resource_type=resource,
                resource_name=name,
                pattern_type=pattern_type,
                match=pattern == "match",
                operation=op,
                permission=permission,
                host=host,
            )
            for resource, name in where
            for who, permission, host in entries or [(None, None, None)]
            for op in args.operation or [None]
        )
    )


def _union(listings: Iterable[list[AclBinding]]) -> list[AclBinding]:
    """The bindings of every listing, each once, in the order of the columns printed."""
    return sorted(
        {b for listing in listings for b in listing},
        key=lambda b: (
            b.resource_type,
            b.resource_name,
            b.pattern_type,
            b.principal,
            b.permission,
            b.operation,
            b.host,
        ),
    )


def _rows(bindings: Iterable[AclBinding]) -> list[list[Any]]:
    return [
        [b.resource_type, b.resource_name, b.pattern_type, b.principal, b.permission, b.operation, b.host]
        for b in bindings
    ]


def _emit(args: argparse.Namespace, bindings: list[AclBinding]) -> None:
    emit(args, [b.as_dict() for b in bindings], _rows(bindings), HEADER)


def cmd_acls(args: argparse.Namespace, client: GatewayClient) -> int:
    if args.action == "add":
        _add(args, client)
        return 0
    selected = filters(args, remove=args.action == "remove")
    if args.action == "list":
        _emit(args, _union(client.acls(f) for f in selected))
        return 0
    if not args.force:
        if not sys.stdin.isatty():
            raise ToolError("acls remove asks before deleting, and stdin is not a terminal: add --force", 2)
        matching = _union(client.acls(f) for f in selected)
        if matching and not _confirm(matching):
            raise ToolError("nothing removed", 1)
    removed = _union(client.delete_acls(f) for f in selected)
    if not removed:
        print("brokergate: no ACL binding matched: nothing removed", file=sys.stderr)
    _emit(args, removed)
    return 0


def _add(args: argparse.Namespace, client: GatewayClient) -> None:
    wanted = bindings_to_add(args)
    added = 0
    try:
        for binding in wanted:
            client.create_acl(binding)
            added += 1
    except ClientError:
        if added:
            print(
                f"brokergate: {added} of {len(wanted)} bindings were added before the error", file=sys.stderr
            )
        raise
    _emit(args, wanted)


def _confirm(matching: list[AclBinding]) -> bool:
    """Shows the bindings on stderr and asks; only ``y`` or ``yes`` deletes them."""
    sys.stderr.write(format_table(_rows(matching), HEADER))
    sys.stderr.write(f"Remove these {len(matching)} ACL binding(s)? (y/n) ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    acls = sub.add_parser(
        "acls",
        parents=[common],
        help="add, list and remove ACL bindings, as kafka-acls does",
        description="ACL bindings of the gateway (Kafka's model: principal, host, operation, "
        "ALLOW/DENY on a topic, group or the cluster). add makes one binding per principal, host, "
        "operation and resource given; list and remove select with the same flags.",
    )
    acls.add_argument("action", choices=["add", "list", "remove"])
    for flag, permission in (("allow", "ALLOW"), ("deny", "DENY")):
        acls.add_argument(
            f"--{flag}-principal",
            action="append",
            default=[],
            type=principal,
            metavar="User:NAME",
            help=f"{permission} for this principal (repeatable; User:* is every user); list/remove: "
            f"its {permission} bindings",
        )
    for flag in ("allow", "deny"):
        acls.add_argument(
            f"--{flag}-host",
            action="append",
            default=[],
            metavar="HOST",
            help=f"host of the --{flag}-principal bindings (repeatable; add: default *, list/remove: any)",
        )
    acls.add_argument(
        "--operation",
        action="append",
        default=[],
        type=operation,
        metavar="OPERATION",
        help="READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, "
        "ALTER_CONFIGS, IDEMPOTENT_WRITE or ALL, as kafka-acls spells them too (Read, DescribeConfigs); "
        "repeatable; add: default ALL, list/remove: any",
    )
    acls.add_argument(
        "--topic", action="append", default=[], metavar="NAME", help="a topic (repeatable; * is every topic)"
    )
    acls.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="NAME",
        help="a consumer group (repeatable; * is every group)",
    )
    acls.add_argument("--cluster", action="store_true", help=f"the cluster ({CLUSTER_NAME})")
    acls.add_argument(
        "--resource-pattern-type",
        type=str.lower,
        choices=PATTERN_TYPES,
        help="add: literal (default) or prefixed; list/remove with a resource: literal (default), prefixed, "
        "any (that name, any pattern type) or match (every binding that applies to the resource)",
    )
    acls.add_argument(
        "--principal",
        action="append",
        default=[],
        type=principal,
        metavar="User:NAME",
        help="list/remove: only this principal's bindings (repeatable)",
    )
    acls.add_argument(
        "--force",
        action="store_true",
        help="remove: delete without asking (else remove shows the bindings and asks at the terminal, "
        "and refuses when stdin is not one)",
    )
    acls.set_defaults(run=cmd_acls)
