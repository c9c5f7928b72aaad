"""What every runner of ``deploy.local`` shares: free loopback ports, and ``ServerProcess``.

Each server is started in a session of its own, so a Ctrl-C in the terminal reaches only
the program that owns it (pytest, or the cluster script), which then stops the servers in
order. The other side of that choice is that nothing stops them by itself: whoever starts
one must stop it, and ``ServerProcess`` ends them all the same way (a signal, a grace
period, then SIGKILL to the whole process group, which also takes nginx's workers).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Self


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kill_group(pgid: int) -> None:
    """SIGKILL every process of group ``pgid``; a group that is gone already is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stat(pid: int) -> list[str] | None:
    """Fields 3… of /proc/PID/stat (after the command name, which may hold spaces), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None if no such process (or no /proc).

    Saved next to a pid, it tells the process apart from a later one that reused the number.
    """
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def alive(pid: int, ticks: int | None) -> bool:
    """Whether the process ``pid`` that started at ``ticks`` (from ``start_ticks``) still runs."""
    fields = _stat(pid)
    if fields is None or fields[0] == "Z":  # a zombie has exited; only its parent's wait is missing
        return False
    return ticks is None or int(fields[19]) == ticks


def stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (or gone), as /proc/PID/task/*/stat tells."""
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # the thread ended as we looked
        if state not in "tTXZ":
            return False
    return True


def read_log(path: Path, lines: int | None = None) -> str:
    """A log file: all of it, or its last ``lines`` lines; a note if there is none."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return text if lines is None else "\n".join(text.splitlines()[-lines:])


class ServerProcess:
    """One server child process on a loopback port, its output in ``log_path``, and the
    start / stop / restart / freeze / thaw controls the cluster and the tests use.

    A subclass says what is its own: ``command()``, what "ready" means (``_probe``), what
    must be on disk first (``_prepare``), and its ``name`` for error messages. It may change
    how long a start waits (``start_timeout``), how long a stop waits before SIGKILL
    (``stop_timeout``), how long one readiness probe may take (``probe_timeout``) and how
    often one is tried (``probe_interval``), and where and how the child runs (``cwd``,
    ``env``, ``new_session``).
    """

    name: str
    log_path: Path
    start_timeout: float = 30.0
    stop_timeout: float = 10.0
    probe_timeout: float = 1.0
    probe_interval: float = 0.05
    cwd: Path | None = None
    env: Mapping[str, str] | None = None
    new_session: bool = True  # its own process group: a Ctrl-C reaches the owner, which stops it

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._ended = False  # stopped or killed, and its process group taken with it

    def command(self) -> list[str]:
        """The command line that starts the server."""
        raise NotImplementedError

    def _probe(self, timeout: float) -> None:
        """Return when the server answers a real request within ``timeout`` s; raise while it does not."""
        raise NotImplementedError

    def _prepare(self) -> None:
        """Put what the server needs on disk before each start (a config file, directories)."""

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float | None = None) -> Self:
        """Start the server and return once it is ready; raise with the tail of its log if not."""
        if self.running:
            return self
        self.spawn()
        return self.wait_ready(timeout)

    def spawn(self) -> None:
        """Start the process without waiting (several servers then start side by side)."""
        command = self.command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._prepare()
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                env=self.env,
                start_new_session=self.new_session,
            )
        self._ended = False

    def wait_ready(self, timeout: float | None = None) -> Self:
        """Return once ``_probe`` passes; kill the process and raise with the tail of its log if it
        exits first or is not ready within ``timeout`` s (``start_timeout`` by default)."""
        assert self.proc is not None, "spawn() first"
        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"{self.name} exited with status {self.proc.returncode} on start:\n{self.output(100)}"
                    )
                try:
                    self._probe(max(min(self.probe_timeout, deadline - time.monotonic()), 0.1))
                    return self
                except Exception as exc:  # not listening yet, or not answering yet
                    last_error = exc
                    time.sleep(self.probe_interval)
            raise RuntimeError(
                f"{self.name} on 127.0.0.1:{self.port} not ready after {timeout:g}s ({last_error!r}):\n"
                f"{self.output(100)}"
            )
        except BaseException:
            self.kill()
            raise

    def ready(self, timeout: float | None = None) -> bool:
        """Whether the server answers now, as ``start()`` waits for it to."""
        try:
            self._probe(self.probe_timeout if timeout is None else timeout)
        except Exception:
            return False
        return True

    def output(self, lines: int | None = None) -> str:
        """The server's log: all of it, or its last ``lines`` lines."""
        return read_log(self.log_path, lines)

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM (a paused server is woken first), up to ``timeout`` s (``stop_timeout`` by
        default) to exit, then SIGKILL to its process group; its files stay."""
        self._end(signal.SIGTERM, self.stop_timeout if timeout is None else timeout)

    def kill(self) -> None:
        """kill -9 (and the rest of its process group): no goodbye to anyone, as a crash or an OOM kill."""
        self._end(signal.SIGKILL, 10.0)

    def terminate(self) -> None:
        """SIGTERM without waiting: several servers then shut down side by side before ``stop()``."""
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.terminate()

    def _end(self, sig: int, timeout: float) -> None:
        """Send ``sig``, wait up to ``timeout`` s, then SIGKILL the process group, once per start."""
        proc = self.proc
        if proc is None or self._ended:
            return
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGCONT)  # a SIGSTOPped process cannot act on anything else
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_all(proc)
                proc.wait(10)
        if self.new_session:  # children it left behind in its group: nothing of it may outlive it
            kill_group(proc.pid)
        self._ended = True

    def _kill_all(self, proc: subprocess.Popen[bytes]) -> None:
        if self.new_session:
            kill_group(proc.pid)
        else:  # it shares its owner's group: only the process itself
            proc.kill()

    def restart(self, timeout: float | None = None) -> Self:
        """Stop, then start again on the same port and files."""
        self.stop()
        return self.start(timeout)

    def pause(self, timeout: float = 10.0) -> None:
        """Freeze the server (SIGSTOP): connections stay open but nothing answers.

        Returns once every thread has stopped. A SIGSTOP is taken by one thread, which then
        stops the others, so ``kill`` returns while the rest still run: on a busy machine a
        JVM's threads went on for tens of milliseconds, long enough to answer a request sent
        after the signal.
        """
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while not stopped(self.proc.pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} (pid {self.proc.pid}) still runs {timeout:g}s after SIGSTOP")
            time.sleep(0.001)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
