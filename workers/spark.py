"""``brokergate worker spark``: run one of the Spark batch jobs on an interval.

    brokergate worker spark --job export --every 15m --log ./data --topic orders --output ./exports/orders

Options the worker does not know are the job's (``python -m spark_jobs <job> --help``).
Each run is a child process, ``python -m spark_jobs <job> …`` in a process
group of its own (its JVM and Python workers included), whose output goes to
the worker's; the worker logs when a run starts, and how it ended and how long
it took.

Runs never overlap: one worker runs one job at a time, a run that overruns
the interval delays the next (the missed ticks are skipped, and logged), and
a lock file keeps a second worker for the same job from starting at all
(``_brokergate/worker-<job>.lock`` in the job's ``--output``, else one in the
temp directory per job and arguments). The jobs lock their outputs
themselves too, so a run started by hand meanwhile is refused by whichever
comes second; the worker logs that run as skipped.

SIGTERM (or SIGINT) stops the worker: no new run starts, and a run in progress
is sent SIGTERM (the export's commit protocol makes that safe: the next run
completes or discards what it left) and, if its process group is still there
after ``--stop-timeout``, SIGKILL. The worker exits 0 once the child is gone.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Final

from spark_jobs.lock import EXIT_BUSY, Busy, exclusive
from spark_jobs.timespec import parse_duration

log = logging.getLogger("brokergate.worker.spark")

JOBS: Final = ("export", "lag", "stats")
DEFAULT_STOP_TIMEOUT_S: Final = 30.0
_POLL_S: Final = 0.2
_REAP_GRACE_S: Final = 10.0
_EXIT_NOT_STARTED: Final = 127  # as a shell reports a command it cannot run


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How one run ended."""

    number: int
    returncode: int
    duration_s: float
    stopped: bool  # the worker was stopping and ended it

    def describe(self, job: str) -> str:
        took = f"{self.duration_s:.1f}s"
        if self.returncode == 0:
            return f"{job} run {self.number} succeeded in {took}"
        if self.stopped:
            return f"{job} run {self.number} ended by the worker's stop after {took}"
        if self.returncode == EXIT_BUSY:
            return f"{job} run {self.number} skipped after {took}: another run of the job holds its lock"
        return f"{job} run {self.number} failed with exit status {self.returncode} after {took}"


def lock_path_for(job: str, job_args: Sequence[str]) -> Path:
    """Where a worker for ``job`` with ``job_args`` locks: beside the job's output when it has one."""
    output = option_value(job_args, "--output")
    if output is not None:
        return Path(output) / "_brokergate" / f"worker-{job}.lock"
    digest = hashlib.sha256("\0".join([job, *job_args]).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"brokergate-worker-{job}-{digest}.lock"


def option_value(args: Sequence[str], name: str) -> str | None:
    """The value of ``name`` in ``args`` (``--name v`` or ``--name=v``; the last one wins)."""
    found = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(name + "="):
            found = arg[len(name) + 1 :]
    return found


class SparkJobScheduler:
    """Starts ``python -m spark_jobs <job>`` every ``every_s`` seconds, one run at a time.

    ``run()`` blocks until ``stop()`` (which a signal handler may call) and
    returns the worker's exit status.
    """

    def __init__(
        self,
        job: str,
        job_args: Sequence[str],
        every_s: float,
        *,
        stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S,
        lock_path: Path | None = None,
        python: str = sys.executable,
    ) -> None:
        self.job = job
        self.job_args = list(job_args)
        self.every_s = every_s
        self.stop_timeout_s = stop_timeout_s
        self.lock_path = lock_path or lock_path_for(job, job_args)
        self.python = python
        self.runs = 0
        self._stop_requested_at: float | None = None

    def command(self) -> list[str]:
        return [self.python, "-m", "spark_jobs", self.job, *self.job_args]

    def run(self) -> int:
        try:
            with exclusive(self.lock_path, f"a worker for the {self.job} job"):
                log.info(
                    "running the %s job every %s (stop timeout %.0fs, lock %s)",
                    self.job,
                    _human(self.every_s),
                    self.stop_timeout_s,
                    self.lock_path,
                )
                self._loop()
        except Busy as exc:
            log.error("%s; not starting a second one", exc)
            return EXIT_BUSY
        log.info("stopped after %d run(s)", self.runs)
        return 0

    def _loop(self) -> None:
        next_start = time.monotonic()
        while not self.stopping:
            # Short sleeps rather than an Event: stop() runs in a signal handler, where taking a
            # lock the interrupted code may hold would deadlock.
            while not self.stopping and (delay := next_start - time.monotonic()) > 0:
                time.sleep(min(delay, _POLL_S))
            if self.stopping:
                break
            started = time.monotonic()
            log.info(self.run_once().describe(self.job))
            next_start = started + self.every_s
            now = time.monotonic()
            if next_start < now:
                missed = int((now - next_start) // self.every_s) + 1
                log.warning(
                    "%s run %d took longer than the interval (%s); skipping %d start(s), next run now",
                    self.job,
                    self.runs,
                    _human(self.every_s),
                    missed,
                )
                next_start = now

    def run_once(self) -> RunOutcome:
        """Run the job once, to its end (or until the worker's stop ends it)."""
        self.runs += 1
        number = self.runs
        started = time.monotonic()
        try:
            child = subprocess.Popen(self.command(), start_new_session=True)
        except OSError as exc:
            log.error("%s run %d could not start %s: %s", self.job, number, self.python, exc)
            return RunOutcome(number, _EXIT_NOT_STARTED, time.monotonic() - started, self.stopping)
        log.info("%s run %d started (pid %d): %s", self.job, number, child.pid, " ".join(self.command()))
        returncode = self._wait(child)
        self._wait_group(child.pid)
        return RunOutcome(number, returncode, time.monotonic() - started, self._stop_requested_at is not None)

    def _wait(self, child: subprocess.Popen[bytes]) -> int:
        """The child's exit status; once a stop is asked, SIGTERM it, and SIGKILL it after the timeout."""
        terminated = killed = False
        while True:
            try:
                return child.wait(_POLL_S)
            except subprocess.TimeoutExpired:
                pass
            asked = self._stop_requested_at
            if asked is None:
                continue
            if not terminated:
                _signal_group(child, signal.SIGTERM)
                terminated = True
            if not killed and time.monotonic() - asked > self.stop_timeout_s:
                log.warning(
                    "%s run %d still running %.0fs after SIGTERM; killing it",
                    self.job,
                    self.runs,
                    self.stop_timeout_s,
                )
                _signal_group(child, signal.SIGKILL)
                killed = True

    def _wait_group(self, pgid: int) -> None:
        """Wait for the rest of the run's process group (the JVM exits after its driver), within the
        stop timeout; then SIGKILL what is left."""
        asked = self._stop_requested_at
        deadline = (asked if asked is not None else time.monotonic()) + self.stop_timeout_s
        killed_at: float | None = None
        while _group_alive(pgid):
            now = time.monotonic()
            if killed_at is None and now > deadline:
                log.warning("%s run %d left processes behind; killing them", self.job, self.runs)
                _signal_group_id(pgid, signal.SIGKILL)
                killed_at = now
            elif killed_at is not None and now - killed_at > _REAP_GRACE_S:
                # Killed yet still listed: unreaped zombies or a process stuck in the kernel.
                log.error(
                    "%s run %d: process group %d outlived SIGKILL; leaving it", self.job, self.runs, pgid
                )
                return
            time.sleep(_POLL_S / 2)

    @property
    def stopping(self) -> bool:
        return self._stop_requested_at is not None

    def stop(self) -> None:
        """Start no new run; the one in progress gets SIGTERM at once and SIGKILL after the timeout.

        Safe to call from a signal handler: it only sets flags (the waiting loop does the rest).
        """
        if self._stop_requested_at is None:
            self._stop_requested_at = time.monotonic()


def _signal_group(child: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Signal the run's process group: the driver, its JVM and the Python workers the JVM started."""
    _signal_group_id(child.pid, sig)


def _signal_group_id(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we cannot signal is still a member
        return True
    return True


def _human(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:g}s"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="brokergate worker spark",
        allow_abbrev=False,  # --log is the job's option, not an abbreviation of --log-level
        description="Run a Spark batch job on an interval. Options not listed here are passed to "
        "the job: see python -m spark_jobs <job> --help.",
    )
    p.add_argument("--job", required=True, choices=JOBS, help="the job to run")
    p.add_argument("--every", required=True, help="interval between run starts, e.g. 30s, 15m, 1h, 1h30m")
    p.add_argument(
        "--stop-timeout",
        default=f"{DEFAULT_STOP_TIMEOUT_S:g}s",
        help="on SIGTERM, how long a running job may take to exit before it is killed (default 30s)",
    )
    p.add_argument("--lock-file", type=Path, help="the lock that keeps two workers of this job apart")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def main(argv: Sequence[str]) -> int:
    """``brokergate worker spark …``: returns the exit status."""
    args, job_args = parser().parse_known_args(list(argv))
    try:
        every = parse_duration(args.every)
        stop_timeout = parse_duration(args.stop_timeout)
    except ValueError as exc:
        print(f"brokergate: error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    scheduler = SparkJobScheduler(
        args.job, job_args, every, stop_timeout_s=stop_timeout, lock_path=args.lock_file
    )

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("%s received: stopping", signal.Signals(signum).name)
        scheduler.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return scheduler.run()
