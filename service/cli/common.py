"""What every console tool shares: the common options, the client built from them, errors, output.

``add_common_options`` fills the parent parser of ``brokergate topics|produce|consume|groups|acls|schemas``:
the gateway's URL, ``--output``, and how to authenticate and reach the gateway over TLS.
``credentials`` and ``connect`` turn those options, each falling back to its ``BROKERGATE_*``
environment variable, into a ``GatewayClient``. ``ToolError`` carries the exit status that
``service.cli.tools`` documents; ``emit`` prints a table for people or JSON for scripts.

A password never has to be on a command line: it is asked at the terminal (no echo), read
from stdin (``--password-stdin``) or from ``BROKERGATE_PASSWORD``. ``--password`` and
``--token`` exist for convenience, and every user of the machine can read them in ``ps``.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from service.client.gateway_client import GatewayClient
from service.tables import format_table

DEFAULT_URL = "http://localhost:8082"
URL_ENV = "BROKERGATE_URL"
USER_ENV = "BROKERGATE_USER"
PASSWORD_ENV = "BROKERGATE_PASSWORD"
TOKEN_ENV = "BROKERGATE_TOKEN"
CACERT_ENV = "BROKERGATE_CACERT"
CERT_ENV = "BROKERGATE_CERT"
KEY_ENV = "BROKERGATE_KEY"
COMPRESS_ENV = "BROKERGATE_COMPRESS"

Prompt = Callable[[str], str]


class ToolError(Exception):
    """A failure the tool reports in one line on stderr, ending with exit status ``status``."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def emit(args: argparse.Namespace, data: Any, rows: Sequence[Sequence[Any]], header: Sequence[str]) -> None:
    if args.output == "json":
        json.dump(data, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_table(rows, header))


def add_common_options(common: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """The options every tool takes. ``defaults=False`` leaves an option out of the namespace
    unless given (``argparse.SUPPRESS``): so a command's own options, given after it, win over the
    same options given before it (``brokergate --url URL topics list``), which the top parser holds
    with the defaults, instead of a command's defaults overwriting them."""

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    common.add_argument(
        "--url",
        default=default(None),
        help=f"gateway URL (default ${URL_ENV} or {DEFAULT_URL}); https:// for TLS",
    )
    common.add_argument(
        "--output",
        choices=["table", "json"],
        default=default("table"),
        help="table for people, json for scripts",
    )
    common.add_argument(
        "--compress",
        choices=["gzip", "zstd"],
        default=default(None),
        help=f"send request bodies coded so (default ${COMPRESS_ENV}, else plain): records produced travel "
        "smaller; answers come coded whenever the gateway codes them",
    )
    auth = common.add_argument_group("credentials and TLS")
    auth.add_argument(
        "--user",
        default=default(None),
        metavar="NAME",
        help=f"HTTP Basic user (default ${USER_ENV}); the password is asked at the terminal unless "
        f"--password-stdin or ${PASSWORD_ENV} gives it",
    )
    auth.add_argument(
        "--password",
        default=default(None),
        help="the user's password; every user of this machine can read it in `ps`: prefer the "
        f"prompt, --password-stdin or ${PASSWORD_ENV}",
    )
    auth.add_argument(
        "--password-stdin",
        action="store_true",
        default=default(False),
        help="read the password from the first line of stdin",
    )
    auth.add_argument(
        "--token",
        default=default(None),
        help=f"Bearer token (default ${TOKEN_ENV}); readable in `ps` like --password: prefer --token-file",
    )
    auth.add_argument(
        "--token-file", metavar="FILE", default=default(None), help="read the Bearer token from FILE"
    )
    auth.add_argument(
        "--cacert",
        metavar="FILE",
        default=default(None),
        help=f"verify the gateway's TLS certificate with the CA certificates (PEM) in FILE "
        f"(default ${CACERT_ENV}, else the system's)",
    )
    auth.add_argument(
        "--cert",
        metavar="FILE",
        default=default(None),
        help=f"client certificate (PEM) for mutual TLS (default ${CERT_ENV}); it may hold the key too",
    )
    auth.add_argument(
        "--key",
        metavar="FILE",
        default=default(None),
        help=f"the client certificate's private key (PEM) (default ${KEY_ENV})",
    )


@dataclass(frozen=True, slots=True)
class Credentials:
    """Who the tool says it is: an HTTP Basic user and password, a Bearer token, or nobody."""

    user: str | None = None
    password: str | None = None
    token: str | None = None

    def __str__(self) -> str:
        if self.user is not None:
            return f"user {self.user!r}"
        return "a Bearer token" if self.token is not None else "no credentials"


def terminal_prompt() -> Prompt | None:
    """A way to ask for a password without echo, or None when there is no terminal to ask at.

    ``getpass`` reads the controlling terminal, not stdin, so the records ``produce`` reads
    from a pipe stay untouched; without a terminal it would read stdin with echo, so it is
    not offered then.
    """
    if os.name == "posix":
        try:
            os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
        except OSError:
            return None
    elif not sys.stdin.isatty():
        return None
    return getpass.getpass


def credentials(
    args: argparse.Namespace, env: Mapping[str, str], *, stdin: TextIO, ask: Prompt | None
) -> Credentials:
    """The credentials ``args`` and ``env`` give; a flag wins over any environment variable.

    ``--password-stdin`` reads one line of ``stdin``; a user with no password anywhere is
    asked with ``ask`` (None: no terminal, which is an error then).
    """
    if args.password is not None and args.password_stdin:
        raise ToolError("give the password once: --password or --password-stdin", 2)
    if args.token is not None and args.token_file is not None:
        raise ToolError("give the token once: --token or --token-file", 2)
    token_flag = args.token is not None or args.token_file is not None
    if args.user is not None and token_flag:
        raise ToolError("--user and --token are two ways to authenticate: give one", 2)
    if args.user is not None:
        user, token = args.user, None
    elif token_flag:
        user, token = None, _token_flag(args)
    else:
        user, token = env.get(USER_ENV) or None, env.get(TOKEN_ENV) or None
        if user is not None and token is not None:
            raise ToolError(
                f"{USER_ENV} and {TOKEN_ENV} are both set: unset one, or pass --user or --token", 2
            )
    if user is None:
        if args.password is not None or args.password_stdin:
            raise ToolError(f"--password and --password-stdin go with --user (or {USER_ENV})", 2)
        return Credentials(token=_check_token(token)) if token is not None else Credentials()
    if not user or ":" in user:
        raise ToolError(f"an HTTP Basic user name is not empty and has no ':', unlike {user!r}", 2)
    if args.password is not None:
        password = args.password
    elif args.password_stdin:
        line = stdin.readline()
        if not line:
            raise ToolError("--password-stdin: stdin ended before a password line", 2)
        password = line.rstrip("\r\n")
    elif PASSWORD_ENV in env:
        password = env[PASSWORD_ENV]
    elif ask is None:
        raise ToolError(
            f"no password for user {user!r} and no terminal to ask it at: "
            f"use --password-stdin or {PASSWORD_ENV}",
            2,
        )
    else:
        try:
            password = ask(f"Password for {user}: ")
        except EOFError as exc:  # Ctrl-D at the prompt
            raise ToolError(f"no password typed for user {user!r}", 2) from exc
    return Credentials(user=user, password=password)


def _token_flag(args: argparse.Namespace) -> str:
    if args.token is not None:
        return str(args.token)
    try:
        with open(args.token_file, encoding="utf-8") as f:
            return f.read().strip()
    except (OSError, UnicodeError) as exc:
        raise ToolError(
            f"cannot read --token-file {args.token_file!r}: {getattr(exc, 'strerror', exc)}", 2
        ) from exc


def _check_token(token: str) -> str:
    if not token:
        raise ToolError("the token is empty", 2)
    if not all("!" <= c <= "~" for c in token):
        raise ToolError(
            "the token holds a space, a control or a non-ASCII character: no HTTP header carries it", 2
        )
    return token


def connect(args: argparse.Namespace, creds: Credentials, env: Mapping[str, str]) -> GatewayClient:
    """A client of the gateway ``args`` (or ``env``) names, with ``creds`` and the TLS files given."""
    cacert: str | None = args.cacert or env.get(CACERT_ENV) or None
    cert: str | None = args.cert or env.get(CERT_ENV) or None
    key: str | None = args.key or env.get(KEY_ENV) or None
    if cert is None and key is not None:
        raise ToolError(f"--key goes with --cert (or {CERT_ENV})", 2)
    url: str = args.url or env.get(URL_ENV) or DEFAULT_URL
    compress: str | None = getattr(args, "compress", None) or env.get(COMPRESS_ENV) or None
    if compress is not None and compress not in ("gzip", "zstd"):
        raise ToolError(f"{COMPRESS_ENV} is gzip or zstd, not {compress!r}", 2)
    try:
        return GatewayClient(
            url,
            auth=None if creds.user is None else (creds.user, creds.password or ""),
            token=creds.token,
            verify=cacert if cacert is not None else True,
            cert=None if cert is None else cert if key is None else (cert, key),
            compress=compress,
        )
    except ValueError as exc:  # a TLS file that cannot be used
        raise ToolError(str(exc), 2) from exc
