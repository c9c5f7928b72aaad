"""``brokergate consume``: records printed as they arrive, in the manner of Kafka's
``kafka-console-consumer``.

It reads as a member of ``--group`` (committing as it goes, ``commit_owned``, and where it
stands when it leaves, ``commit_positions``) or of a group of its own, or one ``--partition``
assigned (from ``--offset``); with ``--share-group`` the loop is ``service.cli.shares``'.
Records are printed by ``service.cli.records``. A first Ctrl-C or SIGTERM stops it between polls
(``_stop_signals``), a second at once (``Interrupted``, which ``run`` in ``service.cli.tools``
turns into the exit status); either way its consumer instance is deleted. Built on
``GatewayClient.consumer``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Protocol

from service.cli import shares as share_tool
from service.cli.common import ToolError
from service.cli.records import FORMATS, _print_record
from service.client.gateway_client import ClientError, Consumer, GatewayClient
from service.core.rules import check_group, check_topic
from service.errors import ErrorCode


class Interrupted(KeyboardInterrupt):
    """A second SIGINT or SIGTERM, raised wherever the program is: exit at once with ``status``."""

    def __init__(self, status: int) -> None:
        super().__init__()
        self.status = status


class Committer(Protocol):
    """What ``commit_owned`` needs of a consumer instance (``client.Consumer`` is one)."""

    def commit(self, offsets: Iterable[tuple[str, int, int]] | None = None) -> list[dict[str, Any]]: ...

    def assignment(self) -> list[tuple[str, int]]: ...


def _lost_partitions(exc: ClientError) -> bool:
    """Whether the group refused a commit because the member no longer owns a partition of it."""
    return exc.status == 409 and exc.error_code == ErrorCode.ILLEGAL_STATE


def commit_owned(consumer: Committer, last: dict[tuple[str, int], int]) -> None:
    """Commit the last offset shown of each partition; after a rebalance, those still owned only.

    As Kafka's console consumer: a commit the group refuses because partitions moved to another
    member (409, 40903) is reported on stderr and consumption goes on. The partitions the member
    kept are then committed, so that only what it lost is read again, by the new owner.
    """
    offsets = [(t, p, o) for (t, p), o in last.items()]
    while offsets:
        try:
            consumer.commit(offsets)
            return
        except ClientError as exc:
            if not _lost_partitions(exc):
                raise
            print(f"brokergate: warning: commit refused after a rebalance: {exc.message}", file=sys.stderr)
        owned = set(consumer.assignment())
        kept = [(t, p, o) for t, p, o in offsets if (t, p) in owned]
        if len(kept) == len(offsets):  # refused, yet it owns them all: another rebalance is under way
            return
        offsets = kept


def commit_positions(consumer: Committer) -> None:
    """Commit where the member stands on each partition it owns, as Kafka's console consumer
    does when it leaves (its auto-commit commits the positions on close).

    Called when everything fetched was printed, so a position is the next record to print: a
    partition it read nothing from is committed where the member started, the end for a new
    group, and the group resumes there rather than having no commit at all (a group without
    commits is no group once its last member left). A commit refused after a rebalance is a
    warning, as in ``commit_owned``: the new owner commits those partitions.
    """
    try:
        consumer.commit()
    except ClientError as exc:
        if not _lost_partitions(exc):
            raise
        print(f"brokergate: warning: commit refused after a rebalance: {exc.message}", file=sys.stderr)


def check_consume(args: argparse.Namespace) -> None:
    """``consume``'s usage, checked before any password is asked or request sent."""
    if args.share_group is not None:
        share_tool.check_consume(args)
        return
    if args.topics:
        raise ToolError(
            f"consume reads one --topic; topics as arguments ({' '.join(args.topics)}) go with --share-group",
            2,
        )
    if args.topic is None:
        raise ToolError("consume needs --topic (or --share-group GROUP TOPIC...)", 2)
    if args.offset is not None and args.partition is None:
        raise ToolError("--offset needs --partition", 2)
    check_topic(args.topic)
    if args.group is not None:
        check_group(args.group)


def cmd_consume(args: argparse.Namespace, client: GatewayClient) -> int:
    if args.share_group is not None:
        several = len(share_tool.share_topics(args)) > 1
        with _stop_signals() as stop:
            shown = share_tool.consume(
                args, client, stop, lambda r: _print_record(args, r, with_topic=several)
            )
        print(f"Processed a total of {shown} messages", file=sys.stderr)
        return stop.status if stop.status is not None else 0
    group = args.group or f"brokergate-console-{uuid.uuid4().hex[:12]}"
    reset = "earliest" if args.from_beginning else "latest"
    consumer = client.consumer(group, format=args.format, auto_offset_reset=reset)
    shown = 0
    cut = False  # whether --max-messages left fetched records unprinted
    idle_since = time.monotonic()
    with _stop_signals() as stop, consumer.deleted_on_exit():
        _start(consumer, args)
        while stop.status is None and (args.max_messages is None or shown < args.max_messages):
            records = consumer.poll(timeout_ms=min(args.timeout_ms or 1000, 1000))
            if not records:
                if args.timeout_ms is not None and (time.monotonic() - idle_since) * 1000 >= args.timeout_ms:
                    break
                continue
            idle_since = time.monotonic()
            if args.max_messages is not None and len(records) > args.max_messages - shown:
                records = records[: args.max_messages - shown]
                cut = True
            for r in records:
                _print_record(args, r)
            shown += len(records)
            if args.group:
                last: dict[tuple[str, int], int] = {}
                for r in records:
                    last[(r.topic, r.partition)] = r.offset
                commit_owned(consumer, last)
        if args.group and not cut:
            commit_positions(consumer)
    print(f"Processed a total of {shown} messages", file=sys.stderr)
    return stop.status if stop.status is not None else 0


class _Stop:
    """The exit status a first SIGINT or SIGTERM asked for (128 + its number), None until then."""

    status: int | None = None


@contextmanager
def _stop_signals() -> Iterator[_Stop]:
    """A first Ctrl-C or SIGTERM sets the flag the consume loop checks between polls; a second one
    interrupts. Either way the instance is deleted and the group rebalances at once, rather than
    when the dead member's session times out.

    A ``KeyboardInterrupt`` raised wherever the program happens to be can land inside the HTTP
    client's connection pool between taking its lock and the block that releases it; the request
    that deletes the instance would then wait on that lock for ever.
    """
    stop = _Stop()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.status is not None:
            raise Interrupted(128 + signum)
        stop.status = 128 + signum  # 130 for SIGINT, 143 for SIGTERM, as a shell reports them

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _start(consumer: Consumer, args: argparse.Namespace) -> None:
    if args.partition is None:
        consumer.subscribe(args.topic)
        return
    consumer.assign([(args.topic, args.partition)])
    if args.offset is not None:
        consumer.seek(args.topic, args.partition, args.offset)
    elif args.from_beginning:
        consumer.seek_to_beginning([(args.topic, args.partition)])


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    consume = sub.add_parser(
        "consume",
        parents=[common],
        help="print records as they arrive (--share-group: as a consumer of a share group)",
        usage="brokergate consume [options] --topic TOPIC [--group GROUP | --partition P [--offset O]]\n"
        "       brokergate consume [options] --share-group GROUP TOPIC [TOPIC ...]",
    )
    consume.add_argument("--topic", help="the topic to read (required but with --share-group)")
    consume.add_argument(
        "--group",
        help="consume as a member of this group, committing as it goes; a group without commits "
        "starts at the end unless --from-beginning",
    )
    consume.add_argument(
        "--from-beginning",
        action="store_true",
        help="start where no commit says otherwise: the beginning (--share-group: on the partitions the "
        "group never read)",
    )
    consume.add_argument("--partition", type=int, help="read this partition only (assigned: no rebalance)")
    consume.add_argument("--offset", type=int, help="with --partition: start at this offset")
    consume.add_argument("--max-messages", type=int, help="stop after this many records")
    consume.add_argument("--timeout-ms", type=int, help="stop (status 0) after this long without a record")
    consume.add_argument("--print-key", action="store_true", help="print the key before the value")
    consume.add_argument(
        "--print-offset",
        action="store_true",
        help="print partition:offset first; --share-group: then delivery:N, the record's delivery count "
        "(and topic:partition:offset when it reads several topics)",
    )
    consume.add_argument("--print-headers", action="store_true", help="print name:value,... or NO_HEADERS")
    consume.add_argument(
        "--format",
        choices=FORMATS,
        default="string",
        help="the instance's format; avro, jsonschema and protobuf print keys and values decoded, as JSON",
    )
    share_tool.consume_options(consume)
    consume.set_defaults(run=cmd_consume, check=check_consume)
