"""The ``brokergate`` command.

``brokergate serve`` runs the gateway under uvicorn (uvloop + httptools when
installed); ``topics``, ``produce``, ``consume`` and ``groups`` are the
console tools of ``service.tools``; ``worker spark`` runs a Spark batch job on an interval
(``workers.spark``). Every flag falls back to ``BROKERGATE_<FLAG>`` and then to the
default in ``Settings``. Configuration mistakes end in one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from . import tools
from .settings import Settings

_SERVE_FLAGS = ("host", "port", "data_dir", "log", "coordinator", "sessions", "advertised_url", "flush")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="brokergate", description="HTTP gateway to Kafka-style messaging.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the REST API")
    serve.add_argument("--host", help="bind address (default 0.0.0.0)")
    serve.add_argument("--port", type=int, help="port (default 8082)")
    serve.add_argument(
        "--data-dir", dest="data_dir", help="data directory of the embedded backends (default ./data)"
    )
    serve.add_argument("--log", help="embedded | kafka://host:port[,host:port...]")
    serve.add_argument("--coordinator", help="embedded | zookeeper://host:port[,...][/chroot]")
    serve.add_argument("--sessions", help="embedded | redis://host:port/db")
    serve.add_argument("--advertised-url", dest="advertised_url", help="base URL put in consumer base_uri")
    serve.add_argument("--flush", choices=["always", "interval", "never"], help="embedded log fsync policy")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    tools.add_commands(sub)
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

    from .adapters.factory import BackendNotAvailable, build_ports
    from .app import create_app
    from .server import DrainingServer, raise_fd_limit, server_config

    try:
        ports = build_ports(settings)
    except BackendNotAvailable as exc:
        return _fail(str(exc))
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail(f"cannot use data dir {str(settings.data_dir)!r}: {exc.strerror}")
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    before, after = raise_fd_limit()
    if after < settings.max_connections + 256:
        logging.getLogger("brokergate").warning(
            "ulimit -n is %d (raised from %d): too few for max_connections=%d and the partitions' files",
            after,
            before,
            settings.max_connections,
        )
    app = create_app(settings, ports)
    config = server_config(app, settings, log_level=args.log_level, loop="auto")
    try:
        DrainingServer(config, app).run()
    except OSError as exc:
        return _fail(str(exc))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    if args.command == "worker":
        from workers.spark import main as spark_worker

        return spark_worker(args.args)
    return tools.run(args)


if __name__ == "__main__":
    sys.exit(main())
