"""Clients of the gateway's push streams for the tests: Server-Sent Events read as a browser's
``EventSource`` reads them, and the WebSocket protocol's messages."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import websockets
from websockets.asyncio.client import ClientConnection

EVENT_STREAM = "text/event-stream"


@dataclass
class Event:
    event: str
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


@dataclass
class EventReader:
    """The events of a ``text/event-stream`` response, as the SSE specification parses them:
    ``last_event_id`` is what ``EventSource`` would send as ``Last-Event-ID`` on a reconnect."""

    response: httpx.Response
    last_event_id: str = ""
    comments: list[str] = field(default_factory=list)
    ended: bool = False

    def __post_init__(self) -> None:
        self._lines = _event_stream_lines(self.response)

    async def next(self, timeout: float = 10) -> Event:
        """The next event dispatched (an ``id:`` alone dispatches none); ``EOFError`` at the end."""
        async with asyncio.timeout(timeout):
            kind, data = "message", []
            async for line in self._lines:
                if line == "":
                    if data:
                        return Event(kind, "\n".join(data))
                    kind = "message"
                    continue
                if line.startswith(":"):
                    self.comments.append(line[1:].strip())
                    continue
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "event":
                    kind = value
                elif name == "data":
                    data.append(value)
                elif name == "id":
                    self.last_event_id = value
            self.ended = True
            raise EOFError("the stream ended")

    async def records(self, count: int, timeout: float = 15) -> list[dict[str, Any]]:
        """The records of ``records`` events until ``count`` came (other events fail the test)."""
        got: list[dict[str, Any]] = []
        async with asyncio.timeout(timeout):
            while len(got) < count:
                event = await self.next(timeout)
                assert event.event == "records", event
                got.extend(event.json())
        return got


async def _event_stream_lines(response: httpx.Response) -> AsyncIterator[str]:
    """The lines of an event stream as SSE ends them: at CR, LF or CRLF only (httpx's
    ``aiter_lines`` ends them at U+001C-U+001E and U+0085 too, which JSON leaves unescaped)."""
    pending = ""
    async for text in response.aiter_text():
        pending += text
        cut = len(pending) - pending.endswith("\r")  # a CR's LF may be in the next chunk
        *lines, rest = re.split(r"\r\n|\r|\n", pending[:cut])
        pending = rest + pending[cut:]
        for line in lines:
            yield line
    if pending:
        yield pending.removesuffix("\r")


@asynccontextmanager
async def events(
    client: httpx.AsyncClient, url: str, *, last_event_id: str | None = None, **params: Any
) -> AsyncIterator[EventReader]:
    """A stream of ``url`` with ``Accept: text/event-stream`` (and ``Last-Event-ID``, if given), on a
    connection of its own to ``client``'s gateway with its credentials: leaving the block closes
    it, as a browser closes an ``EventSource``. (httpx would keep a pooled connection whose
    response was left unread busy until the next event.)"""
    headers = {"Accept": EVENT_STREAM}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    async with (
        httpx.AsyncClient(base_url=client.base_url, auth=client.auth, timeout=30) as own,
        own.stream("GET", url, params=params, headers=headers) as response,
    ):
        assert response.status_code == 200, (await response.aread()).decode()
        assert response.headers["content-type"].startswith(EVENT_STREAM)
        yield EventReader(response)


def socket_url(base_uri: str, **query: str) -> str:
    """The WebSocket URL of a consumer instance's stream, from its ``base_uri``."""
    url = base_uri.replace("http", "ws", 1) + "/records"
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


async def receive(ws: ClientConnection, kind: str | None = None, timeout: float = 10) -> dict[str, Any]:
    """The next message (of type ``kind``: any other fails the test)."""
    async with asyncio.timeout(timeout):
        message: dict[str, Any] = json.loads(await ws.recv())
    assert message["v"] == 1
    if kind is not None:
        assert message["type"] == kind, message
    return message


async def send(ws: ClientConnection, kind: str, **fields: Any) -> None:
    await ws.send(json.dumps({"v": 1, "type": kind, **fields}))


__all__ = ["Event", "EventReader", "events", "receive", "send", "socket_url", "websockets"]
