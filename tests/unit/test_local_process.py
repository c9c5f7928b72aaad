"""``ServerProcess.pause()`` returns a server that is frozen, not one that is about to be.

The tests that freeze a broker send a request right after ``pause()`` and expect no answer.
A SIGSTOP is taken by one thread of the process, which then stops the others, so a process of
many busy threads goes on running for a while after ``kill`` has returned.
"""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

from deploy.local.process import ServerProcess, stopped

# An echo server on a port, beside twenty threads that wake every half millisecond (as a JVM's).
SERVER = """
import socket, sys, threading, time

def busy():
    while True:
        time.sleep(0.0005)

for _ in range(20):
    threading.Thread(target=busy, daemon=True).start()

server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
while True:
    conn, _ = server.accept()
    def echo(conn=conn):
        with conn:
            while data := conn.recv(100):
                conn.sendall(data)
    threading.Thread(target=echo, daemon=True).start()
"""


class Echo(ServerProcess):
    name = "echo"

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.log_path = directory / "echo.log"

    def command(self) -> list[str]:
        return [sys.executable, "-c", SERVER, str(self.port)]

    def _probe(self, timeout: float) -> None:
        socket.create_connection(("127.0.0.1", self.port), timeout).close()


def test_every_thread_is_stopped_when_pause_returns(tmp_path: Path) -> None:
    with Echo(tmp_path) as server:
        assert server.pid is not None
        for _ in range(50):
            server.pause()
            assert stopped(server.pid)
            server.resume()
            time.sleep(0.01)  # its threads busy again
        assert not stopped(server.pid)


def test_a_paused_server_answers_nothing_until_resumed(tmp_path: Path) -> None:
    with Echo(tmp_path) as server, socket.create_connection(("127.0.0.1", server.port), 5) as conn:
        conn.sendall(b"up")
        assert conn.recv(100) == b"up"
        server.pause()
        conn.sendall(b"frozen?")
        conn.settimeout(0.3)
        try:
            answered = conn.recv(100)
        except TimeoutError:
            answered = b""
        assert answered == b""
        server.resume()
        conn.settimeout(5)
        assert conn.recv(100) == b"frozen?"


def test_pausing_a_server_that_is_not_running_does_nothing(tmp_path: Path) -> None:
    server = Echo(tmp_path)
    server.pause()  # never started
    server.resume()
