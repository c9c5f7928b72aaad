"""Every error a request can meet, answered in the Confluent shape: ``add_error_handlers``.

A ``GatewayError`` carries its own status and code (``service.errors``); a request FastAPI could not
validate, a route that does not exist and anything unexpected are answered here too, so no client
ever sees FastAPI's own error body. Under ``/schema-registry`` the answers are the schema
registry's (``registry.SR_V1``, its generic codes), elsewhere the REST Proxy's.
"""

from __future__ import annotations

import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.api import registry
from service.api.replies import V3, error_response
from service.errors import ErrorCode, GatewayError

__all__ = ["add_error_handlers"]

log = logging.getLogger("brokergate")


def add_error_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` in the Confluent shape."""
    app.add_exception_handler(GatewayError, _gateway_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


def _error_type(request: Request) -> str | None:
    """The media type of an error: the schema registry's under its prefix, application/json under
    /v3 (kafka-rest's v3 resources produce only that, and Jersey types their errors by it), else
    the v2 type."""
    if request.url.path.startswith("/v3/"):
        return V3
    return registry.SR_V1 if registry.is_registry_path(request.url.path) else None


async def _gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    if exc.http_status >= 500:
        log.warning("%s %s: %s", request.method, request.url.path, exc.message)
    return error_response(
        exc.http_status,
        int(exc.error_code),
        exc.message,
        retry_after=exc.retry_after,
        media_type=_error_type(request),
    )


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    in_registry = registry.is_registry_path(request.url.path)
    if any(err["loc"][:1] == ("path",) for err in errors):
        # /topics/t/partitions/abc names no resource: Jersey's 404, as a path parameter it cannot
        # convert is there.
        return jersey_error(request, 404)
    parts = [
        f"{'.'.join(str(x) for x in err['loc'][1:]) or err['loc'][0]}: {err['msg']}" for err in errors[:5]
    ]
    if in_registry:
        return error_response(400, 400, "Invalid request: " + "; ".join(parts), media_type=registry.SR_V1)
    message = "Invalid request: " + "; ".join(parts)
    return error_response(422, ErrorCode.INVALID_REQUEST, message, media_type=_error_type(request))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    return jersey_error(request, exc.status_code, headers=dict(exc.headers or {}))


def jersey_error(request: Request, status: int, *, headers: dict[str, str] | None = None) -> Response:
    """What Confluent's proxy and registry answer for an error of Jersey's own (no route, a method
    or a Content-Type the route does not take): rest-utils' WebApplicationExceptionMapper gives the
    status as the code and the exception's message, Jersey's ``HTTP 404 Not Found``."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    return error_response(
        status, status, f"HTTP {status} {phrase}", headers=headers, media_type=_error_type(request)
    )


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return error_response(500, ErrorCode.INTERNAL, "Internal server error.", media_type=_error_type(request))
