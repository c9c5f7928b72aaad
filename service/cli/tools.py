"""Command-line tools in the spirit of Kafka's console tools, against any brokergate endpoint.

``brokergate topics|asyncapi|produce|consume|groups|share-groups|push|acls|schemas`` — built on
``service.client``; each tool is a module of its own (``service.cli.topics``, ``produce``,
``consume``, ``groups``, ``shares``, ``push``, ``acls`` and ``schemas``; ``service.cli.records`` reads and
prints the records of ``produce`` and ``consume``), and the options they all share (URL, output,
credentials, TLS) are ``service.cli.common``'s. This module puts their parsers together
(``add_commands``) and runs the command given (``run``). Human output is aligned tables,
``--output json`` is for scripts; errors are one line on stderr with an exit status:

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
import os
import sys

from service.cli import acls as acl_tool
from service.cli import consume as consume_tool
from service.cli import groups as groups_tool
from service.cli import produce as produce_tool
from service.cli import push as push_tool
from service.cli import schemas as schema_tool
from service.cli import shares as share_tool
from service.cli import topics as topics_tool
from service.cli.common import (
    Credentials,
    ToolError,
    add_common_options,
    connect,
    credentials,
    terminal_prompt,
)
from service.cli.consume import Interrupted, commit_owned
from service.cli.produce import refused_batch
from service.client.gateway_client import ClientError
from service.errors import GatewayError

__all__ = ["add_commands", "commit_owned", "refused_batch", "run"]


def add_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], top: argparse.ArgumentParser | None = None
) -> None:
    """The tools' commands under ``sub``; with ``top``, the parser ``sub`` belongs to, their common
    options are taken before the command too (``brokergate --url URL topics list``), as after it."""
    common = argparse.ArgumentParser(add_help=False)
    add_common_options(common, defaults=top is None)
    if top is not None:
        add_common_options(top)
    topics_tool.add_parser(sub, common)
    topics_tool.add_asyncapi_parser(sub, common)
    produce_tool.add_parser(sub, common)
    consume_tool.add_parser(sub, common)
    groups_tool.add_parser(sub, common)
    share_tool.add_parser(sub, common)
    push_tool.add_parser(sub, common)
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
    if exc.status == 403 and creds == Credentials():  # the gateway's words say whom, if anyone
        return f"not allowed: {exc.message} {detail}"
    if exc.status == 403:
        return f"not allowed ({creds}): {exc.message} {detail}"
    return f"{exc.message} {detail}"


def _fail(message: str, status: int) -> int:
    print(f"brokergate: error: {message}", file=sys.stderr)
    return status
