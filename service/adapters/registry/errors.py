"""Translation of an external registry's answers, and of httpx's failures, into ``service.errors``.

The one place that knows what a registry's answer means. ``answer`` gives the JSON of a
successful answer or raises; ``unreachable`` words a request that got no answer. The policy:

* an error body of the registry (``{"error_code": ..., "message": ...}``) with one of Confluent's
  registry codes -> that code's error, with the registry's message: ``SubjectNotFound`` (40401),
  ``VersionNotFound`` (40402), ``SchemaNotFound`` (40403), ``IncompatibleSchema`` (409),
  ``InvalidSchemaError`` (42201), ``OperationNotPermitted`` (42205)... as the embedded registry
  raises them
* the registry refusing the gateway's credentials (401, 403) -> ``BackendUnavailable`` saying so
  and naming the settings (it is the gateway's configuration, not the client's request, at fault)
* a 5xx, or an answer that is not a registry's (not JSON, not the shape asked for, a bare 404:
  the URL names no registry) -> ``BackendUnavailable`` (503 with Retry-After)
* no connection, a failed TLS handshake, no answer within the timeout -> ``BackendUnavailable``
* any other refusal -> ``BackendError``, with the registry's words
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any, Final

import httpx
import orjson

from service.errors import (
    BackendError,
    BackendUnavailable,
    IncompatibleSchema,
    InvalidCompatibilityLevel,
    InvalidMode,
    InvalidSchemaError,
    InvalidSubject,
    InvalidVersion,
    OperationNotPermitted,
    ReferenceExists,
    RegistryError,
    RegistryErrorCode,
    SchemaNotFound,
    SchemaTooLarge,
    SubjectCompatibilityNotConfigured,
    SubjectModeNotConfigured,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)

from ..tls import failure_reason

__all__ = ["answer", "not_a_registry", "unreachable"]

_MESSAGE_CHARS: Final = 1000  # of the registry's message, passed on

_BY_CODE: Final[Mapping[int, type[RegistryError]]] = {
    RegistryErrorCode.INCOMPATIBLE_SCHEMA: IncompatibleSchema,
    RegistryErrorCode.SUBJECT_NOT_FOUND: SubjectNotFound,
    RegistryErrorCode.VERSION_NOT_FOUND: VersionNotFound,
    RegistryErrorCode.SCHEMA_NOT_FOUND: SchemaNotFound,
    RegistryErrorCode.SUBJECT_SOFT_DELETED: SubjectSoftDeleted,
    RegistryErrorCode.SUBJECT_NOT_SOFT_DELETED: SubjectNotSoftDeleted,
    RegistryErrorCode.VERSION_SOFT_DELETED: VersionSoftDeleted,
    RegistryErrorCode.VERSION_NOT_SOFT_DELETED: VersionNotSoftDeleted,
    RegistryErrorCode.SUBJECT_COMPATIBILITY_NOT_CONFIGURED: SubjectCompatibilityNotConfigured,
    RegistryErrorCode.SUBJECT_MODE_NOT_CONFIGURED: SubjectModeNotConfigured,
    RegistryErrorCode.INVALID_SCHEMA: InvalidSchemaError,
    RegistryErrorCode.INVALID_VERSION: InvalidVersion,
    RegistryErrorCode.INVALID_COMPATIBILITY_LEVEL: InvalidCompatibilityLevel,
    RegistryErrorCode.INVALID_MODE: InvalidMode,
    RegistryErrorCode.OPERATION_NOT_PERMITTED: OperationNotPermitted,
    RegistryErrorCode.REFERENCE_EXISTS: ReferenceExists,
    RegistryErrorCode.INVALID_SUBJECT: InvalidSubject,
}


def answer(url: str, request: str, status: int, body: bytes) -> Any:
    """The JSON of the registry's answer ``body`` (``status``) to ``request`` ("GET /schemas/ids/1"),
    or the error it means (see the module's policy). ``url`` is the registry's, for messages."""
    data = _json(body)
    if 200 <= status < 300:
        if data is _NOT_JSON:
            raise not_a_registry(url, request, f"HTTP {status}, not JSON")
        return data
    code, message = _error_body(data)
    if status >= 500:
        said = f": {code}, {message}" if code is not None else ""
        raise BackendUnavailable(
            f"The schema registry at {url} failed {request} (HTTP {status}{said}); retry later."
        )
    if status in (401, 403):
        said = f": {message}" if message else ""
        raise BackendUnavailable(
            f"The schema registry at {url} refused the gateway's credentials for {request} (HTTP {status}"
            f"{said}); check schema_registry_username and schema_registry_password."
        )
    error = _BY_CODE.get(code) if code is not None else None
    if error is not None:
        if error is InvalidSchemaError and status == 413:
            error = SchemaTooLarge
        raise error(message or None)
    if code is None or code in (404, 40400) or status == 404:
        raise not_a_registry(url, request, f"HTTP {status}" + (f": {message}" if message else ""))
    raise BackendError(f"The schema registry at {url} refused {request} (HTTP {status}: {code}, {message}).")


def not_a_registry(url: str, request: str, what: str) -> BackendUnavailable:
    """An answer no schema registry gives: the URL names something else, or a proxy in between
    answered."""
    return BackendUnavailable(
        f"The schema registry at {url} gave {request} an answer no schema registry gives ({what}): "
        "is schema_registry the registry's base URL?"
    )


def unreachable(exc: BaseException, url: str, timeout_ms: int) -> BackendUnavailable:
    """What a request that got no answer says: timed out, refused TLS, or could not connect."""
    if isinstance(exc, (httpx.TimeoutException, TimeoutError)):
        return BackendUnavailable(
            f"The schema registry at {url} did not answer within {timeout_ms} ms "
            "(schema_registry_request_timeout_ms); retry later."
        )
    refused = _ssl_error(exc)
    if refused is not None:
        return BackendUnavailable(
            f"The schema registry at {url} failed the TLS handshake ({failure_reason(refused)})."
        )
    why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return BackendUnavailable(f"Cannot reach the schema registry at {url} ({why}); retry later.")


# --- internals -------------------------------------------------------------------------------

_NOT_JSON: Final = object()


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body) if body.strip() else _NOT_JSON
    except orjson.JSONDecodeError:
        return _NOT_JSON


def _error_body(data: Any) -> tuple[int | None, str]:
    """The registry's error code and message, if ``data`` is a registry's error body."""
    if not isinstance(data, dict):
        return None, ""
    code, message = data.get("error_code"), data.get("message")
    if not isinstance(code, int) or isinstance(code, bool):
        return None, ""
    text = message if isinstance(message, str) else ""
    if len(text) > _MESSAGE_CHARS:
        text = text[: _MESSAGE_CHARS - 3] + "..."
    return code, text


def _ssl_error(exc: BaseException) -> ssl.SSLError | None:
    """The TLS failure behind ``exc`` (httpx wraps httpcore's, which wraps the ``ssl`` module's)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
