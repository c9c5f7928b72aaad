"""How the routes answer: orjson JSON under the vendor media types, Confluent's error shape, no
content, and records (one body when small, streamed in slices when large)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi.responses import Response, StreamingResponse

from service.core.models import EmbeddedFormat, Polled
from service.wire.formats import V2
from service.wire.records import render_slices

__all__ = [
    "STREAM_ABOVE_BYTES",
    "STREAM_SLICE_BYTES",
    "V3",
    "JSONBody",
    "error_response",
    "no_content",
    "records_response",
    "v2",
    "v3",
]

V3 = "application/json"


class JSONBody(Response):
    """orjson-rendered JSON with a configurable (vendor) media type."""

    media_type = V2

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error_response(
    status: int,
    code: int,
    message: str,
    *,
    retry_after: float | None = None,
    headers: dict[str, str] | None = None,
    media_type: str | None = None,
) -> JSONBody:
    """An answer in Confluent's error shape, ``{"error_code": …, "message": …}`` (an ASGI app too)."""
    headers = dict(headers or {})
    if retry_after is not None:
        headers["Retry-After"] = str(max(1, round(retry_after)))
    return JSONBody(
        {"error_code": code, "message": message},
        status_code=status,
        headers=headers or None,
        media_type=media_type,
    )


def v2(content: Any, status_code: int = 200) -> JSONBody:
    return JSONBody(content, status_code=status_code)


def v3(content: Any, status_code: int = 200) -> JSONBody:
    return JSONBody(content, status_code=status_code, media_type=V3)


# A poll whose records render to more than STREAM_ABOVE_BYTES is streamed in pieces of about
# STREAM_SLICE_BYTES: its response is never held whole, and the loop serves others between pieces.
STREAM_SLICE_BYTES = 1 << 20
STREAM_ABOVE_BYTES = 4 << 20


def records_response(
    fmt: EmbeddedFormat,
    polled: Polled,
    *,
    media_type: str,
    after: bytes | None = None,
) -> Response:
    """The records as the v2 JSON array (with ``after``: as the ``records`` field of an object that
    ends with ``after``); one body when small, streamed in slices when large."""
    pieces = render_slices(fmt, polled, slice_bytes=STREAM_SLICE_BYTES)
    opening = b'{"records":' if after is not None else b""
    closing = after or b""
    head = [opening]
    size = 0
    for piece in pieces:
        head.append(piece)
        size += len(piece)
        if size > STREAM_ABOVE_BYTES:
            break
    else:  # the whole array is rendered: one body
        return Response(b"".join((*head, closing)), media_type=media_type)

    async def stream() -> AsyncIterator[bytes]:
        yield b"".join(head)
        head.clear()
        for piece in pieces:
            await asyncio.sleep(0)  # another client's turn between pieces
            yield piece
        if closing:
            yield closing

    return StreamingResponse(stream(), media_type=media_type)


def no_content() -> Response:
    return Response(status_code=204)
