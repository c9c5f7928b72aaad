"""Shared fixtures: real gateways on free loopback ports, unique names per test."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from service.app import create_app
from service.settings import Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RunningGateway:
    """A gateway served by uvicorn in this event loop, with a client pointed at it."""

    url: str
    client: httpx.AsyncClient
    settings: Settings
    server: uvicorn.Server
    task: asyncio.Task[None]

    async def stop(self) -> None:
        self.server.should_exit = True
        await self.task


async def start_gateway(data_dir: Path, **overrides: object) -> RunningGateway:
    port = free_port()
    settings = Settings(
        host="127.0.0.1",
        port=port,
        data_dir=data_dir,
        reaper_interval_ms=100,
        metadata_refresh_ms=200,
        **overrides,  # type: ignore[arg-type]
    )
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            break
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    url = f"http://127.0.0.1:{port}"
    client = httpx.AsyncClient(base_url=url, timeout=30)
    return RunningGateway(url, client, settings, server, task)


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path / "data")
    try:
        yield gw
    finally:
        await gw.client.aclose()
        await gw.stop()


@pytest.fixture
def client(gateway: RunningGateway) -> httpx.AsyncClient:
    return gateway.client


@pytest.fixture
def name() -> str:
    """A unique topic/group name for this test."""
    return f"t-{uuid.uuid4().hex[:10]}"
