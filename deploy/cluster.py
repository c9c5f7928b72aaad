"""Run a stateless brokergate cluster on this machine's loopback, for demos and tests.

    python deploy/cluster.py up [--replicas 3] [--dir ./cluster] [--port 8082]
                                [--kafka HOST:PORT] [--zookeeper HOST:PORT[/chroot]] [--redis URL]
                                [-e BROKERGATE_NAME=value ...] [--no-restart] [--secure]
    python deploy/cluster.py status [--dir ./cluster]
    python deploy/cluster.py down   [--dir ./cluster]

``up`` starts an Apache Kafka broker (from the jars ``make jars`` resolves, unless
``--kafka`` names a broker), ZooKeeper and Redis (unless named), the replicas, and nginx
balancing round-robin over them on ``--port``; it prints the URLs, writes
``DIR/cluster.json``, and runs until Ctrl-C or SIGTERM, restarting any replica that dies
(unless ``--no-restart``). Then it stops everything, in reverse order. ``down`` stops the
``up`` of a directory from another terminal, and kills whatever a killed ``up`` left.
Replicas inherit the environment, so ``BROKERGATE_*`` variables set before ``up`` apply
to all of them, as do ``-e`` options. ``--secure`` serves HTTPS (a test CA's certificate),
requires HTTP Basic credentials and enforces ACLs, with ``admin`` the super user; ``up``
prints where the CA certificate and admin's password are.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deploy.local.cluster import STATE_FILE, ClusterSpec, LocalCluster, StartCancelled
from deploy.local.process import alive, kill_group

SUPERVISE_EVERY_S = 0.5
OWNER_STOP_TIMEOUT_S = 90
LEFTOVER_STOP_TIMEOUT_S = 15


def _env_option(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.startswith("BROKERGATE_"):
        raise argparse.ArgumentTypeError(f"expected BROKERGATE_NAME=value, got {text!r}")
    return name, value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deploy/cluster.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a cluster and keep it up until Ctrl-C / SIGTERM")
    up.add_argument("--replicas", type=int, default=3, help="gateway replicas (default 3)")
    up.add_argument("--port", type=int, default=8082, help="the balancer's port; 0 picks a free one")
    up.add_argument(
        "--kafka", metavar="HOST:PORT", help="an existing Kafka broker (default: start Apache Kafka)"
    )
    up.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]", help="an existing ZooKeeper")
    up.add_argument("--redis", metavar="redis://HOST:PORT/DB", help="an existing Redis")
    up.add_argument(
        "-e", "--env", type=_env_option, action="append", default=[], metavar="BROKERGATE_NAME=value"
    )
    up.add_argument("--no-restart", action="store_true", help="leave a replica that died dead")
    up.add_argument(
        "--secure", action="store_true", help="HTTPS, HTTP Basic authentication and ACLs (admin: super user)"
    )
    up.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    for command in (up, sub.add_parser("status", help="print the state of a running cluster")):
        command.add_argument("--dir", type=Path, default=Path("cluster"), help="(default ./cluster)")
    down = sub.add_parser("down", help="stop the cluster of a directory")
    down.add_argument("--dir", type=Path, default=Path("cluster"), help="(default ./cluster)")
    return parser


def _read_state(workdir: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads((workdir / STATE_FILE).read_text()))
    except FileNotFoundError:
        return None


def _processes(state: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every process a state names, owner last: (label, {"pid", "start_ticks", ...})."""
    found = [(f"replica {r['node_id']}", r) for r in state.get("replicas", [])]
    if state.get("balancer"):
        found.append(("balancer", state["balancer"]))
    found += [(name, state[name]) for name in ("redis", "zookeeper", "kafka") if state.get(name)]
    return [(label, p) for label, p in found if p.get("pid")]


def _print_up(cluster: LocalCluster) -> None:
    state = cluster.state()
    balancing = "nginx, round-robin" + (", HTTPS to the replicas" if cluster.security else "")
    rows = [("balancer", cluster.url, balancing)]
    rows += [
        (f"replica {n}", r["url"], f"{r['node_id']}, log {r['log']}")
        for n, r in enumerate(state["replicas"], 1)
    ]
    rows.append(("kafka", state["kafka"]["url"], "Apache Kafka, KRaft" if cluster.broker else "existing"))
    rows.append(("zookeeper", state["zookeeper"]["url"], "" if cluster.zookeeper else "existing"))
    redis_note = "append-only file" if cluster.redis and cluster.redis.appendonly else ""
    rows.append(("redis", state["redis"]["url"], redis_note if cluster.redis else "existing"))
    print(f"brokergate cluster with {len(cluster.replicas)} replicas in {cluster.workdir}")
    for label, url, note in rows:
        print(f"  {label:<10} {url:<42} {note}")
    if cluster.security is not None:
        security = state["security"]
        print(f"  sign in    {security['super_user']:<42} password in {security['password_file']}")
        print(f"  trust      {security['ca']}")
    print(f"  state      {cluster.state_path}")
    print("Ctrl-C (or `deploy/cluster.py down`) stops everything.", flush=True)


def up(args: argparse.Namespace) -> int:
    previous = _read_state(args.dir)
    if previous and alive(previous["owner"]["pid"], previous["owner"]["start_ticks"]):
        print(f"a cluster already runs in {args.dir} (pid {previous['owner']['pid']}); stop it first")
        return 1
    spec = ClusterSpec(
        workdir=args.dir,
        replicas=args.replicas,
        port=args.port or None,
        kafka=args.kafka,
        zookeeper=args.zookeeper,
        redis=args.redis,
        env=dict(args.env),
        log_level=args.log_level,
        secure=args.secure,
    )
    stop_asked = False

    def ask_stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stop_asked
        stop_asked = True  # only a flag: the main loop stops things, never a signal handler

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, ask_stop)
    cluster = LocalCluster(spec)
    try:
        cluster.start(cancelled=lambda: stop_asked)
    except StartCancelled:
        print("stopped while starting")
        return 0
    except RuntimeError as exc:
        print(f"the cluster did not start: {exc}", file=sys.stderr)
        return 1
    try:
        _print_up(cluster)
        while not stop_asked:
            time.sleep(SUPERVISE_EVERY_S)
            for event in cluster.supervise(restart_replicas=not args.no_restart):
                print(event, flush=True)
    finally:
        print("stopping…", flush=True)
        problems = cluster.stop()
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
    print("stopped")
    return 1 if problems else 0


def status(args: argparse.Namespace) -> int:
    state = _read_state(args.dir)
    if state is None:
        print(f"no cluster in {args.dir}")
        return 1
    print(json.dumps(state, indent=2))
    dead = [label for label, p in _processes(state) if not alive(p["pid"], p["start_ticks"])]
    if dead:
        print(f"not running: {', '.join(dead)}")
    return 1 if dead else 0


def down(args: argparse.Namespace) -> int:
    state = _read_state(args.dir)
    if state is None:
        print(f"no cluster in {args.dir}")
        return 0
    owner = state["owner"]
    if alive(owner["pid"], owner["start_ticks"]):
        os.kill(owner["pid"], signal.SIGTERM)
        deadline = time.monotonic() + OWNER_STOP_TIMEOUT_S
        while alive(owner["pid"], owner["start_ticks"]) and time.monotonic() < deadline:
            time.sleep(0.1)
    # What an owner that was killed (or hung) left behind: each server leads its own group.
    # SIGTERM first (Redis then writes its append-only file out), SIGKILL what is left.
    leftovers = [(label, p) for label, p in _processes(state) if alive(p["pid"], p["start_ticks"])]
    for label, proc in leftovers:
        print(f"stopping leftover {label} (pid {proc['pid']})")
        _signal_group(proc["pid"], signal.SIGTERM)
    deadline = time.monotonic() + LEFTOVER_STOP_TIMEOUT_S
    while time.monotonic() < deadline and any(alive(p["pid"], p["start_ticks"]) for _, p in leftovers):
        time.sleep(0.1)
    for _, proc in leftovers:
        if alive(proc["pid"], proc["start_ticks"]):
            kill_group(proc["pid"])
    if alive(owner["pid"], owner["start_ticks"]):
        os.kill(owner["pid"], signal.SIGKILL)
    (args.dir / STATE_FILE).unlink(missing_ok=True)
    print("stopped")
    return 0


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # The readiness probes' refused connections are expected while servers start.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    return int({"up": up, "status": status, "down": down}[args.command](args))


if __name__ == "__main__":
    sys.exit(main())
