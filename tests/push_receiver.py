"""A real HTTP receiver of push requests for the tests: uvicorn on a free loopback port.

Each request is kept (headers, raw body, parsed body, when it came) and answered by the
receiver's ``answer``: a function of the request's number (from 1) and the request itself,
giving a status, headers, and how long to wait before answering (None: never answer).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from deploy.local.process import free_port


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def records(self) -> list[dict[str, Any]]:
        return list(self.json["records"])


Answer = tuple[int, dict[str, str], float | None]
Answerer = Callable[[int, Received], Answer]


def ok(n: int, r: Received) -> Answer:
    return 204, {}, 0.0


@dataclass
class Receiver:
    answer: Answerer = ok
    received: list[Received] = field(default_factory=list)
    port: int = 0
    _server: uvicorn.Server | None = None
    _task: asyncio.Task[None] | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the sender went mid-request (a killed replica): nothing was delivered
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        got = Received(headers, body, time.monotonic())
        self.received.append(got)
        self._arrived.set()
        status, extra, delay = self.answer(len(self.received), got)
        if delay is None:
            await asyncio.Event().wait()  # never answers (until the connection goes)
        if delay:
            await asyncio.sleep(delay)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode(), v.encode()) for k, v in extra.items()],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    async def start(self, certfile: str | None = None) -> Receiver:
        """Serve on a free port; over HTTPS with ``certfile`` (its key and chain, PEM)."""
        self.port = free_port()
        config = uvicorn.Config(
            self, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off", ssl_certfile=certfile
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            self._server.force_exit = True
            await self._task

    def records(self) -> list[dict[str, Any]]:
        """Every record received, in order of arrival (a record sent twice is here twice)."""
        return [rec for r in self.received for rec in r.records]

    async def wait_for(self, count: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        """The records received, once there are at least ``count``; fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        while len(self.records()) < count:
            left = deadline - time.monotonic()
            assert left > 0, f"{len(self.records())} records received of {count} within {timeout} s"
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), min(left, 0.5))
            except TimeoutError:
                pass
        return self.records()
