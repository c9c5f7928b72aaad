"""Records as the console tools read and print them, one a line: pure text work, no requests.

``_records`` reads ``produce``'s input lines into records (key and value in ``--format``, split
at ``--key-separator``); ``_print_record`` prints a record ``consume`` got on one line
(tab-separated, each key and value as ``produce`` reads it in that format; or compact JSON with
``--output json``), a share consumer's (``service.cli.shares``) included; ``_pairs`` reads the
NAME=VALUE flags (``produce --header``, ``topics --config``).
``FORMATS`` are the formats both tools take. Collaborators: ``service.client``'s ``Record`` and
``ShareRecord``, the schema formats of ``service.cli.schemas``.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Iterable, Iterator
from typing import Any

from service.cli.common import ToolError
from service.cli.schemas import SCHEMA_FORMATS
from service.client.gateway_client import Record, ShareRecord

FORMATS = ("string", "json", "binary", *SCHEMA_FORMATS)

# --- read: produce's lines ---------------------------------------------------------------


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


# --- print: consume's lines -------------------------------------------------------------


# Keys and values that are text: printed as they are. In the others, JSON.
TEXT_FORMATS = ("string", "binary")


def compact(value: Any) -> str:
    """``value`` as compact JSON (no spaces, as the gateway answers), non-ASCII text as it is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _field(value: Any, fmt: str) -> str:
    """A key or value as ``produce --format fmt`` reads it back: text as it is in ``string`` and
    ``binary``, compact JSON in the others (a string quoted, so ``"null"`` is not an absent one);
    ``null`` when absent, in every format."""
    if value is None:
        return "null"
    return str(value) if fmt in TEXT_FORMATS else compact(value)


def _print_record(args: argparse.Namespace, r: Record, *, with_topic: bool = False) -> None:
    """One record on one line: tab-separated, or one compact JSON object with ``--output json``.
    A share consumer's record shows its delivery count wherever its offset is shown;
    ``with_topic``: its topic too (several topics are read).
    """
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
        print(compact(shown), flush=True)
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
        parts.append(_field(key, args.format))
    parts.append(_field(value, args.format))
    print("\t".join(parts), flush=True)
