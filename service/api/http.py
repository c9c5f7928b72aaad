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
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

import orjson
from fastapi import Depends, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ValidationError

from api_schemas.formats import FORMATS, V2, content_type_for, media_type, unsupported
from api_schemas.records import render_slices
from api_schemas.v2 import ErrorBody
from service.api.gateway import gateway_of
from service.core.json_depth import check_depth
from service.core.models import EmbeddedFormat, Polled
from service.core.rules import MAX_OFFSET
from service.errors import BadRequest, InvalidPayload, NotAcceptable, PayloadTooLarge

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
    server = request.scope.get("server") or (settings.bind_host, settings.port)
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


class MalformedAccept(ValueError):
    """An Accept header Jersey cannot read, under Confluent's proxy and registry: their 400."""


@dataclass(frozen=True, slots=True)
class MediaRange:
    """One item of an Accept header as Jersey's ``AcceptableMediaType`` reads it: ``*`` is
    ``*/*``, a type alone (``application``) is that type's ``/*``, ``q`` in thousandths."""

    type: str
    subtype: str
    q: int = 1000

    def admits(self, produced: str) -> bool:
        """As JAX-RS's ``MediaType.isCompatible``: a wildcard type (``*/x`` too) admits any."""
        kind, _, sub = produced.partition("/")
        return self.type == "*" or (self.type == kind and self.subtype in ("*", sub))


_SEPARATORS: Final = frozenset('()<>@,;:\\"/[]?={} \t')
_ANY: Final = (MediaRange("*", "*"),)


def media_ranges(accept: str | None) -> tuple[MediaRange, ...]:
    """The items of an Accept header (none or empty: ``*/*``), read as Jersey's
    ``HttpHeaderReader`` reads them; ``MalformedAccept`` where it refuses one: an empty item but
    the last, a type or subtype that is no token, whitespace inside a type or around ``=``, a
    parameter without a value, a ``q`` its ``readQualityFactor`` refuses (``abc``, ``2``, ``-1``)."""
    if not accept:
        return _ANY
    ranges: list[MediaRange] = []
    at = _space(accept, 0)
    while at < len(accept):
        item, at = _media_range(accept, at)
        ranges.append(item)
        if at < len(accept):  # at a comma
            at = _space(accept, at + 1)
    return tuple(ranges)


def _media_range(text: str, at: int) -> tuple[MediaRange, int]:
    """The media range at ``at`` (AcceptableMediaType.valueOf), and where it ends: a comma or the end."""
    kind, at = _token(text, at, "a media type")
    subtype = "*"
    if text.startswith("/", at):
        subtype, at = _token(text, at + 1, "a subtype")
    params: dict[str, str] = {}
    while (at := _space(text, at)) < len(text) and text[at] != ",":
        if text[at] != ";":
            raise MalformedAccept(f"';' expected at {at}")
        while at < len(text) and (text[at] == ";" or text[at] in " \t\r\n"):
            at += 1
        if at == len(text) or text[at] == ",":
            break
        name, at = _token(text, at, "a parameter")
        if not text.startswith("=", at):
            raise MalformedAccept(f"'=' expected at {at}")
        value, at = _quoted(text, at + 1) if text.startswith('"', at + 1) else _token(text, at + 1, "a value")
        params[name.lower()] = value
    q = _quality_factor(params["q"]) if "q" in params else 1000
    return MediaRange(kind.lower(), subtype.lower(), q), at


def _space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _token(text: str, at: int, what: str) -> tuple[str, int]:
    end = at
    while end < len(text) and " " < text[end] < "\x7f" and text[end] not in _SEPARATORS:
        end += 1
    if end == at:
        raise MalformedAccept(f"{what} expected at {at}")
    return text[at:end], end


def _quoted(text: str, at: int) -> tuple[str, int]:
    out: list[str] = []
    at += 1
    while at < len(text):
        if text[at] == "\\":
            at += 1
        elif text[at] == '"':
            return "".join(out), at + 1
        out.append(text[at : at + 1])
        at += 1
    raise MalformedAccept("a quoted string is not closed")


def _quality_factor(value: str) -> int:
    """Jersey's ``readQualityFactor``, in thousandths: ``0``, ``1`` or ``.``, a point, digits;
    five characters at most; not above 1."""
    if not 0 < len(value) <= 5 or value[0] not in "01." or value == ".":
        raise MalformedAccept(f"the quality value {value!r} is not 0 to 1")
    if value[0] != "." and len(value) > 1 and value[1] != ".":
        raise MalformedAccept(f"the quality value {value!r} is not 0 to 1")
    fraction = value[2:] if value[0] != "." else value[1:]
    if not all("0" <= c <= "9" for c in fraction):
        raise MalformedAccept(f"the quality value {value!r} is not 0 to 1")
    thousandths = int(fraction[:3].ljust(3, "0")) if fraction else 0
    if value[0] == "1":
        if thousandths:
            raise MalformedAccept(f"the quality value {value!r} is greater than 1")
        return 1000
    return thousandths


def quality(ranges: Iterable[MediaRange], produced: str) -> int:
    """The best ``q`` of the ranges that admit ``produced``; -1 when none does."""
    return max((r.q for r in ranges if r.admits(produced)), default=-1)


def acceptable(accept: str | None, answers: Collection[str] = V2_ANSWERS) -> bool:
    """Whether an Accept header admits one of ``answers`` (no header does), an item weighted 0
    too: Jersey selects by compatibility and only orders by ``q``; ``MalformedAccept`` if Jersey
    cannot read it."""
    ranges = media_ranges(accept)
    return any(quality(ranges, answer) >= 0 for answer in answers)


# Confluent's consumers resource also answers its control routes in every embedded format's type,
# "so you can always use these headers when interacting with" it.
CONSUMER_ANSWERS = V2_ANSWERS | {content_type_for(fmt) for fmt in FORMATS}


def accepts_v2(request: Request) -> None:
    """The v2 control routes' checks, a dependency: the Content-Type first (415), as Jersey checks
    a resource's ``@Consumes`` before Accept, on every method; then 406 when the client accepts
    none of the v2 JSON types. (Confluent's Jersey sends its 406 without a body; the docs list that.)"""
    check_control_type(request)
    check_accept(request.headers.get("accept"))


def accepts_v2_reading_any(request: Request) -> None:
    """``accepts_v2`` for a route whose resource consumes any Content-Type (the brokers'): Accept only."""
    check_accept(request.headers.get("accept"))


def accepts_consumer_types(request: Request) -> None:
    """``accepts_v2`` for the consumer routes, which answer in the embedded formats' types too."""
    check_control_type(request)
    check_accept(request.headers.get("accept"), CONSUMER_ANSWERS)


def check_accept(accept: str | None, answers: Collection[str] = V2_ANSWERS) -> None:
    """406 when the Accept header admits none of ``answers``; 400 when Jersey cannot read it."""
    try:
        admitted = acceptable(accept, answers)
    except MalformedAccept as exc:
        raise _unreadable(exc) from None
    if not admitted:
        raise NotAcceptable(
            f"HTTP 406 Not Acceptable: this route answers in {V2} or application/json, not {accept[:100]!r}."
            if accept
            else "HTTP 406 Not Acceptable"
        )


_ANY_FORMAT: Final = V2_ANSWERS | {"application/*"}


def accepted_formats(accept: str | None) -> set[EmbeddedFormat] | None:
    """The embedded formats a records route may answer in by Accept (``media_ranges``): those of
    the items it weights highest, as Jersey orders by ``q`` (an item weighted 0 too); None when
    they admit them all (no header, a wildcard, a generic v2 JSON type: the instance's or the
    default format); ``BadRequest`` when Jersey cannot read it."""
    try:
        ranges = media_ranges(accept)
    except MalformedAccept as exc:
        raise _unreadable(exc) from None
    best = -1
    any_format = False
    allowed: set[EmbeddedFormat] = set()
    for r in ranges:
        everything = r.type == "*" or f"{r.type}/{r.subtype}" in _ANY_FORMAT
        formats = set() if everything else {fmt for fmt in FORMATS if r.admits(content_type_for(fmt))}
        if (not everything and not formats) or r.q < best:
            continue
        if r.q > best:
            best, any_format, allowed = r.q, False, set()
        any_format = any_format or everything
        allowed |= formats
    return None if any_format else allowed


def _unreadable(exc: MalformedAccept) -> BadRequest:
    return BadRequest(f"HTTP 400 Bad Request: the Accept header cannot be read: {exc}.")


ACCEPTS_V2 = Depends(accepts_v2)
ACCEPTS_V2_READING_ANY = Depends(accepts_v2_reading_any)
ACCEPTS_CONSUMER_TYPES = Depends(accepts_consumer_types)

# The OpenAPI declarations of the answers above: a route that checks Accept lists NOT_ACCEPTABLE,
# a produce route BAD_BODY too.
NOT_ACCEPTABLE: dict[int | str, dict[str, Any]] = {
    406: {"model": ErrorBody, "description": "Accept allows none of the route's media types (406)."}
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
        raise unsupported(request.headers.get("content-type", ""), f"{V2} or application/json")


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
