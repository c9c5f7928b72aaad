"""What a schema-registry route takes: the media type of its answer (``Answer``, by ``Accept``),
its query parameters, and its body and path values parsed into the core's types.

``SCHEMA_BODY``, ``CONFIG_BODY`` and ``MODE_BODY`` read a JSON body in one of ``media.CONSUMES``
into a request model of ``api_schemas.registry``, in the registry's dialect (``REGISTRY``);
``_version``, ``_schema_of``, ``_level`` and ``_mode`` turn what was sent into
``service.core.schemas``' values, raising the registry's errors (``service.errors``).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Final, TypeVar

import orjson
from fastapi import Depends, Path, Query, Request
from pydantic import AfterValidator, BaseModel, ValidationError

from api_schemas import registry as sr
from service.api.bodies import Body, Dialect, describe_validation
from service.core.json_depth import exceeds
from service.core.schemas.model import Compatibility, Schema, SchemaReference, SchemaType
from service.core.schemas.state import LATEST, SETTABLE_MODES, Mode
from service.errors import (
    GatewayError,
    InvalidCompatibilityLevel,
    InvalidMode,
    InvalidSchemaError,
    InvalidVersion,
    RegistryBadRequest,
)

from .media import SLASH, SR_V1, check_content_type, response_type

INT32_MAX: Final = 2**31 - 1
_VERSION_RE: Final = re.compile(r"[+-]?[0-9]{1,10}")

M = TypeVar("M", bound=BaseModel)

Answer = Annotated[str, Depends(response_type)]
Deleted = Annotated[bool, Query(description="Include soft-deleted versions.")]
Offset = Annotated[int, Query(ge=0, description="Skip this many.")]
Limit = Annotated[int, Query(description="At most this many (-1: all).")]
Format = Annotated[
    str,
    Query(
        description="The text in a form of its type: AVRO `resolved` (the references' types written "
        "in full), PROTOBUF `serialized` (its FileDescriptorProto in base64) or `ignore_extensions`; "
        "empty or another name: the text as stored."
    ),
]


def _unslashed(subject: str) -> str:
    return subject.replace(SLASH, "/")


# A subject in the path: one segment, where media.SLASH stands for an encoded "/" (RawPathGuard).
Subject = Annotated[str, Path(), AfterValidator(_unslashed)]

Normalize = Annotated[
    bool, Query(description="Accepted; schemas are always compared by their canonical form.")
]


class _Registry:
    """The dialect (``service.api.bodies.Dialect``) of the registry's routes: a body in one of
    ``media.CONSUMES``, in whatever Unicode encoding its bytes show, a JSON object; what is not
    is the registry's 400 (or its 422 for a value the model refuses, ``describe_validation``)."""

    def check_type(self, request: Request) -> None:
        check_content_type(request)

    def text(self, body: bytes) -> bytes:
        return _utf8(body)

    def loads(self, body: bytes, max_depth: int) -> Any:
        if exceeds(body, max_depth):
            raise RegistryBadRequest(
                f"The body nests JSON objects and arrays more than {max_depth} levels deep."
            )
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise RegistryBadRequest(f"The body is not JSON: {exc}") from None

    def bind(self, data: Any, model: type[M]) -> M:
        if not isinstance(data, dict):
            raise RegistryBadRequest("The body must be a JSON object.")
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise RegistryBadRequest(describe_validation(exc)) from None

    def missing(self) -> GatewayError:
        return RegistryBadRequest("A JSON request body is required.")


REGISTRY: Final[Dialect] = _Registry()


# The bodies the registry's routes take, each declared once (``service.api.bodies``).
SCHEMA_BODY: Final = Body(sr.RegisterSchemaRequest, REGISTRY, SR_V1)
CONFIG_BODY: Final = Body(sr.ConfigUpdateRequest, REGISTRY, SR_V1)
MODE_BODY: Final = Body(sr.ModeUpdateRequest, REGISTRY, SR_V1)


def _utf8(body: bytes) -> bytes:
    """``body`` in UTF-8: JSON in UTF-16 or UTF-32 (or with a BOM) is recognised from its bytes
    and decoded, as Jackson under Confluent's registry reads a body whatever its ``charset``
    says; 400 if it is not in the encoding its bytes show."""
    encoding = json.detect_encoding(body)
    if encoding == "utf-8":
        return body
    try:
        return body.decode(encoding).encode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise RegistryBadRequest(f"The body is not {encoding}: {exc.reason}.") from None


def _version(raw: str) -> int:
    """A path's version: ``latest`` (or -1) is ``LATEST``, else 1 to 2^31-1 (``InvalidVersion``)."""
    text = raw.strip()
    if text.lower() == "latest":
        return LATEST
    number = int(text) if _VERSION_RE.fullmatch(text) else 0
    if number == LATEST:
        return LATEST
    if not 1 <= number <= INT32_MAX:
        raise InvalidVersion(
            f"The specified version '{raw[:100]}' is not a valid version id. "
            'Allowed values are between [1, 2^31-1] and the string "latest"'
        )
    return number


def _schema_of(req: sr.RegisterSchemaRequest) -> Schema:
    text = req.schema_
    if text is None or not text.strip():
        raise InvalidSchemaError("Empty schema")
    kind = (req.schemaType or SchemaType.AVRO.value).upper()
    if kind not in SchemaType.__members__:
        raise InvalidSchemaError(f"Invalid schema type {req.schemaType[:100] if req.schemaType else kind}")
    refs = []
    for ref in req.references or ():
        if ref.version != LATEST and not 1 <= ref.version <= INT32_MAX:
            raise InvalidSchemaError(f"Invalid schema: reference '{ref.name}' has version {ref.version}.")
        refs.append(SchemaReference(ref.name, ref.subject, ref.version))
    return Schema(SchemaType(kind), text, tuple(refs))


def _level(raw: str | None) -> Compatibility:
    level = (raw or "").strip().upper()
    if level not in Compatibility.__members__:
        raise InvalidCompatibilityLevel()
    return Compatibility(level)


def _mode(raw: str | None) -> Mode:
    mode = (raw or "").strip().upper()
    if mode not in Mode.__members__:
        raise InvalidMode("Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD.")
    if Mode(mode) not in SETTABLE_MODES:
        raise InvalidMode(f"Invalid mode {mode}: brokergate sets READWRITE and READONLY.")
    return Mode(mode)
