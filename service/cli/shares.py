"""Share groups on the command line (the gateway's KIP-932 extension), in the manner of Kafka's
``kafka-share-groups`` and ``kafka-console-share-consumer``.

``brokergate share-groups list|describe|reset|delete`` administers the groups: ``describe`` shows
the group's consumers and, per partition, its start and end offsets, the records in flight by
state (available, acquired, archiving) and the lag; ``reset`` starts a group without consumers
over, at the earliest or latest offsets of its topics (``--topic``: of these only) or at given
offsets; ``delete`` forgets a group without consumers.

``brokergate consume --share-group GROUP TOPIC...`` reads as one consumer of the group
(``consume``): it prints each record it acquires, as ``consume`` prints them, and accepts the
records it printed with its next poll (one round trip settles and polls), or on its way out. It
acquires no more records than ``--max-messages`` leaves to print, and deletes its consumer on its
way out, Ctrl-C included, so whatever it holds and did not print goes back to the group at once.

Built on ``GatewayClient``'s share-group methods and ``ShareConsumer``; the records are printed
by the caller's ``show`` (``service.cli.records`` prints them for every kind of consumer).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

from service.cli.common import ToolError, emit
from service.client.gateway_client import GatewayClient, ShareConsumer, ShareRecord, acknowledgements
from service.core.rules import check_group, check_topic
from service.tables import format_table

ACTIONS: Final = ("list", "describe", "reset", "delete")
LIST_HEADER: Final = ("GROUP", "STATE", "CONSUMERS", "LAG")
PARTITION_HEADER: Final = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "START-OFFSET",
    "END-OFFSET",
    "AVAILABLE",
    "ACQUIRED",
    "ARCHIVING",
    "LAG",
)
CONSUMER_HEADER: Final = ("GROUP", "CONSUMER-ID", "SUBSCRIPTION")
RESET_HEADER: Final = ("GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET", "LAG")

Offsets = list[tuple[str, int, int]]


# --- share-groups ----------------------------------------------------------------------------


def check_args(args: argparse.Namespace) -> None:
    """``share-groups``' usage, checked before any password is asked or request sent."""
    if args.action == "list":
        if args.group is not None:
            raise ToolError("share-groups list takes no GROUP", 2)
    elif args.group is None:
        raise ToolError(f"share-groups {args.action} needs a GROUP", 2)
    else:
        check_group(args.group)
    ways = [
        flag
        for flag, given in (
            ("--to-earliest", args.to_earliest),
            ("--to-latest", args.to_latest),
            ("--to-offset", args.to_offset),
        )
        if given
    ]
    if args.action != "reset":
        if ways or args.topic:
            raise ToolError(f"{(ways or ['--topic'])[0]} goes with share-groups reset, not {args.action}", 2)
        return
    if not ways:
        raise ToolError("share-groups reset needs --to-earliest, --to-latest or --to-offset", 2)
    if len(ways) > 1:
        raise ToolError(f"share-groups reset takes one way to start over, not {' and '.join(ways)}", 2)
    if args.to_offset and args.topic:
        raise ToolError("--topic goes with --to-earliest or --to-latest: --to-offset names its partitions", 2)
    for topic in args.topic:
        check_topic(topic)
    reset_offsets(args.to_offset)


def to_offset(text: str) -> tuple[str, int, int]:
    """``TOPIC:PARTITION:OFFSET`` as (topic, partition, offset); a topic name holds no ``:``."""
    topic, _, rest = text.partition(":")
    partition, sep, offset = rest.partition(":")
    if not (topic and sep and partition.isdigit() and offset.isdigit()):
        raise ToolError(f"--to-offset takes TOPIC:PARTITION:OFFSET (numbers from 0), not {text!r}", 2)
    return check_topic(topic), int(partition), int(offset)


def reset_offsets(texts: Iterable[str]) -> Offsets:
    """The offsets of ``--to-offset``s, each partition named once."""
    offsets: dict[tuple[str, int], int] = {}
    for text in texts:
        topic, partition, offset = to_offset(text)
        if offsets.setdefault((topic, partition), offset) != offset:
            raise ToolError(f"--to-offset names {topic}:{partition} twice, with different offsets", 2)
    return [(t, p, o) for (t, p), o in offsets.items()]


def cmd_share_groups(args: argparse.Namespace, client: GatewayClient) -> int:
    if args.action == "list":
        groups = client.share_groups()
        rows = [[g["share_group_id"], g["state"], len(g["consumers"]), g["lag"]] for g in groups]
        emit(args, groups, rows, LIST_HEADER)
    elif args.action == "describe":
        _describe(args, client.share_group(args.group))
    elif args.action == "reset":
        _reset(args, client)
    else:
        client.delete_share_group(args.group)
        emit(args, {"deleted": args.group}, [[args.group, "deleted"]], ["GROUP", "STATUS"])
    return 0


def _describe(args: argparse.Namespace, group: dict[str, Any]) -> None:
    """Print a share group: its partitions, then (after a blank line) its consumers, as kafka-share-groups
    --describe prints them."""
    if args.output == "json":
        emit(args, group, [], [])
        return
    name = group["share_group_id"]
    parts = [
        [
            name,
            p["topic_name"],
            p["partition_id"],
            p["start_offset"],
            p["end_offset"],
            p["available"],
            p["acquired"],
            p["archiving"],
            p["lag"],
        ]
        for p in group["partitions"]
    ]
    consumers = [[name, c["consumer_id"], ",".join(c["subscription"]) or "-"] for c in group["consumers"]]
    sys.stdout.write(format_table(parts, PARTITION_HEADER) + "\n" + format_table(consumers, CONSUMER_HEADER))


def _reset(args: argparse.Namespace, client: GatewayClient) -> None:
    """Reset, then show where the group starts now on the partitions the reset named."""
    if args.to_offset:
        offsets = reset_offsets(args.to_offset)
        group = client.reset_share_group(args.group, offsets=offsets)
        named = {(t, p) for t, p, _ in offsets}

        def chosen(p: dict[str, Any]) -> bool:
            return (p["topic_name"], p["partition_id"]) in named

    else:
        topics = set(args.topic)
        group = client.reset_share_group(
            args.group, to="earliest" if args.to_earliest else "latest", topics=args.topic or None
        )

        def chosen(p: dict[str, Any]) -> bool:
            return not topics or p["topic_name"] in topics

    rows = [
        [args.group, p["topic_name"], p["partition_id"], p["start_offset"], p["lag"]]
        for p in group["partitions"]
        if chosen(p)
    ]
    emit(args, group, rows, RESET_HEADER)


# --- consume --share-group -------------------------------------------------------------------


class StopFlag(Protocol):
    """The exit status a stop signal asked for, None until one came (``tools``' consume loop's)."""

    @property
    def status(self) -> int | None: ...


def share_topics(args: argparse.Namespace) -> list[str]:
    """The topics ``consume --share-group`` reads: its TOPIC arguments and ``--topic``, each once."""
    return list(dict.fromkeys([*args.topics, *([args.topic] if args.topic else [])]))


def check_consume(args: argparse.Namespace) -> None:
    """The options of ``consume --share-group``: those of a consumer group's member are refused."""
    refused = {
        "--group": "a group is a consumer group or a share group, not both",
        "--partition": "a share group's consumers share every partition of their topics",
        "--offset": "where a share group reads is set with share-groups reset",
    }
    for flag, value in (("--group", args.group), ("--partition", args.partition), ("--offset", args.offset)):
        if value is not None:
            raise ToolError(f"{flag} does not go with --share-group: {refused[flag]}", 2)
    topics = share_topics(args)
    if not topics:
        raise ToolError("consume --share-group GROUP needs topics to read: TOPIC... or --topic", 2)
    check_group(args.share_group)
    for topic in topics:
        check_topic(topic)


def consume(
    args: argparse.Namespace, client: GatewayClient, stop: StopFlag, show: Callable[[ShareRecord], None]
) -> int:
    """Read ``args``' topics as a consumer of ``args.share_group`` until ``stop`` is set, or
    ``--max-messages`` are shown, or ``--timeout-ms`` passed without a record; how many it showed.

    ``--from-beginning`` makes the group start a partition it never read at its beginning.
    Whatever ends it, the records shown are accepted (a failure to accept them on the way out is
    reported, unless something else went wrong first), and the consumer is deleted.
    """
    config = {"format": args.format}
    if args.from_beginning:
        config["share_auto_offset_reset"] = "earliest"
    reader = _Reader(client.share_consumer(args.share_group, **config), show)
    with reader.consumer.deleted_on_exit():
        reader.consumer.subscribe(*share_topics(args))
        try:
            reader.run(stop, args.max_messages, args.timeout_ms)
        except BaseException:
            reader.settle(quiet=True)
            raise
        reader.settle()
    return reader.shown


class _Reader:
    """One share consumer's loop: what it showed, and what it showed and has not yet accepted."""

    def __init__(self, consumer: ShareConsumer, show: Callable[[ShareRecord], None]) -> None:
        self.consumer = consumer
        self.show = show
        self.shown = 0
        self.unsettled: list[ShareRecord] = []

    def run(self, stop: StopFlag, most: int | None, timeout_ms: int | None) -> None:
        idle_since = time.monotonic()
        while stop.status is None and (most is None or self.shown < most):
            acks, self.unsettled = acknowledgements(self.unsettled), []
            records, refused = self.consumer.acknowledge_and_poll(
                acks,
                timeout_ms=min(timeout_ms or 1000, 1000),
                max_records=None if most is None else most - self.shown,
            )
            _warn_refused(refused)
            if stop.status is not None:
                return  # not shown: they go back when the consumer is deleted
            if not records:
                if timeout_ms is not None and (time.monotonic() - idle_since) * 1000 >= timeout_ms:
                    return
                continue
            idle_since = time.monotonic()
            for r in records:
                self.show(r)
                self.unsettled.append(r)
                self.shown += 1

    def settle(self, *, quiet: bool = False) -> None:
        """Accept what was shown and not yet accepted; ``quiet``: as best it can, silently."""
        acks, self.unsettled = acknowledgements(self.unsettled), []
        if not acks:
            return
        try:
            refused = self.consumer.acknowledge(acks)
        except Exception:
            if quiet:
                return
            raise
        if not quiet:
            _warn_refused(len(refused))


def _warn_refused(count: int) -> None:
    if count:
        print(
            f"brokergate: warning: {count} record(s) printed could not be accepted (their acquisition "
            "lock had expired): they will be delivered again",
            file=sys.stderr,
        )


# --- wiring ----------------------------------------------------------------------------------


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    share = sub.add_parser(
        "share-groups",
        parents=[common],
        help="list, describe, reset and delete share groups, as kafka-share-groups does",
        description="Share groups (Kafka's KIP-932): consumers that share their topics' partitions "
        "record by record (brokergate consume --share-group). describe shows the consumers and, per "
        "partition, the start offset (every record before it is done), the end offset (the first "
        "never acquired), the records available, acquired and archiving, and the lag. reset and "
        "delete act on a group without consumers only.",
        usage="brokergate share-groups [options] list\n"
        "       brokergate share-groups [options] describe GROUP\n"
        "       brokergate share-groups [options] reset GROUP (--to-earliest | --to-latest) [--topic T ...]\n"
        "       brokergate share-groups [options] reset GROUP --to-offset TOPIC:PARTITION:OFFSET ...\n"
        "       brokergate share-groups [options] delete GROUP",
    )
    share.add_argument("action", choices=ACTIONS)
    share.add_argument("group", nargs="?", metavar="GROUP", help="the share group (all but list)")
    reset = share.add_argument_group("reset: where the group starts over (one way)")
    reset.add_argument(
        "--to-earliest", action="store_true", help="at the earliest offset of each partition of its topics"
    )
    reset.add_argument("--to-latest", action="store_true", help="at the end of each partition of its topics")
    reset.add_argument(
        "--to-offset",
        action="append",
        default=[],
        metavar="TOPIC:PARTITION:OFFSET",
        help="at this offset of this partition (repeatable)",
    )
    reset.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="with --to-earliest or --to-latest: this topic only (repeatable; default: every topic the "
        "group has read)",
    )
    share.set_defaults(run=cmd_share_groups, check=check_args)


def consume_options(consume: argparse.ArgumentParser) -> None:
    """``consume``'s share-group arguments: ``--share-group`` and the TOPICs it reads."""
    consume.add_argument(
        "topics",
        nargs="*",
        metavar="TOPIC",
        help="with --share-group: the topics to read (--topic counts as one more)",
    )
    consume.add_argument(
        "--share-group",
        metavar="GROUP",
        help="consume as a consumer of this share group: the group's consumers share the records, each "
        "printed record is accepted, and what the consumer holds goes back at once when it exits. "
        "Not with --group, --partition, --offset. "
        "--from-beginning: a partition the group never read starts at its beginning "
        "(share.auto.offset.reset=earliest), else at its end; --print-offset prints the delivery count too",
    )
