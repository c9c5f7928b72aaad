"""``brokergate topics create|list|describe|alter|delete``: topic administration, in the manner of
Kafka's ``kafka-topics``; and ``brokergate asyncapi``: the topics as the gateway's AsyncAPI
document (``GET /asyncapi.json``), to a file or stdout, for AsyncAPI's tools.

Built on ``GatewayClient``'s topic methods; ``describe`` shows the topic, its configs and a row
per partition. ``--config`` takes NAME=VALUE (read by ``service.cli.records``); what ``run``
(``service.cli.tools``) checks before anything is sent: ``create``, ``describe``, ``alter`` and
``delete`` need ``--topic``, ``alter`` needs ``--partitions``.
"""

from __future__ import annotations

import argparse
import json
import sys

from service.cli.common import ToolError, emit
from service.cli.records import _pairs
from service.client.gateway_client import GatewayClient
from service.core.rules import check_topic
from service.tables import format_table


def cmd_topics(args: argparse.Namespace, client: GatewayClient) -> int:
    if args.action != "list":
        check_topic(args.topic)
    if args.action == "list":
        names = client.topics()
        emit(args, names, [[n] for n in names], ["TOPIC"])
    elif args.action == "create":
        configs = dict(_pairs(args.config, "--config"))
        created = client.create_topic(args.topic, args.partitions, args.replication_factor, configs)
        emit(
            args,
            created,
            [[created["topic_name"], created["partitions_count"], created["replication_factor"]]],
            ["TOPIC", "PARTITIONS", "REPLICATION"],
        )
    elif args.action == "describe":
        topic = client.topic(args.topic)
        parts = client.partitions(args.topic)
        if args.output == "json":
            emit(args, {**topic, "partitions": parts}, [], [])
        else:
            print(
                f"Topic: {topic['topic_name']}  PartitionCount: {topic['partitions_count']}  "
                f"ReplicationFactor: {topic['replication_factor']}"
            )
            print("Configs: " + ", ".join(f"{k}={v}" for k, v in sorted(topic["configs"].items())))
            rows = [
                [
                    p["partition_id"],
                    p["leader"]["related"].rsplit("/", 1)[-1],
                    ",".join(map(str, p["replicas"])),
                    p["beginning_offset"],
                    p["end_offset"],
                ]
                for p in parts
            ]
            sys.stdout.write(format_table(rows, ["PARTITION", "LEADER", "REPLICAS", "BEGINNING", "END"]))
    elif args.action == "delete":
        client.delete_topic(args.topic)
        emit(args, {"deleted": args.topic}, [[args.topic, "deleted"]], ["TOPIC", "STATUS"])
    elif args.action == "alter":
        altered = client.set_partitions(args.topic, args.partitions)
        emit(args, altered, [[altered["topic_name"], altered["partitions_count"]]], ["TOPIC", "PARTITIONS"])
    return 0


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    topics = sub.add_parser("topics", parents=[common], help="create, list, describe, alter, delete topics")
    topics.add_argument("action", choices=["create", "list", "describe", "delete", "alter"])
    topics.add_argument("--topic")
    topics.add_argument("--partitions", type=int)
    topics.add_argument("--replication-factor", type=int)
    topics.add_argument("--config", action="append", metavar="NAME=VALUE")
    topics.set_defaults(run=cmd_topics)


def cmd_asyncapi(args: argparse.Namespace, client: GatewayClient) -> int:
    text = json.dumps(client.request("GET", "/asyncapi.json"), indent=2) + "\n"
    if args.file == "-":
        sys.stdout.write(text)
        return 0
    try:
        with open(args.file, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise ToolError(f"cannot write {args.file}: {exc.strerror or exc}", 2) from exc
    return 0


def add_asyncapi_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    doc = sub.add_parser(
        "asyncapi", parents=[common], help="the topics you may describe as an AsyncAPI 3.0 document"
    )
    doc.add_argument("--file", default="-", help="where to write it (default: stdout)")
    doc.set_defaults(run=cmd_asyncapi)
