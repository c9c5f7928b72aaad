"""``brokergate groups list|describe|lag``: consumer groups, their members and lag, in the manner
of Kafka's ``kafka-consumer-groups``.

Built on ``GatewayClient.groups``, ``group`` and ``lags``: ``describe`` shows every partition
with a commit or an owner, then the idle members; ``lag`` the partitions alone.
"""

from __future__ import annotations

import argparse

from service.cli.common import ToolError, emit
from service.client.gateway_client import GatewayClient
from service.core.rules import check_group


def cmd_groups(args: argparse.Namespace, client: GatewayClient) -> int:
    if args.group is not None:
        check_group(args.group)
    if args.action == "list":
        groups = client.groups()
        rows = [
            [g["consumer_group_id"], g["state"], len(g["consumers"]), g["partition_assignor"]] for g in groups
        ]
        emit(args, groups, rows, ["GROUP", "STATE", "MEMBERS", "ASSIGNOR"])
        return 0
    if not args.group:
        raise ToolError(f"groups {args.action} needs --group", 2)
    if args.action == "describe":
        group = client.group(args.group)
        lags = client.lags(args.group)
        # As kafka-consumer-groups.sh: every partition with a commit or an owner, then idle members.
        rows = [
            [
                args.group,
                r["topic_name"],
                r["partition_id"],
                r["current_offset"],
                r["log_end_offset"],
                r["lag"],
                r["consumer_id"] or "-",
            ]
            for r in lags
        ]
        owners = {r["consumer_id"] for r in lags}
        rows += [
            [args.group, "-", "-", "-", "-", "-", m["consumer_id"]]
            for m in group["consumers"]
            if m["consumer_id"] not in owners
        ]
        emit(
            args,
            {**group, "lags": lags},
            rows,
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"],
        )
    else:
        lags_list = client.lags(args.group)
        rows = [
            [
                r["topic_name"],
                r["partition_id"],
                r["current_offset"],
                r["log_end_offset"],
                r["lag"],
                r["consumer_id"] or "-",
            ]
            for r in lags_list
        ]
        emit(
            args,
            lags_list,
            rows,
            ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"],
        )
    return 0


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    groups = sub.add_parser("groups", parents=[common], help="list groups, describe members and lag")
    groups.add_argument("action", choices=["list", "describe", "lag"])
    groups.add_argument("--group")
    groups.set_defaults(run=cmd_groups)
