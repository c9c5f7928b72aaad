"""A minimal keep-alive HTTP/1.1 client for load generation.

httpx costs hundreds of microseconds of client CPU per request; on a small
machine that CPU is taken from the server being measured. This client does
the least a load generator can: one connection per worker, pre-built request
bytes, Content-Length or chunked responses (what the gateway sends).
"""

from __future__ import annotations

import asyncio


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> Connection:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._writer is not None:
            self._writer.close()

    def build(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        content_type: str | None = None,
        accept: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> bytes:
        lines = [
            f"{method} {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            f"Content-Length: {len(body)}",
        ]
        if content_type:
            lines.append(f"Content-Type: {content_type}")
        if accept:
            lines.append(f"Accept: {accept}")
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    async def send(self, request: bytes) -> tuple[int, bytes]:
        """Send pre-built request bytes; return (status, body)."""
        assert self._reader is not None and self._writer is not None
        self._writer.write(request)
        head = await self._reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name = line.partition(b":")[0].lower()
            if name == b"content-length":
                length = int(line[15:])
                break
            if name == b"transfer-encoding":  # a streamed (large) poll
                return status, await self._chunks()
        body = await self._reader.readexactly(length) if length else b""
        return status, body

    async def _chunks(self) -> bytes:
        assert self._reader is not None
        out = bytearray()
        while True:
            size = int((await self._reader.readuntil(b"\r\n"))[:-2], 16)
            out += await self._reader.readexactly(size + 2)
            del out[-2:]
            if size == 0:
                return bytes(out)
