"""Confluent's schema-registry API under ``/schema-registry``: schemas, subjects, compatibility, config, mode.

A registry client is pointed at ``http://host:8082/schema-registry`` and finds the routes,
bodies, query parameters and error codes of Confluent's registry (``RegistryErrorCode``).
Requests may be ``application/vnd.schemaregistry.v1+json``, ``application/vnd.schemaregistry+json``,
``application/json`` or ``application/octet-stream``; answers take the first of the three
JSON types the ``Accept`` header allows, in that order of preference (406 if it allows none).
Each route parses, calls the registry (``service.core.schemas.registry``), and shapes its answer.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Annotated, Any, Final, TypeVar

import orjson
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from api_schemas import registry as sr
from api_schemas.formats import media_type
from api_schemas.v2 import ErrorBody
from service.api.gateway import Gateway, gateway_of, get_gateway
from service.core.json_depth import exceeds
from service.core.schemas.model import Compatibility, Schema, SchemaReference, SchemaType
from service.core.schemas.registry import Registered, SchemaRegistry
from service.core.schemas.state import LATEST, SETTABLE_MODES, Mode
from service.errors import (
    GatewayError,
    InvalidCompatibilityLevel,
    InvalidMode,
    InvalidSchemaError,
    InvalidVersion,
    OperationNotPermitted,
    RegistryBadRequest,
    RegistryNotAcceptable,
    RegistryUnsupportedMediaType,
)

from .http import PARSE_OFF_LOOP_BYTES, JSONBody, body_doc, describe_validation, read_body

PREFIX: Final = "/schema-registry"
SR_V1: Final = "application/vnd.schemaregistry.v1+json"
SR_DEFAULT: Final = "application/vnd.schemaregistry+json"
JSON: Final = "application/json"
# What the registry answers in, best first (Confluent's qs 0.9, 0.8, 0.5), and what it reads.
PRODUCES: Final = (SR_V1, SR_DEFAULT, JSON)
CONSUMES: Final = frozenset({SR_V1, SR_DEFAULT, JSON, "application/octet-stream"})
SCHEMA_TYPES: Final = ["JSON", "PROTOBUF", "AVRO"]
INT32_MAX: Final = 2**31 - 1
_VERSION_RE: Final = re.compile(r"[+-]?[0-9]{1,10}")

M = TypeVar("M", bound=BaseModel)


class RegistryJSON(JSONBody):
    media_type = SR_V1


def is_registry_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def response_type(request: Request) -> str:
    """The media type of the answer, by ``Accept`` (``RegistryNotAcceptable`` if it allows none)."""
    accept = request.headers.get("accept")
    if not accept or not accept.strip():
        return SR_V1
    best: tuple[float, int] | None = None
    for rank, produced in enumerate(PRODUCES):
        q = _quality(accept, produced)
        if q > 0 and (best is None or q > best[0]):
            best = (q, rank)
    if best is None:
        raise RegistryNotAcceptable(f"HTTP 406 Not Acceptable: answers are one of {', '.join(PRODUCES)}.")
    return PRODUCES[best[1]]


def _quality(accept: str, produced: str) -> float:
    kind = produced.split("/", 1)[0]
    found = 0.0
    for item in accept.split(",")[:32]:
        mt, *params = (p.strip() for p in item.split(";"))
        mt = mt.lower()
        if mt not in (produced, f"{kind}/*", "*/*"):
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0
        found = max(found, q)
    return found


class ExternalRegistryInUse(GatewayError):
    """The gateway uses an external registry: its own registry API is not served, and requests are
    not forwarded (that would lend the gateway's credentials to whoever sends one)."""

    http_status = 404
    error_code = 404  # the registry's generic codes are the HTTP status
    default_message = (
        "HTTP 404 Not Found: this gateway uses an external schema registry; registry clients talk to "
        "that registry directly."
    )


@dataclass(frozen=True, slots=True)
class Served:
    """What the routes reach: the gateway's embedded registry."""

    registry: SchemaRegistry


async def served_registry(gw: Annotated[Gateway, Depends(get_gateway)]) -> Served:
    """The dependency of every route: the embedded registry (``ExternalRegistryInUse`` when the
    gateway uses an external one)."""
    if gw.registry is None:
        raise ExternalRegistryInUse()
    return Served(gw.registry)


Answer = Annotated[str, Depends(response_type)]
GW = Annotated[Served, Depends(served_registry)]
Deleted = Annotated[bool, Query(description="Include soft-deleted versions.")]
Offset = Annotated[int, Query(ge=0, description="Skip this many.")]
Limit = Annotated[int, Query(description="At most this many (-1: all).")]

router = APIRouter(
    prefix=PREFIX,
    tags=["schema-registry"],
    default_response_class=RegistryJSON,
    dependencies=[Depends(served_registry)],  # the routes that need no registry answer alike
)

_ERROR = {"model": ErrorBody}
ERRORS: dict[int | str, dict[str, Any]] = {
    404: {**_ERROR, "description": "No such subject (40401), version (40402) or schema (40403)."},
    406: {**_ERROR, "description": "Accept allows none of the registry's media types."},
    422: {**_ERROR, "description": "Invalid schema (42201), version (42202) or subject (42208)."},
    503: {**_ERROR, "description": "A backend is unavailable, or the writer lock busy (50002)."},
}
WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    400: {**_ERROR, "description": "The body is not JSON, or not the JSON the route takes."},
    409: {**_ERROR, "description": "The schema is incompatible with an earlier version (409)."},
    413: {**_ERROR, "description": "The body, or the schema text (42201), is over its size limit."},
    415: {**_ERROR, "description": "Unsupported Content-Type."},
}


def _answer(content: Any, answer: str, status_code: int = 200) -> Response:
    return JSONBody(content, status_code=status_code, media_type=answer)


def _text(text: str, answer: str) -> Response:
    """A schema's text as it is (for Avro, JSON; for Protobuf, the .proto file), as Confluent answers."""
    return Response(text.encode("utf-8", "surrogatepass"), media_type=answer)


def _page(items: list[Any], offset: int, limit: int) -> list[Any]:
    return items[offset : offset + limit] if limit > 0 else items[offset:]


async def _body(request: Request, model: type[M]) -> M:
    mt = media_type(request.headers.get("content-type"))
    if mt and mt not in CONSUMES:
        raise RegistryUnsupportedMediaType(
            f"HTTP 415 Unsupported Media Type: send {SR_V1}, {SR_DEFAULT} or {JSON}."
        )
    body = await read_body(request)
    if not body.strip():
        raise RegistryBadRequest("A JSON request body is required.")
    limit = gateway_of(request.scope).settings.max_json_depth
    big = len(body) >= PARSE_OFF_LOOP_BYTES
    if await asyncio.to_thread(exceeds, body, limit) if big else exceeds(body, limit):
        raise RegistryBadRequest(f"The body nests JSON objects and arrays more than {limit} levels deep.")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise RegistryBadRequest(f"The body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RegistryBadRequest("The body must be a JSON object.")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RegistryBadRequest(describe_validation(exc)) from None


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


def _references(schema: Schema) -> list[dict[str, Any]]:
    return [{"name": r.name, "subject": r.subject, "version": r.version} for r in schema.references]


def _described(schema: Schema, out: dict[str, Any]) -> dict[str, Any]:
    """``out`` with the schema's type (left out for AVRO), references (left out when none) and text."""
    if schema.schema_type is not SchemaType.AVRO:
        out["schemaType"] = schema.schema_type.value
    if schema.references:
        out["references"] = _references(schema)
    out["schema"] = schema.text
    return out


def _subject_schema(r: Registered) -> dict[str, Any]:
    return _described(r.schema, {"subject": r.subject, "version": r.version, "id": r.schema_id})


def _level(raw: str | None) -> Compatibility:
    level = (raw or "").strip().upper()
    if level not in Compatibility.__members__:
        raise InvalidCompatibilityLevel()
    return Compatibility(level)


def _mode(raw: str | None) -> Mode:
    mode = (raw or "").strip().upper()
    if mode not in Mode.__members__:
        raise InvalidMode()
    if Mode(mode) not in SETTABLE_MODES:
        raise InvalidMode(f"Invalid mode {mode}: brokergate sets READWRITE and READONLY.")
    return Mode(mode)


def _doc(model: type[BaseModel]) -> dict[str, Any]:
    return body_doc(model, SR_V1)


def _ok(model: Any, description: str | None = None) -> dict[int | str, dict[str, Any]]:
    ok: dict[str, Any] = {"model": model}
    if description:
        ok["description"] = description
    return {200: ok}


_RAW: dict[int | str, dict[str, Any]] = {
    200: {"description": "The schema's text as it is.", "content": {SR_V1: {"schema": {"type": "string"}}}}
}

# --- the root and schemas by id -----------------------------------------------------------


@router.get("/", operation_id="registryRoot", responses={200: {"description": "An empty object."}, **ERRORS})
async def root(answer: Answer) -> Response:
    return _answer({}, answer)


@router.get("/schemas/types", operation_id="getSchemaTypes", responses={**_ok(list[str]), **ERRORS})
async def schema_types(answer: Answer) -> Response:
    return _answer(SCHEMA_TYPES, answer)


@router.get("/schemas/ids/{id}", operation_id="getSchemaById", responses={**_ok(sr.SchemaString), **ERRORS})
async def schema_by_id(
    id: int,
    gw: GW,
    answer: Answer,
    subject: Annotated[str | None, Query(description="Also say its version in this subject.")] = None,
) -> Response:
    """The schema with this id (soft-deleted versions keep it; 40403 once none holds it)."""
    schema = await gw.registry.schema(id)
    out: dict[str, Any] = {}
    if subject is not None:
        held = [v for v in await gw.registry.uses(id, deleted=True) if v.subject == subject]
        if held:
            out = {"subject": subject, "version": held[-1].version}
    return _answer(_described(schema, out), answer)


@router.get("/schemas/ids/{id}/schema", operation_id="getSchemaTextById", responses={**_RAW, **ERRORS})
async def schema_text_by_id(id: int, gw: GW, answer: Answer) -> Response:
    return _text((await gw.registry.schema(id)).text, answer)


@router.get(
    "/schemas/ids/{id}/versions",
    operation_id="getVersionsOfSchema",
    responses={**_ok(list[sr.SubjectVersion]), **ERRORS},
)
async def versions_of_schema(
    id: int, gw: GW, answer: Answer, deleted: Deleted = False, offset: Offset = 0, limit: Limit = -1
) -> Response:
    """The subject versions that are this schema."""
    uses = await gw.registry.uses(id, deleted=deleted)
    return _answer(_page([{"subject": v.subject, "version": v.version} for v in uses], offset, limit), answer)


@router.get(
    "/schemas/ids/{id}/subjects", operation_id="getSubjectsOfSchema", responses={**_ok(list[str]), **ERRORS}
)
async def subjects_of_schema(
    id: int, gw: GW, answer: Answer, deleted: Deleted = False, offset: Offset = 0, limit: Limit = -1
) -> Response:
    subjects = sorted({v.subject for v in await gw.registry.uses(id, deleted=deleted)})
    return _answer(_page(subjects, offset, limit), answer)


# --- subjects and versions ------------------------------------------------------------------


@router.get("/subjects", operation_id="listSubjects", responses={**_ok(list[str]), **ERRORS})
async def list_subjects(
    gw: GW,
    answer: Answer,
    subjectPrefix: Annotated[str, Query(max_length=1000, description="Only subjects starting so.")] = "",
    deleted: Annotated[
        bool, Query(description="Include subjects whose versions are all soft-deleted.")
    ] = False,
    deletedOnly: Annotated[bool, Query(description="Only those.")] = False,
    offset: Offset = 0,
    limit: Limit = -1,
) -> Response:
    subjects = await gw.registry.subjects(deleted=deleted, deleted_only=deletedOnly, prefix=subjectPrefix)
    return _answer(_page(subjects, offset, limit), answer)


@router.get(
    "/subjects/{subject}/versions", operation_id="listSubjectVersions", responses={**_ok(list[int]), **ERRORS}
)
async def list_versions(
    subject: str,
    gw: GW,
    answer: Answer,
    deleted: Deleted = False,
    deletedOnly: Annotated[bool, Query(description="Only soft-deleted versions.")] = False,
    offset: Offset = 0,
    limit: Limit = -1,
) -> Response:
    versions = await gw.registry.versions(subject, deleted=deleted, deleted_only=deletedOnly)
    return _answer(_page(versions, offset, limit), answer)


@router.get(
    "/subjects/{subject}/versions/{version}",
    operation_id="getSubjectVersion",
    responses={**_ok(sr.SubjectSchema), **ERRORS},
)
async def get_version(
    subject: str, version: str, gw: GW, answer: Answer, deleted: Deleted = False
) -> Response:
    """A version (a number, or ``latest``: the latest live one) with its schema."""
    return _answer(
        _subject_schema(await gw.registry.get(subject, _version(version), deleted=deleted)), answer
    )


@router.get(
    "/subjects/{subject}/versions/{version}/schema",
    operation_id="getSubjectVersionSchema",
    responses={**_RAW, **ERRORS},
)
async def get_version_text(
    subject: str, version: str, gw: GW, answer: Answer, deleted: Deleted = False
) -> Response:
    return _text((await gw.registry.get(subject, _version(version), deleted=deleted)).schema.text, answer)


@router.get(
    "/subjects/{subject}/versions/{version}/referencedby",
    operation_id="getReferencedBy",
    responses={**_ok(list[int]), **ERRORS},
)
async def referenced_by(
    subject: str,
    version: str,
    gw: GW,
    answer: Answer,
    deleted: Annotated[bool, Query(description="Include soft-deleted referrers.")] = False,
    offset: Offset = 0,
    limit: Limit = -1,
) -> Response:
    """Ids of the schemas that reference this version."""
    ids = await gw.registry.referenced_by(subject, _version(version), deleted=deleted)
    return _answer(_page(ids, offset, limit), answer)


Normalize = Annotated[
    bool, Query(description="Accepted; schemas are always compared by their canonical form.")
]


@router.post(
    "/subjects/{subject}/versions",
    operation_id="registerSchema",
    responses={**_ok(sr.RegisterSchemaResponse), **WRITE_ERRORS},
    openapi_extra=_doc(sr.RegisterSchemaRequest),
)
async def register(
    subject: str, request: Request, gw: GW, answer: Answer, normalize: Normalize = False
) -> Response:
    """Register a schema under a subject: its id (the same as elsewhere for the same schema), and a
    new version unless it is a live version already; 409 if the subject's level forbids it."""
    req = await _body(request, sr.RegisterSchemaRequest)
    schema = _schema_of(req)
    if req.id is not None and req.id >= 0:
        raise OperationNotPermitted(
            f"Subject {subject!r} is not in import mode: a schema's id is the registry's."
        )
    version = req.version if req.version is not None and req.version > 0 else None
    schema_id, _ = await gw.registry.register(subject, schema, normalize=normalize, version=version)
    return _answer({"id": schema_id}, answer)


@router.post(
    "/subjects/{subject}",
    operation_id="lookupSchema",
    responses={**_ok(sr.SubjectSchema), **WRITE_ERRORS},
    openapi_extra=_doc(sr.RegisterSchemaRequest),
)
async def lookup(
    subject: str,
    request: Request,
    gw: GW,
    answer: Answer,
    normalize: Normalize = False,
    deleted: Deleted = False,
) -> Response:
    """The version of the subject that is this schema (40403 if none is)."""
    schema = _schema_of(await _body(request, sr.RegisterSchemaRequest))
    return _answer(_subject_schema(await gw.registry.find_version(subject, schema, deleted=deleted)), answer)


Permanent = Annotated[bool, Query(description="Hard delete (after a soft delete): the records go.")]


@router.delete("/subjects/{subject}", operation_id="deleteSubject", responses={**_ok(list[int]), **ERRORS})
async def delete_subject(subject: str, gw: GW, answer: Answer, permanent: Permanent = False) -> Response:
    """Soft-delete every version (40404 if they are already); with ``permanent``, remove them."""
    return _answer(await gw.registry.delete_subject(subject, permanent=permanent), answer)


@router.delete(
    "/subjects/{subject}/versions/{version}",
    operation_id="deleteSubjectVersion",
    responses={**_ok(int), **ERRORS},
)
async def delete_version(
    subject: str, version: str, gw: GW, answer: Answer, permanent: Permanent = False
) -> Response:
    number = _version(version)
    return _answer(await gw.registry.delete_version(subject, number, permanent=permanent), answer)


# --- compatibility --------------------------------------------------------------------------

Verbose = Annotated[bool, Query(description="Say why not.")]


async def _check(
    request: Request, gw: Served, subject: str, version: int | None, verbose: bool, answer: str
) -> Response:
    req = await _body(request, sr.RegisterSchemaRequest)
    try:
        errors = await gw.registry.check(subject, _schema_of(req), version)
    except InvalidSchemaError as exc:
        if not verbose:
            raise
        errors = [exc.message]
    out: dict[str, Any] = {"is_compatible": not errors}
    if verbose:
        out["messages"] = errors
    return _answer(out, answer)


@router.post(
    "/compatibility/subjects/{subject}/versions/{version}",
    operation_id="testCompatibility",
    responses={**_ok(sr.CompatibilityCheckResponse), **WRITE_ERRORS},
    openapi_extra=_doc(sr.RegisterSchemaRequest),
)
async def test_compatibility(
    subject: str,
    version: str,
    request: Request,
    gw: GW,
    answer: Answer,
    verbose: Verbose = False,
    normalize: Normalize = False,
) -> Response:
    """Whether the schema may follow this version (``latest``: the latest live one, if any)."""
    return await _check(request, gw, subject, _version(version), verbose, answer)


@router.post(
    "/compatibility/subjects/{subject}/versions",
    operation_id="testCompatibilityAll",
    responses={**_ok(sr.CompatibilityCheckResponse), **WRITE_ERRORS},
    openapi_extra=_doc(sr.RegisterSchemaRequest),
)
async def test_compatibility_all(
    subject: str,
    request: Request,
    gw: GW,
    answer: Answer,
    verbose: Verbose = False,
    normalize: Normalize = False,
) -> Response:
    """Whether the schema may follow the subject's live versions, as its level compares them."""
    return await _check(request, gw, subject, None, verbose, answer)


# --- config and mode ------------------------------------------------------------------------

DefaultToGlobal = Annotated[bool, Query(description="The global setting when the subject has none.")]


@router.get("/config", operation_id="getGlobalConfig", responses={**_ok(sr.Config), **ERRORS})
async def get_global_config(gw: GW, answer: Answer, defaultToGlobal: DefaultToGlobal = False) -> Response:
    return _answer({"compatibilityLevel": (await gw.registry.compatibility(None)).value}, answer)


@router.put(
    "/config",
    operation_id="updateGlobalConfig",
    responses={**_ok(sr.ConfigUpdateRequest), **WRITE_ERRORS},
    openapi_extra=_doc(sr.ConfigUpdateRequest),
)
async def update_global_config(request: Request, gw: GW, answer: Answer) -> Response:
    level = _level((await _body(request, sr.ConfigUpdateRequest)).compatibility)
    await gw.registry.set_compatibility(None, level)
    return _answer({"compatibility": level.value}, answer)


@router.delete("/config", operation_id="deleteGlobalConfig", responses={**_ok(sr.Config), **ERRORS})
async def delete_global_config(gw: GW, answer: Answer) -> Response:
    """Back to the default level; the level it was."""
    return _answer({"compatibilityLevel": (await gw.registry.delete_compatibility(None)).value}, answer)


@router.get("/config/{subject}", operation_id="getSubjectConfig", responses={**_ok(sr.Config), **ERRORS})
async def get_subject_config(
    subject: str, gw: GW, answer: Answer, defaultToGlobal: DefaultToGlobal = False
) -> Response:
    """The subject's level (40408 if it has none, unless ``defaultToGlobal``)."""
    level = await gw.registry.compatibility(subject, default_to_global=defaultToGlobal)
    return _answer({"compatibilityLevel": level.value}, answer)


@router.put(
    "/config/{subject}",
    operation_id="updateSubjectConfig",
    responses={**_ok(sr.ConfigUpdateRequest), **WRITE_ERRORS},
    openapi_extra=_doc(sr.ConfigUpdateRequest),
)
async def update_subject_config(subject: str, request: Request, gw: GW, answer: Answer) -> Response:
    level = _level((await _body(request, sr.ConfigUpdateRequest)).compatibility)
    await gw.registry.set_compatibility(subject, level)
    return _answer({"compatibility": level.value}, answer)


@router.delete(
    "/config/{subject}", operation_id="deleteSubjectConfig", responses={**_ok(sr.Config), **ERRORS}
)
async def delete_subject_config(subject: str, gw: GW, answer: Answer) -> Response:
    """Remove the subject's level (40401 if it has none); the level it was."""
    return _answer({"compatibilityLevel": (await gw.registry.delete_compatibility(subject)).value}, answer)


@router.get("/mode", operation_id="getGlobalMode", responses={**_ok(sr.Mode), **ERRORS})
async def get_global_mode(gw: GW, answer: Answer, defaultToGlobal: DefaultToGlobal = False) -> Response:
    return _answer({"mode": (await gw.registry.mode(None)).value}, answer)


@router.put(
    "/mode",
    operation_id="updateGlobalMode",
    responses={**_ok(sr.Mode), **WRITE_ERRORS},
    openapi_extra=_doc(sr.ModeUpdateRequest),
)
async def update_global_mode(request: Request, gw: GW, answer: Answer) -> Response:
    """READONLY refuses every write but mode changes (42205); READWRITE allows them again."""
    mode = _mode((await _body(request, sr.ModeUpdateRequest)).mode)
    await gw.registry.set_mode(None, mode)
    return _answer({"mode": mode.value}, answer)


@router.get("/mode/{subject}", operation_id="getSubjectMode", responses={**_ok(sr.Mode), **ERRORS})
async def get_subject_mode(
    subject: str, gw: GW, answer: Answer, defaultToGlobal: DefaultToGlobal = False
) -> Response:
    """The subject's mode (40409 if it has none, unless ``defaultToGlobal``)."""
    return _answer(
        {"mode": (await gw.registry.mode(subject, default_to_global=defaultToGlobal)).value}, answer
    )


@router.put(
    "/mode/{subject}",
    operation_id="updateSubjectMode",
    responses={**_ok(sr.Mode), **WRITE_ERRORS},
    openapi_extra=_doc(sr.ModeUpdateRequest),
)
async def update_subject_mode(subject: str, request: Request, gw: GW, answer: Answer) -> Response:
    mode = _mode((await _body(request, sr.ModeUpdateRequest)).mode)
    await gw.registry.set_mode(subject, mode)
    return _answer({"mode": mode.value}, answer)


@router.delete("/mode/{subject}", operation_id="deleteSubjectMode", responses={**_ok(sr.Mode), **ERRORS})
async def delete_subject_mode(subject: str, gw: GW, answer: Answer) -> Response:
    """Remove the subject's mode (40401 if it has none); the mode it was."""
    return _answer({"mode": (await gw.registry.delete_mode(subject)).value}, answer)
