"""What every runner of ``deploy.local`` shares: free loopback ports and stopping a process for good.

Each server is started in a session of its own, so a Ctrl-C in the terminal reaches only
the program that owns it (pytest, or the cluster script), which then stops the servers in
order. The other side of that choice is that nothing stops them by itself: whoever starts
one must stop it, and ``stop_process`` is the one way they all end (polite signal, a grace
period, then SIGKILL to the whole process group, which also takes nginx's workers).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
    except OSError:
        return False
    return True


def stop_process(
    proc: subprocess.Popen[bytes], *, sig: int = signal.SIGTERM, timeout: float = 15.0
) -> int | None:
    """Send ``sig``, wait up to ``timeout`` s, then SIGKILL its process group; returns the exit status."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGCONT)  # a SIGSTOPped process cannot act on anything else
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            proc.wait(10)
    # Children it left behind (it led its own group): nothing of it may outlive it.
    kill_group(proc.pid)
    return proc.returncode


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


def tail(path: Path, lines: int = 60) -> str:
    """The last ``lines`` lines of a log file, or a note that there is none."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class ServerProcess:
    """What the ZooKeeper and Redis runners share: one child process, its log file, waiting
    for it to be ready, and the stop / restart / freeze / thaw controls tests use. A subclass
    sets ``name``, ``base_dir``, ``log_path`` and ``port``, starts the child with ``_launch``
    and says what "ready" means in ``_probe``; it may change how long a restart waits
    (``restart_timeout``) and how often readiness is asked (``probe_interval``)."""

    name: str
    base_dir: Path
    log_path: Path
    port: int
    restart_timeout: float = 60.0
    probe_interval: float = 0.1

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self, timeout: float) -> None:
        raise NotImplementedError

    def _probe(self) -> None:
        """Return when the server answers a real request; raise while it does not."""
        raise NotImplementedError

    def _launch(self, command: list[str], timeout: float) -> None:
        """Spawn ``command`` in its own session, logging to ``log_path``; return once ``_probe``
        passes, or kill it and raise with the tail of its log."""
        self._log = self.log_path.open("ab")
        self._proc = subprocess.Popen(
            command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.base_dir,
            start_new_session=True,  # a Ctrl-C reaches the owner, which stops the server in its turn
        )
        try:
            self._wait_ready(timeout)
        except BaseException:
            self._kill()
            raise

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with status {self._proc.returncode} on start:\n{self.log_tail()}"
                )
            try:
                self._probe()
                return
            except Exception as exc:
                last_error = exc
                time.sleep(self.probe_interval)
        raise RuntimeError(
            f"{self.name} on 127.0.0.1:{self.port} not ready after {timeout:.0f}s ({last_error!r}):\n"
            f"{self.log_tail()}"
        )

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL); its files stay."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self.resume()  # a stopped process cannot act on SIGTERM
            self._proc.terminate()
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill()
        self._close()

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._close()

    def _close(self) -> None:
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self, timeout: float | None = None) -> None:
        """Stop, then start again on the same port and files."""
        self.stop()
        self.start(self.restart_timeout if timeout is None else timeout)

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections stay open but nothing answers."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGCONT)

    def __enter__(self) -> Self:
        self.start(self.restart_timeout)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
