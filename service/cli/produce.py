"""``brokergate produce``: one record per line of stdin or ``--file``, in the manner of Kafka's
``kafka-console-producer``.

The lines are read into records by ``service.cli.records`` and sent in batches of
``--batch-size`` (``_Sender``, which keeps the tally the summary reports). A line that cannot be
read, or a batch the gateway refuses whole (``BatchRefused``), stops the input there, after
every record before it was sent; records the gateway fails one by one are counted (status 4).
In a schema format (``--format avro|jsonschema|protobuf``) the records go with their schemas
(``service.cli.schemas``), named by id after the first batch. Built on ``GatewayClient.produce``
and ``produce_with_schemas``.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

from service.cli import schemas as schema_tool
from service.cli.common import ToolError, emit
from service.cli.records import FORMATS, _pairs, _records
from service.cli.schemas import RecordSchemas, record_schemas
from service.client.gateway_client import ClientError, GatewayClient, ProducedOffset
from service.core.rules import check_topic

BATCH = 500


class BatchRefused(Exception):
    """The gateway refused a batch whole (400 or 422: one of its records cannot be stored); the
    message says why, and names the record's line when the gateway names the record."""


_RECORD_INDEX = re.compile(r"records\[(\d+)\]")


def refused_batch(exc: ClientError, lines: Sequence[int]) -> BatchRefused:
    found = _RECORD_INDEX.search(exc.message)  # after "Bad Request: " in a 400
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
            if exc.status not in (400, 422):
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


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
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
