"""Command-line tools in the spirit of Kafka's console tools, against any brokergate endpoint.

``brokergate topics|produce|consume|groups|share-groups|acls|schemas`` — built on
``service.client``; ``acls`` is ``service.cli.acls``'s, ``schemas`` (and the schemas ``produce``
takes in a schema format) ``service.cli.schemas``'s, ``share-groups`` and the loop of ``consume
--share-group`` ``service.cli.shares``'s, and the options they all share (URL, output,
credentials, TLS) are ``service.cli.common``'s. Human output is aligned tables, ``--output json``
is for scripts; errors are one line on stderr with an exit status:

- 1: refused — by the gateway (401: credentials refused or missing; 403: not allowed; any
  other error answer), by the gateway's own name rules before anything was sent, or at
  ``acls remove``'s confirmation prompt;
- 2: bad usage or input;
- 3: the gateway cannot be reached, or no TLS connection can be made with it;
- 4: some produced records failed;
- 5: ``schemas compat``: the schema is not compatible;
- 130: Ctrl-C (SIGINT); 143: SIGTERM.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any, Protocol

from service.cli import acls as acl_tool
from service.cli import schemas as schema_tool
from service.cli import shares as share_tool
from service.cli.common import (
    Credentials,
    ToolError,
    add_common_options,
    connect,
    credentials,
    emit,
    terminal_prompt,
)
from service.cli.schemas import SCHEMA_FORMATS, RecordSchemas, record_schemas
from service.client.gateway_client import (
    ClientError,
    Consumer,
    GatewayClient,
    ProducedOffset,
    Record,
    ShareRecord,
)
from service.core.rules import check_group, check_topic
from service.errors import ErrorCode, GatewayError
from service.tables import format_table

BATCH = 500
FORMATS = ("string", "json", "binary", *SCHEMA_FORMATS)


class Interrupted(KeyboardInterrupt):
    """A second SIGINT or SIGTERM, raised wherever the program is: exit at once with ``status``."""

    def __init__(self, status: int) -> None:
        super().__init__()
        self.status = status


# --- topics ------------------------------------------------------------------------------


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


# --- produce -----------------------------------------------------------------------------


def _pairs(items: Iterable[str] | None, flag: str) -> Iterator[tuple[str, str]]:
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ToolError(f"{flag} takes name=value, got {item!r}", 2)
        yield name, value


def _encode(text: str, fmt: str, what: str, line_no: int) -> Any:
    if fmt == "string":
        return text
    if fmt == "binary":
        return base64.b64encode(text.encode()).decode()
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ToolError(f"line {line_no}: the {what} is not JSON ({exc})", 2) from exc


def _records(
    lines: Iterable[str], args: argparse.Namespace, headers: list[dict[str, str]]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each record to send, with the number of the line it is read from."""
    for line_no, raw in enumerate(lines, 1):
        line = raw.rstrip("\n")
        if not line:
            continue
        record: dict[str, Any] = {}
        if args.key_separator is not None:
            key, sep, value = line.partition(args.key_separator)
            if not sep:
                raise ToolError(f"line {line_no}: no key separator {args.key_separator!r}", 2)
            record["key"] = _encode(key, args.format, "key", line_no)
        else:
            value = line
        record["value"] = _encode(value, args.format, "value", line_no)
        if headers:
            record["headers"] = headers
        yield line_no, record


class BatchRefused(Exception):
    """The gateway refused a batch whole (422: one of its records cannot be stored); the message
    says why, and names the record's line when the gateway names the record."""


_RECORD_INDEX = re.compile(r"records\[(\d+)\]")


def refused_batch(exc: ClientError, lines: Sequence[int]) -> BatchRefused:
    found = _RECORD_INDEX.match(exc.message)
    index = int(found[1]) if found else len(lines)
    where = f"line {lines[index]}: " if index < len(lines) else ""
    return BatchRefused(f"{where}{exc.message} (HTTP {exc.status}, error {exc.error_code})")


class _Sender:
    """Sends ``produce``'s batches and keeps the tally its summary reports."""

    def __init__(
        self, args: argparse.Namespace, client: GatewayClient, schemas: RecordSchemas | None = None
    ) -> None:
        self.args = args
        self.client = client
        self.schemas = schemas
        self.progress = sys.stderr.isatty() and args.output != "json"
        self.sent = self.failed = 0
        self.first_failure: str | None = None
        self.started = time.monotonic()

    def send(self, batch: list[dict[str, Any]], lines: Sequence[int]) -> None:
        """Send the records read from ``lines``; ``BatchRefused`` if the gateway refuses them all."""
        try:
            results = self._produce(batch)
        except ClientError as exc:
            if exc.status != 422:
                raise
            raise refused_batch(exc, lines) from exc
        for n, result in enumerate(results):
            if result.error_code is not None:
                self.failed += 1
                self.first_failure = self.first_failure or f"record {self.sent + n + 1}: {result.error}"
        self.sent += len(batch)
        if self.progress:
            rate = self.sent / max(time.monotonic() - self.started, 1e-6)
            sys.stderr.write(f"\r{self.sent:,} records  {rate:,.0f} rec/s")
            sys.stderr.flush()

    def _produce(self, batch: list[dict[str, Any]]) -> list[ProducedOffset]:
        args = self.args
        if self.schemas is None:
            return self.client.produce(args.topic, batch, fmt=args.format, partition=args.partition)
        produced = self.client.produce_with_schemas(
            args.topic,
            batch,
            fmt=args.format,
            key_schema=self.schemas.key,
            value_schema=self.schemas.value,
            partition=args.partition,
        )
        # The next batches name the schemas by their ids: no text to send and parse again.
        self.schemas = RecordSchemas(
            self.schemas.key if produced.key_schema_id is None else produced.key_schema_id,
            self.schemas.value if produced.value_schema_id is None else produced.value_schema_id,
        )
        return produced.offsets

    def summarize(self) -> None:
        if self.progress:
            sys.stderr.write("\n")
        elapsed = time.monotonic() - self.started
        topic, sent, failed = self.args.topic, self.sent, self.failed
        summary: dict[str, Any] = {
            "topic": topic,
            "records": sent,
            "failed": failed,
            "seconds": round(elapsed, 3),
        }
        row: list[Any] = [topic, sent, failed, f"{elapsed:.2f}s"]
        header = ["TOPIC", "RECORDS", "FAILED", "TIME"]
        if self.schemas is not None:  # the ids, once known: a schema given as text has one after a batch
            ids = [s if isinstance(s, int) else None for s in (self.schemas.key, self.schemas.value)]
            summary.update(key_schema_id=ids[0], value_schema_id=ids[1])
            row += ids
            header += ["KEY-SCHEMA-ID", "VALUE-SCHEMA-ID"]
        emit(self.args, summary, [row], header)


def cmd_produce(args: argparse.Namespace, client: GatewayClient) -> int:
    check_topic(args.topic)
    schemas = record_schemas(args)
    headers = [
        {"name": k, "value": base64.b64encode(v.encode()).decode()}
        for k, v in _pairs(args.header, "--header")
    ]
    source = open(args.file, encoding="utf-8") if args.file else sys.stdin
    sender = _Sender(args, client, schemas)
    bad_line: ToolError | None = None
    refused: BatchRefused | None = None
    try:
        batch: list[dict[str, Any]] = []
        lines: list[int] = []
        try:
            for line_no, record in _records(source, args, headers):
                batch.append(record)
                lines.append(line_no)
                if len(batch) >= args.batch_size:
                    sender.send(batch, lines)
                    batch, lines = [], []
        except ToolError as exc:
            # Every line before the bad one is sent, whatever --batch-size: the fixed input resumes there.
            bad_line = exc
        if batch:
            sender.send(batch, lines)
    except BatchRefused as exc:  # nothing of that batch was stored: the input resumes at its first line
        refused = exc
    finally:
        if source is not sys.stdin:
            source.close()
    sender.summarize()
    failures = f"{sender.failed} record(s) failed; first: {sender.first_failure}"
    stop, status = (refused, 1) if refused is not None else (bad_line, 2)
    if stop is not None:
        stopped = f"{stop}; stopped there, after sending {sender.sent} record(s)"
        raise ToolError(f"{stopped}; {failures}" if sender.first_failure else stopped, status)
    if sender.first_failure:
        raise ToolError(failures, 4)
    return 0


# --- consume -----------------------------------------------------------------------------


def _show(record: Any) -> str:
    return record if isinstance(record, str) else json.dumps(record)


def _print_record(args: argparse.Namespace, r: Record, *, with_topic: bool = False) -> None:
    """One record on one line: tab-separated, or JSON with ``--output json``. A share consumer's
    record shows its delivery count wherever its offset is shown; ``with_topic``: its topic too
    (several topics are read).
    """
    # A schema format's keys and values are printed as JSON, strings too: lines produce reads again.
    show = json.dumps if args.format in SCHEMA_FORMATS else _show
    value = r.value
    key = r.key
    if args.format == "binary":
        value = None if value is None else base64.b64decode(value).decode("utf-8", "replace")
        key = None if key is None else base64.b64decode(key).decode("utf-8", "replace")
    if args.output == "json":
        shown: dict[str, Any] = {
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "key": key,
            "value": value,
            "headers": [[k, None if v is None else v.decode("utf-8", "replace")] for k, v in r.headers],
        }
        if isinstance(r, ShareRecord):
            shown["delivery_count"] = r.delivery_count
        print(json.dumps(shown), flush=True)
        return
    parts = []
    if args.print_offset:
        parts.append(f"{r.topic}:{r.partition}:{r.offset}" if with_topic else f"{r.partition}:{r.offset}")
        if isinstance(r, ShareRecord):
            parts.append(f"delivery:{r.delivery_count}")
    if args.print_headers:
        parts.append(
            ",".join(f"{k}:{'' if v is None else v.decode('utf-8', 'replace')}" for k, v in r.headers)
            or "NO_HEADERS"
        )
    if args.print_key:
        parts.append("null" if key is None else show(key))
    parts.append("null" if value is None else show(value))
    print("\t".join(parts), flush=True)


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
            if args.max_messages is not None:
                records = records[: args.max_messages - shown]
            for r in records:
                _print_record(args, r)
            shown += len(records)
            if args.group:
                last: dict[tuple[str, int], int] = {}
                for r in records:
                    last[(r.topic, r.partition)] = r.offset
                commit_owned(consumer, last)
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


# --- groups ------------------------------------------------------------------------------


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


# --- wiring ------------------------------------------------------------------------------


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    add_common_options(common)

    topics = sub.add_parser("topics", parents=[common], help="create, list, describe, alter, delete topics")
    topics.add_argument("action", choices=["create", "list", "describe", "delete", "alter"])
    topics.add_argument("--topic")
    topics.add_argument("--partitions", type=int)
    topics.add_argument("--replication-factor", type=int)
    topics.add_argument("--config", action="append", metavar="NAME=VALUE")
    topics.set_defaults(run=cmd_topics)

    produce = sub.add_parser(
        "produce", parents=[common], help="produce one record per line of stdin or --file"
    )
    produce.add_argument("--topic", required=True)
    produce.add_argument("--partition", type=int)
    produce.add_argument("--key-separator", help="split each line into key and value at this separator")
    produce.add_argument(
        "--format",
        choices=FORMATS,
        default="string",
        help="how each line is read: string, json, binary (sent as base64), or a schema format: avro, "
        "jsonschema, protobuf (the line is the record's JSON, and --value-schema-* is needed)",
    )
    for side, when in (("value", "a schema format"), ("key", "a schema format with --key-separator")):
        produce.add_argument(
            f"--{side}-schema-file",
            metavar="FILE",
            help=f"{when}: the schema of the {side}s (registered under <topic>-{side})",
        )
        produce.add_argument(
            f"--{side}-schema-id",
            type=schema_tool.schema_id,
            metavar="ID",
            help=f"{when}: the id of the {side}s' registered schema, instead of its file",
        )
    produce.add_argument("--header", action="append", metavar="NAME=VALUE")
    produce.add_argument("--file")
    produce.add_argument("--batch-size", type=int, default=BATCH)
    produce.set_defaults(run=cmd_produce)

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

    groups = sub.add_parser("groups", parents=[common], help="list groups, describe members and lag")
    groups.add_argument("action", choices=["list", "describe", "lag"])
    groups.add_argument("--group")
    groups.set_defaults(run=cmd_groups)

    share_tool.add_parser(sub, common)
    acl_tool.add_parser(sub, common)
    schema_tool.add_parser(sub, common)


_NEEDS_TOPIC = {"create", "describe", "delete", "alter"}


def run(args: argparse.Namespace) -> int:
    if args.command == "topics" and args.action in _NEEDS_TOPIC and not args.topic:
        return _fail(f"topics {args.action} needs --topic", 2)
    if args.command == "topics" and args.action == "alter" and args.partitions is None:
        return _fail("topics alter needs --partitions", 2)
    if args.command == "produce" and args.password_stdin and not args.file:
        return _fail("produce reads its records from stdin: with --password-stdin, give them in --file", 2)
    creds = Credentials()
    try:
        check = getattr(args, "check", None)
        if check is not None:  # bad usage fails before a password is asked or a request sent
            check(args)
        creds = credentials(args, os.environ, stdin=sys.stdin, ask=terminal_prompt())
        with connect(args, creds, os.environ) as client:
            status: int = args.run(args, client)
            return status
    except ClientError as exc:
        if exc.status == 0:
            return _fail(exc.message, 3)
        return _fail(_refusal(exc, creds), 1)
    except GatewayError as exc:  # a name refused by the gateway's own rules, before any request
        return _fail(f"{exc.message} (HTTP {exc.http_status}, error {int(exc.error_code)})", 1)
    except ToolError as exc:
        return _fail(str(exc), exc.status)
    except Interrupted as exc:
        return exc.status
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        return _fail(str(exc), 2)


def _refusal(exc: ClientError, creds: Credentials) -> str:
    """The line that says why the gateway refused: credentials first, as they are fixed first."""
    detail = f"(HTTP {exc.status}, error {exc.error_code})"
    if exc.status == 401 and creds == Credentials():
        return (
            "the gateway requires credentials and none were given: --user NAME (and a password) "
            f"or --token; it said: {exc.message} {detail}"
        )
    if exc.status == 401:
        return f"the gateway refused the credentials ({creds}): {exc.message} {detail}"
    if exc.status == 403:
        return f"not allowed ({creds}): {exc.message} {detail}"
    return f"{exc.message} {detail}"


def _fail(message: str, status: int) -> int:
    print(f"brokergate: error: {message}", file=sys.stderr)
    return status
