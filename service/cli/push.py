"""Push subscriptions on the command line: ``brokergate push list|describe|create|update|pause|
resume|rotate-secret|delete``.

``create NAME --endpoint URL (--topic T ... | --pattern REGEX)`` makes a subscription and prints
its signing secret, which is shown this once (and by ``rotate-secret``); every other flag is a
field of the spec (``docs/push.md``). ``update NAME`` changes only the fields its flags name and
keeps the rest. ``describe`` prints the spec and the status: backlog, records held, and from the
replica delivering it the deliveries, rate, failures, dead letters and last error. A bearer
token is read from the environment (``BROKERGATE_PUSH_TOKEN``) or stdin, never from a flag that
``ps`` would show.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Final

from service.cli.common import ToolError, emit
from service.client.gateway_client import GatewayClient
from service.client.push import PushSubscriptions

ACTIONS: Final = ("list", "describe", "create", "update", "pause", "resume", "rotate-secret", "delete")
LIST_HEADER: Final = ("NAME", "ENDPOINT", "TOPICS", "PAUSED", "BACKLOG", "DELIVERING", "LAST-ERROR")
TOKEN_ENV: Final = "BROKERGATE_PUSH_TOKEN"


def check_args(args: argparse.Namespace) -> None:
    """``push``'s usage, checked before any password is asked or request sent."""
    if args.action == "list":
        if args.name is not None:
            raise ToolError("push list takes no NAME", 2)
        return
    if args.name is None:
        raise ToolError(f"push {args.action} needs a NAME", 2)
    given = [flag for flag, value in _spec_flags(args).items() if value is not None]
    if args.action not in ("create", "update") and (given or args.bearer_token):
        raise ToolError(f"{(given or ['--bearer-token'])[0]} goes with push create or update", 2)
    if args.action == "create":
        if args.endpoint is None:
            raise ToolError("push create needs --endpoint", 2)
        if not args.topic and args.pattern is None:
            raise ToolError("push create needs --topic or --pattern", 2)


def _spec_flags(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "--endpoint": args.endpoint,
        "--topic": args.topic or None,
        "--pattern": args.pattern,
        "--format": args.format,
        "--start": args.start,
        "--start-timestamp-ms": args.start_timestamp_ms,
        "--max-records": args.max_records,
        "--max-bytes": args.max_bytes,
        "--max-in-flight": args.max_in_flight,
        "--ordering": args.ordering,
        "--ack-deadline-ms": args.ack_deadline_ms,
        "--min-backoff-ms": args.min_backoff_ms,
        "--max-backoff-ms": args.max_backoff_ms,
        "--max-attempts": args.max_attempts,
        "--dead-letter-topic": args.dead_letter_topic,
        "--auth": args.auth,
    }


def _spec(args: argparse.Namespace, base: dict[str, Any]) -> dict[str, Any]:
    """The spec to send: ``base`` (the current one, or nothing) with what the flags name."""
    spec = {
        key: base[key]
        for key in (
            "endpoint",
            "topics",
            "topic_pattern",
            "format",
            "start",
            "start_timestamp_ms",
            "batching",
            "max_in_flight",
            "ordering",
            "ack_deadline_ms",
            "retry",
            "dead_letter_topic",
            "authentication",
        )
        if base.get(key) is not None
    }
    simple = {
        "endpoint": args.endpoint,
        "format": args.format,
        "start": args.start,
        "start_timestamp_ms": args.start_timestamp_ms,
        "max_in_flight": args.max_in_flight,
        "ordering": args.ordering,
        "ack_deadline_ms": args.ack_deadline_ms,
        "dead_letter_topic": args.dead_letter_topic,
    }
    spec.update({k: v for k, v in simple.items() if v is not None})
    if args.topic:
        spec["topics"] = list(args.topic)
        spec.pop("topic_pattern", None)
    if args.pattern is not None:
        spec["topic_pattern"] = args.pattern
        spec.pop("topics", None)
    batching = dict(spec.get("batching") or {})
    batching.update(
        {k: v for k, v in (("max_records", args.max_records), ("max_bytes", args.max_bytes)) if v}
    )
    if batching:
        spec["batching"] = batching
    retry = dict(spec.get("retry") or {})
    for key in ("min_backoff_ms", "max_backoff_ms", "max_attempts"):
        if getattr(args, key) is not None:
            retry[key] = getattr(args, key)
    if retry:
        spec["retry"] = retry
    auth = dict(spec.get("authentication") or {"type": "webhook"})
    auth.pop("token", None)  # never shown back: a bearer subscription's update sends it again
    if args.auth is not None:
        auth["type"] = args.auth
    if auth["type"] == "bearer":
        auth["token"] = _token(args)
    spec["authentication"] = auth
    return spec


def _token(args: argparse.Namespace) -> str:
    token = os.environ.get(TOKEN_ENV)
    if args.bearer_token == "stdin":
        token = sys.stdin.readline().rstrip("\r\n")
    if not token:
        raise ToolError(f"a bearer subscription needs its token: {TOKEN_ENV}, or --bearer-token stdin", 2)
    return token


def cmd_push(args: argparse.Namespace, client: GatewayClient) -> int:
    push = PushSubscriptions(client)
    if args.action == "list":
        subs = push.list()
        emit(args, subs, [_row(s) for s in subs], LIST_HEADER)
    elif args.action == "describe":
        _describe(args, push.get(args.name))
    elif args.action in ("create", "update"):
        base = {} if args.action == "create" else push.get(args.name)
        sub = push.put(args.name, _spec(args, base))
        _describe(args, sub)
    elif args.action == "pause":
        _describe(args, push.pause(args.name))
    elif args.action == "resume":
        _describe(args, push.resume(args.name))
    elif args.action == "rotate-secret":
        _describe(args, push.rotate_secret(args.name))
    else:
        push.delete(args.name)
        emit(args, {"deleted": args.name}, [[args.name, "deleted"]], ["NAME", "STATUS"])
    return 0


def _row(sub: dict[str, Any]) -> list[Any]:
    status = sub["status"]
    topics = ",".join(sub["topics"] or []) or f"/{sub['topic_pattern']}/"
    return [
        sub["name"],
        sub["endpoint"],
        topics,
        "yes" if sub["paused"] else "no",
        status["backlog"],
        "here" if status["delivering"] else "-",
        status.get("last_error") or "-",
    ]


def _describe(args: argparse.Namespace, sub: dict[str, Any]) -> None:
    """A subscription as a list of fields and values (its secret first, when the answer has it)."""
    if args.output == "json":
        emit(args, sub, [], [])
        return
    rows: list[list[Any]] = []
    if sub.get("secret"):
        rows.append(["secret (shown once)", sub["secret"]])
    status = sub["status"]
    for key in (
        "name",
        "owner",
        "endpoint",
        "paused",
        "format",
        "ordering",
        "max_in_flight",
        "ack_deadline_ms",
    ):
        rows.append([key, sub[key]])
    rows.append(["topics", ",".join(sub["topics"] or []) or f"pattern {sub['topic_pattern']}"])
    rows.append(
        ["batching", f"{sub['batching']['max_records']} records, {sub['batching']['max_bytes']} bytes"]
    )
    retry = sub["retry"]
    rows.append(
        ["retry", f"{retry['min_backoff_ms']}-{retry['max_backoff_ms']} ms, {retry['max_attempts']} attempts"]
    )
    rows.append(["dead_letter_topic", sub["dead_letter_topic"] or "-"])
    rows.append(["authentication", sub["authentication"]["type"]])
    for key, value in status.items():
        rows.append([f"status.{key}", "-" if value is None else value])
    emit(args, sub, rows, ("FIELD", "VALUE"))


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    push = sub.add_parser(
        "push",
        parents=[common],
        help="create, list, describe, change, pause, resume and delete push subscriptions",
        description="Push subscriptions: the gateway POSTs a topic's records to an HTTP endpoint, "
        "retrying with back-off, in order where asked, and dead-lettering what it cannot deliver. "
        "create prints the signing secret once.",
        usage="brokergate push [options] list\n"
        "       brokergate push [options] create NAME --endpoint URL (--topic T ... | --pattern RE) [spec]\n"
        "       brokergate push [options] update NAME [spec]\n"
        "       brokergate push [options] describe|pause|resume|rotate-secret|delete NAME",
    )
    push.add_argument("action", choices=ACTIONS)
    push.add_argument("name", nargs="?", metavar="NAME", help="the subscription (all but list)")
    spec = push.add_argument_group("spec (create, update)")
    spec.add_argument("--endpoint", help="the URL records are POSTed to (an allowed destination)")
    spec.add_argument("--topic", action="append", default=[], help="a topic to deliver (repeatable)")
    spec.add_argument("--pattern", help="instead of --topic: a regular expression of topic names")
    spec.add_argument("--format", choices=["binary", "json", "string", "avro", "jsonschema", "protobuf"])
    spec.add_argument("--start", choices=["earliest", "latest"], help="where a partition never read starts")
    spec.add_argument(
        "--start-timestamp-ms", type=int, help="instead: at the first record at or after this time"
    )
    spec.add_argument("--max-records", type=int, help="records per request (default 1)")
    spec.add_argument("--max-bytes", type=int, help="bytes of records per request")
    spec.add_argument("--max-in-flight", type=int, help="requests in flight at once (default 1)")
    spec.add_argument("--ordering", choices=["none", "key", "partition"])
    spec.add_argument("--ack-deadline-ms", type=int, help="how long a request may take (default 10000)")
    spec.add_argument("--min-backoff-ms", type=int)
    spec.add_argument("--max-backoff-ms", type=int)
    spec.add_argument(
        "--max-attempts", type=int, help="requests a record is sent in before it is dead-lettered"
    )
    spec.add_argument("--dead-letter-topic", help="where what cannot be delivered is copied")
    spec.add_argument("--auth", choices=["webhook", "bearer", "none"], help="how requests are authenticated")
    spec.add_argument(
        "--bearer-token",
        choices=["env", "stdin"],
        help=f"with --auth bearer: read the token from {TOKEN_ENV} (env, the default) or stdin",
    )
    push.set_defaults(run=cmd_push, check=check_args)
