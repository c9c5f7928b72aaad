"""Request bodies: read once under their limits, and bound by one declaration per operation.

A route that takes a JSON body declares it once, as a ``Body`` (or ``OptionalBody``) at module
level: the model, the media type, and the dialect that binds it. The declaration both reads the
body (``read``) and writes the operation's ``requestBody`` in the OpenAPI document (``openapi``,
the route's ``openapi_extra``: the model's schema, which ``openapi.build_openapi`` moves into the
components). Every body is read the same way: the dialect's Content-Type check, the size limit
(413 as soon as it passes), the depth limit before anything walks it, the parse off the event
loop when large. What differs is how each API answers what it cannot bind, the dialect:

- ``binding.Jackson``: Confluent's proxy's routes (v2 consumers, v3), as Jackson binds them;
- ``GATEWAY``: the gateway's own routes (share groups), 42206 with what pydantic found;
- ``registry.requests.REGISTRY``: the schema registry's, as Confluent's registry answers.

The produce routes read their body themselves (``service.wire.records``, fast for large bodies)
and declare it with ``request_body``, one model per embedded format.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import orjson
from fastapi import Request
from pydantic import BaseModel, ValidationError

from service.api.gateway import gateway_of
from service.core.json_depth import check_depth
from service.errors import BadRequest, GatewayError, InvalidPayload, PayloadTooLarge
from service.wire.formats import V2, media_type, unsupported

__all__ = [
    "CONTROL_TYPES",
    "GATEWAY",
    "PARSE_OFF_LOOP_BYTES",
    "Body",
    "Dialect",
    "OptionalBody",
    "check_control_type",
    "describe_validation",
    "loads",
    "read_body",
    "request_body",
]

M = TypeVar("M", bound=BaseModel)

# Accepted for control bodies; the OpenAPI document declares the vendor type only (one media type per
# body keeps generated clients simple), and plain JSON is accepted as Confluent's proxy does.
CONTROL_TYPES = (V2, "application/json")


class Dialect(Protocol):
    """How one API reads and binds a JSON body, and answers what it cannot."""

    def check_type(self, request: Request) -> None:
        """Refuse a Content-Type the API does not take (415)."""

    def text(self, body: bytes) -> bytes:
        """The body as the UTF-8 the parser reads."""

    def loads(self, body: bytes, max_depth: int) -> Any:
        """The JSON of ``body``, refused when it is not JSON or nests deeper than ``max_depth``."""

    def bind(self, data: Any, model: type[M]) -> M | None:
        """``data`` bound to ``model``; None for a JSON null the API reads as no body."""

    def missing(self) -> GatewayError:
        """The error for a required body that is absent."""


@dataclass(frozen=True, slots=True)
class _Declared(Generic[M]):
    """``model`` as ``dialect`` binds it, sent as ``media_type``; ``shown``: the model the document
    shows, where the bound one also takes names the API binds but does not document."""

    model: type[M]
    dialect: Dialect
    media_type: str = V2
    shown: type[BaseModel] | None = None

    def _doc(self, *, required: bool) -> dict[str, Any]:
        return request_body({self.media_type: self.shown or self.model}, required=required)

    async def _bound(self, request: Request) -> M | None:
        d = self.dialect
        d.check_type(request)
        body = d.text(await read_body(request))
        if not body.strip():
            return None
        parse = functools.partial(d.loads, body, gateway_of(request.scope).settings.max_json_depth)
        data = await asyncio.to_thread(parse) if len(body) >= PARSE_OFF_LOOP_BYTES else parse()
        return d.bind(data, self.model)


@dataclass(frozen=True, slots=True)
class Body(_Declared[M]):
    """A body the operation needs: ``read`` refuses its absence with the dialect's error."""

    @property
    def openapi(self) -> dict[str, Any]:
        return self._doc(required=True)

    async def read(self, request: Request) -> M:
        bound = await self._bound(request)
        if bound is None:
            raise self.dialect.missing()
        return bound


@dataclass(frozen=True, slots=True)
class OptionalBody(_Declared[M]):
    """A body the operation may go without: ``read`` is None when there is none (or JSON null)."""

    @property
    def openapi(self) -> dict[str, Any]:
        return self._doc(required=False)

    async def read(self, request: Request) -> M | None:
        return await self._bound(request)


def request_body(models: Mapping[str, type[BaseModel]], *, required: bool) -> dict[str, Any]:
    """``openapi_extra`` declaring an operation's request body: a model per media type, each as
    its JSON schema (``openapi.build_openapi`` moves them into the components, by title).

    A body offered under several media types is declared optional: openapi-python-client (0.29)
    generates code that does not import for a required one. The gateway still answers 422 without it.
    """
    content = {
        mt: {"schema": model.model_json_schema(ref_template="#/components/schemas/{model}")}
        for mt, model in models.items()
    }
    body: dict[str, Any] = {"required": required and len(content) == 1, "content": content}
    if len(content) > 1:
        body["description"] = "Required: one of these media types picks the embedded format."
    return {"requestBody": body}


class _Gateway:
    """The gateway's own routes: 42206 with what pydantic found."""

    def check_type(self, request: Request) -> None:
        check_control_type(request)

    def text(self, body: bytes) -> bytes:
        return body

    def loads(self, body: bytes, max_depth: int) -> Any:
        return loads(body, max_depth=max_depth)

    def bind(self, data: Any, model: type[M]) -> M | None:
        if data is None:
            return None
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise InvalidPayload(describe_validation(exc)) from exc

    def missing(self) -> GatewayError:
        return InvalidPayload("A JSON request body is required.")


GATEWAY: Dialect = _Gateway()


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


def describe_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(x) for x in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "Invalid request: " + "; ".join(parts)
