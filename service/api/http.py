"""Request and response plumbing shared by the routers.

Bodies are read here with their size limit and Content-Type checked, parsed
with orjson (or a pydantic model), and turned into ``GatewayError``s with the
Confluent shape when they are wrong. Responses are rendered with orjson under
the vendor media types. Models used as request bodies are registered so the
OpenAPI document can declare them (``body_doc``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Collection, Iterable
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

import orjson
from fastapi import Depends, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ValidationError

from api_schemas.formats import FORMATS, V2, content_type_for, media_type
from api_schemas.records import render_slices
from api_schemas.v2 import ErrorBody
from service.api.gateway import gateway_of
from service.core.json_depth import check_depth
from service.core.models import EmbeddedFormat, Record, TopicPartition
from service.core.rules import MAX_OFFSET
from service.errors import BadRequest, InvalidPayload, NotAcceptable, PayloadTooLarge, UnsupportedMediaType

V3 = "application/json"
# Accepted for control bodies; the OpenAPI document declares the vendor type only (one media type per
# body keeps generated clients simple), and plain JSON is accepted as Confluent's proxy does.
CONTROL_TYPES = (V2, "application/json")

M = TypeVar("M", bound=BaseModel)

BODY_MODELS: dict[str, type[BaseModel]] = {}


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


def records_doc(schema: dict[str, Any]) -> dict[str, Any]:
    """The 200 response of a route that returns records, in every embedded format's media type
    (the Accept header, or the consumer's format, picks one); ``schema`` is the body's schema."""
    types = [V2, *(content_type_for(fmt) for fmt in FORMATS)]  # V2: binary, as Confluent's proxy
    return {"content": {media_type: {"schema": schema} for media_type in types}}


def records_response(
    fmt: EmbeddedFormat,
    polled: Iterable[tuple[TopicPartition, list[Record]]],
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


def public_base(request: Request) -> str:
    """The URL clients reach this gateway at, for ``base_uri`` and v3 links, without a trailing ``/``.

    ``ADVERTISED_URL`` when set. Else the request's ``Host``, if its name is in
    ``ALLOWED_HOSTS``: a forged ``Host`` must not become a URL the gateway hands out. Else the
    address and port the connection reached, which the client evidently can reach.
    """
    settings = gateway_of(request.scope).settings
    if settings.advertised_url:
        return settings.advertised_url.rstrip("/")
    scheme = request.url.scheme
    allowed = settings.allowed_host_names
    netloc = _netloc(request.headers.get("host", ""))
    if netloc is not None and ("*" in allowed or netloc[0] in allowed):
        return f"{scheme}://{_join(*netloc)}"
    server = request.scope.get("server") or (settings.host, settings.port)
    return f"{scheme}://{_join(str(server[0]), server[1])}"


def _netloc(host_header: str) -> tuple[str, int | None] | None:
    """The host name and port of a ``Host`` header, or None if it is not one."""
    try:
        parts = urlsplit("//" + host_header)
        port = parts.port
    except ValueError:
        return None
    name = parts.hostname
    if not name or parts.path or parts.query or parts.fragment or parts.username is not None:
        return None
    return name, port


def _join(host: str, port: int | None) -> str:
    host = f"[{host}]" if ":" in host else host
    return host if port is None else f"{host}:{port}"


# What a v2 control route answers in (Confluent's resources produce application/vnd.kafka.v2+json),
# and the types that admit it: plain JSON too, as a generated client asks for it, and wildcards.
V2_ANSWERS = frozenset({V2, "application/json", "application/vnd.kafka+json"})
_WILDCARDS = frozenset({"*/*", "*", "application/*"})


def acceptable(accept: str | None, answers: Collection[str] = V2_ANSWERS) -> bool:
    """Whether an Accept header admits one of ``answers``: no header does, nor does an item
    weighted ``q=0``."""
    if accept is None or not accept.strip():
        return True
    for item in accept.split(","):
        mt, _, params = item.partition(";")
        mt = mt.strip().lower()
        if not mt or _refused(params):
            continue
        if mt in _WILDCARDS or mt in answers:
            return True
    return False


def _refused(params: str) -> bool:
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip()) <= 0
            except ValueError:
                return False
    return False


# Confluent's consumers resource also answers its control routes in every embedded format's type,
# "so you can always use these headers when interacting with" it.
CONSUMER_ANSWERS = V2_ANSWERS | {content_type_for(fmt) for fmt in FORMATS}


def accepts_v2(request: Request) -> None:
    """The v2 control routes' Accept check, a dependency: 406 when the client accepts none of the
    v2 JSON types. (Confluent's Jersey sends its 406 without a body; the docs list that.)"""
    check_accept(request.headers.get("accept"))


def accepts_consumer_types(request: Request) -> None:
    """``accepts_v2`` for the consumer routes, which answer in the embedded formats' types too."""
    check_accept(request.headers.get("accept"), CONSUMER_ANSWERS)


def check_accept(accept: str | None, answers: Collection[str] = V2_ANSWERS) -> None:
    if not acceptable(accept, answers):
        raise NotAcceptable(
            f"HTTP 406 Not Acceptable: this route answers in {V2} or application/json, not {accept[:100]!r}."
            if accept
            else "HTTP 406 Not Acceptable"
        )


ACCEPTS_V2 = Depends(accepts_v2)
ACCEPTS_CONSUMER_TYPES = Depends(accepts_consumer_types)

# The OpenAPI declarations of the answers above: a route that checks Accept lists NOT_ACCEPTABLE,
# a produce route BAD_BODY too.
NOT_ACCEPTABLE: dict[int | str, dict[str, Any]] = {
    406: {"model": ErrorBody, "description": "Accept allows none of the route's media types (40602)."}
}
BAD_BODY: dict[int | str, dict[str, Any]] = {
    400: {
        "model": ErrorBody,
        "description": "A body Confluent's proxy cannot bind (not JSON, records that are not a list "
        "of objects) or a key or value it cannot serialize (bad base64, a value its schema refuses): "
        "error code 400.",
    }
}


def no_content() -> Response:
    return Response(status_code=204)


async def read_body(request: Request) -> bytes:
    """The raw body, refused with 413 as soon as it passes the configured limit."""
    limit = gateway_of(request.scope).settings.max_request_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"Request body of {declared} bytes is over the limit of {limit} bytes.")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"Request body is over the limit of {limit} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


def check_control_type(request: Request) -> None:
    """Control endpoints take JSON: the v2 vendor types, any embedded-format type, or plain JSON."""
    mt = media_type(request.headers.get("content-type"))
    if (
        mt
        and mt not in CONTROL_TYPES
        and not (mt.startswith("application/vnd.kafka") and mt.endswith("+json"))
    ):
        raise UnsupportedMediaType(
            f"Unsupported Content-Type {mt!r}; "
            "send JSON as application/vnd.kafka.v2+json or application/json."
        )


# A body this big or bigger is measured (``json_depth``: up to some 40 ms per MiB of brackets
# arranged to cost most) and parsed in a worker thread.
PARSE_OFF_LOOP_BYTES = 256 * 1024


def loads(body: bytes, *, max_depth: int, records: bool = False) -> Any:
    """The JSON of ``body``; not JSON: 42206, or with ``records`` (a produce body) the 400 of
    Confluent's JSON parser (text that is not UTF-8 too). Nested deeper than ``max_depth``: 42206,
    before anything walks it (``json_depth``)."""
    check_depth(body, max_depth)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if records:
            raise BadRequest(f"Request body is not valid JSON: {exc}") from exc
        raise InvalidPayload(f"Request body is not valid JSON: {exc}") from exc


async def parse_optional(request: Request, model: type[M]) -> M | None:
    """Parse a control-plane body into ``model``; an empty body (or JSON null) is None."""
    check_control_type(request)
    body = await read_body(request)
    if not body.strip():
        return None
    parse = functools.partial(loads, body, max_depth=gateway_of(request.scope).settings.max_json_depth)
    data = await asyncio.to_thread(parse) if len(body) >= PARSE_OFF_LOOP_BYTES else parse()
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidPayload(describe_validation(exc)) from exc


async def parse(request: Request, model: type[M]) -> M:
    """Parse a required control-plane body into ``model``."""
    parsed = await parse_optional(request, model)
    if parsed is None:
        raise InvalidPayload("A JSON request body is required.")
    return parsed


def describe_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(x) for x in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "Invalid request: " + "; ".join(parts)


def body_doc(
    model: type[BaseModel] | dict[str, type[BaseModel]], media_type: str = V2, *, required: bool = True
) -> dict[str, Any]:
    """``openapi_extra`` declaring the request body: ``model`` under ``media_type``, or one per media type.

    A body offered under several media types is declared optional: openapi-python-client (0.29)
    generates code that does not import for a required one. The gateway still answers 422 without it.
    """
    by_type = model if isinstance(model, dict) else {media_type: model}
    content = {}
    for mt, m in by_type.items():
        BODY_MODELS[m.__name__] = m
        content[mt] = {"schema": {"$ref": f"#/components/schemas/{m.__name__}"}}
    body: dict[str, Any] = {"required": required and len(content) == 1, "content": content}
    if len(content) > 1:
        body["description"] = "Required: one of these media types picks the embedded format."
    return {"requestBody": body}


def timestamp_millis(ts: int | datetime) -> int:
    """A seek's timestamp in milliseconds since the epoch, from 0 to what a log stores (int64):
    ``InvalidPayload`` beyond, rather than a timestamp a log cannot take or reads as another
    (Kafka's -1 is "latest")."""
    if isinstance(ts, datetime):
        if ts.tzinfo is None:
            raise InvalidPayload("An ISO 8601 timestamp needs a time zone (e.g. 'Z').")
        millis = int(ts.timestamp() * 1000)
    else:
        millis = ts
    if not 0 <= millis <= MAX_OFFSET:
        raise InvalidPayload(f"Timestamp {ts} is out of range: from 1970 on, in milliseconds.")
    return millis
