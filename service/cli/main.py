"""The ``brokergate`` command.

``brokergate serve`` runs the gateway under uvicorn (uvloop + httptools when
installed), over HTTPS with ``--tls-cert``; ``topics``, ``produce``, ``consume`` (``--share-group``:
as a consumer of a share group), ``groups``, ``share-groups``, ``acls`` and ``schemas`` are the
console tools of ``service.cli.tools``; ``users`` manages the HTTP Basic credentials file;
``worker spark`` runs a Spark batch job on an interval (``workers.spark``). Every flag falls
back to ``BROKERGATE_<FLAG>`` and then to the default in ``Settings``. Configuration mistakes
end in one line on stderr and exit status 2, never a traceback. A Ctrl-C stops ``serve`` as
SIGTERM does (drained, the backends closed) and exits 0, in silence.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from service.cli import tools
from service.settings import Settings

_SERVE_FLAGS = (
    "host",
    "port",
    "data_dir",
    "log",
    "coordinator",
    "sessions",
    "advertised_url",
    "flush",
    "auth",
    "users_file",
    "tls_cert",
    "tls_key",
    "tls_client_ca",
    "authorize",
    "super_users",
    "audit_log",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="brokergate", description="HTTP gateway to Kafka-style messaging.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the REST API")
    serve.add_argument(
        "--host",
        help="bind address (default: 0.0.0.0 with --auth; without it 127.0.0.1, this machine only)",
    )
    serve.add_argument("--port", type=int, help="port (default 8082)")
    serve.add_argument(
        "--data-dir", dest="data_dir", help="data directory of the embedded backends (default ./data)"
    )
    serve.add_argument("--log", help="embedded | kafka://host:port[,host:port...]")
    serve.add_argument("--coordinator", help="embedded | zookeeper://host:port[,...][/chroot]")
    serve.add_argument("--sessions", help="embedded | redis://host:port/db")
    serve.add_argument("--advertised-url", dest="advertised_url", help="base URL put in consumer base_uri")
    serve.add_argument("--flush", choices=["always", "interval", "never"], help="embedded log fsync policy")
    serve.add_argument(
        "--auth",
        help="how clients authenticate, comma-separated: basic (the users file), jwt (Bearer tokens of "
        "BROKERGATE_JWT_ISSUER), mtls (client certificates); default: off",
    )
    serve.add_argument("--users-file", dest="users_file", help="credentials file (default <data dir>/users)")
    serve.add_argument("--tls-cert", dest="tls_cert", help="serve HTTPS with this certificate chain (PEM)")
    serve.add_argument("--tls-key", dest="tls_key", help="the key (PEM) of --tls-cert, if apart")
    serve.add_argument(
        "--tls-client-ca", dest="tls_client_ca", help="verify client certificates against these CAs (mTLS)"
    )
    serve.add_argument(
        "--authorize",
        action="store_const",
        const=True,
        help="decide every request by the ACL bindings (brokergate acls); default: off",
    )
    serve.add_argument(
        "--super-users", dest="super_users", help="principals allowed everything, e.g. 'User:admin;User:ops'"
    )
    serve.add_argument(
        "--audit-log", dest="audit_log", help="append the audit trail (JSON lines) to this file"
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    tools.add_commands(sub, parser)  # their common options before the command too
    users = sub.add_parser("users", help="manage the HTTP Basic credentials file (AUTH=basic)")
    users.add_argument("action", choices=["add", "remove", "list"], help="add also sets a new password")
    users.add_argument("name", nargs="?", help="the user (add, remove)")
    users.add_argument(
        "--users-file", dest="users_file", help="default: BROKERGATE_USERS_FILE, or <data dir>/users"
    )
    users.add_argument("--data-dir", dest="data_dir", help="the gateway's data dir (default ./data)")
    users.add_argument(
        "--password-stdin", action="store_true", help="read the password from the first line of stdin"
    )
    worker = sub.add_parser(
        "worker",
        help="run a background worker: spark (a Spark batch job on an interval)",
        add_help=False,  # `worker spark --help` is the worker's own help
    )
    worker.add_argument("kind", choices=["spark"])
    worker.add_argument("args", nargs=argparse.REMAINDER, help="see brokergate worker spark --help")
    return parser


def _fail(message: str) -> int:
    print(f"brokergate: error: {message}", file=sys.stderr)
    return 2


def serve(args: argparse.Namespace) -> int:
    overrides = {k: getattr(args, k) for k in _SERVE_FLAGS if getattr(args, k) is not None}
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        return _fail(f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}")

    from service.server.app import create_app, server_config
    from service.server.backends import BackendNotAvailable, build_ports
    from service.server.collector import tune_collector
    from service.server.descriptors import fit_descriptors, say_descriptors
    from service.server.protocol import DrainingServer

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings, descriptors = fit_descriptors(settings)
    try:
        ports = build_ports(settings)
    except BackendNotAvailable as exc:
        return _fail(str(exc))
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail(f"cannot use data dir {str(settings.data_dir)!r}: {exc.strerror}")
    try:
        app = create_app(settings, ports)
        config = server_config(app, settings, log_level=args.log_level, loop="auto")
    except ValueError as exc:  # UsersFileError, a TLS or JWT setting that cannot be used
        return _fail(str(exc))
    say_descriptors(descriptors)
    _say_where(settings)
    tune_collector()
    try:
        DrainingServer(config, app).run()
    except KeyboardInterrupt:
        # uvicorn raises a Ctrl-C again once its shutdown (and the lifespan's) is done: the stop
        # asked for is complete, so 0, as uvicorn's own command and gunicorn answer; a 130 or a
        # death by SIGINT would have ``make run`` print "*** [run] Interrupt" (or "Error 130").
        return 0
    except OSError as exc:
        return _fail(str(exc))
    return 0


def _say_where(settings: Settings) -> None:
    """One start-up line when authentication is off: that the gateway keeps to this machine, and how
    to serve others; or, if the operator chose an address other machines reach, what that opens."""
    if settings.auth_methods:
        return
    log = logging.getLogger("brokergate")
    if settings.host is None:
        log.info(
            "authentication is off, so listening on %s only (this machine): --host 0.0.0.0 "
            "(BROKERGATE_HOST) serves other machines too, --auth makes their clients sign in",
            settings.bind_host,
        )
    elif not _loopback(settings.host):
        log.warning(
            "authentication is off and --host is %s: anyone who reaches this machine on port %d may "
            "read, write and delete every topic; --auth makes clients sign in",
            settings.host,
            settings.port,
        )


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: whatever it resolves to may be reached from elsewhere
        return False


def manage_users(args: argparse.Namespace) -> int:
    """``brokergate users add|remove|list``: edits the file a running gateway reads again by itself."""
    from service.security.users import UsersFileError, add_user, read_users, remove_user

    overrides = {k: getattr(args, k) for k in ("users_file", "data_dir") if getattr(args, k) is not None}
    path = Settings(**overrides).users_path
    try:
        if args.action == "list":
            for name in sorted(read_users(path)):
                print(name)
            return 0
        if not args.name:
            return _fail(f"users {args.action} needs a user name")
        if args.action == "remove":
            if not remove_user(path, args.name):
                return _fail(f"no user {args.name!r} in {str(path)!r}")
            print(f"removed {args.name}")
            return 0
        password = _password(args.password_stdin)
        new = add_user(path, args.name, password)
        print(f"{'added' if new else 'changed the password of'} {args.name}")
        return 0
    except UsersFileError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot use {str(path)!r}: {exc.strerror}")


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    import getpass

    first = getpass.getpass("Password: ")
    if first != getpass.getpass("Again: "):
        raise SystemExit(_fail("the passwords differ"))
    return first


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        try:
            return serve(args)
        except KeyboardInterrupt:  # a Ctrl-C before the server took the signals: nothing to stop
            return 130
    if args.command == "users":
        return manage_users(args)
    if args.command == "worker":
        from workers.spark import main as spark_worker

        return spark_worker(args.args)
    return tools.run(args)


if __name__ == "__main__":
    sys.exit(main())
