"""The schema registry's subjects and their versions: list them, get a version (or its schema's
text, or what references it), register a schema, look one up, delete a subject or a version.

The routes are put together by ``router``; they call ``SchemaRegistry``'s subject and version methods.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import Response

from api_schemas import registry as sr
from service.core.schemas.output_formats import registered_in_format
from service.errors import OperationNotPermitted

from .answers import _RAW, ERRORS, WRITE_ERRORS, _answer, _ok, _page, _subject_schema, _text
from .requests import (
    SCHEMA_BODY,
    Answer,
    Deleted,
    Format,
    Limit,
    Normalize,
    Offset,
    Subject,
    _schema_of,
    _version,
)
from .served import GW, registry_router

router = registry_router()


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
    subject: Subject,
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
    subject: Subject, version: str, gw: GW, answer: Answer, deleted: Deleted = False, format: Format = ""
) -> Response:
    """A version (a number, or ``latest``: the latest live one) with its schema."""
    found = await gw.registry.get(subject, _version(version), deleted=deleted)
    return _answer(_subject_schema(await registered_in_format(gw.registry, found, format)), answer)


@router.get(
    "/subjects/{subject}/versions/{version}/schema",
    operation_id="getSubjectVersionSchema",
    responses={**_RAW, **ERRORS},
)
async def get_version_text(
    subject: Subject, version: str, gw: GW, answer: Answer, deleted: Deleted = False, format: Format = ""
) -> Response:
    found = await gw.registry.get(subject, _version(version), deleted=deleted)
    return _text((await registered_in_format(gw.registry, found, format)).schema.text, answer)


@router.get(
    "/subjects/{subject}/versions/{version}/referencedby",
    operation_id="getReferencedBy",
    responses={**_ok(list[int]), **ERRORS},
)
async def referenced_by(
    subject: Subject,
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


@router.post(
    "/subjects/{subject}/versions",
    operation_id="registerSchema",
    responses={**_ok(sr.RegisterSchemaResponse), **WRITE_ERRORS},
    openapi_extra=SCHEMA_BODY.openapi,
)
async def register(
    subject: Subject, request: Request, gw: GW, answer: Answer, normalize: Normalize = False
) -> Response:
    """Register a schema under a subject: its id (the same as elsewhere for the same schema), and a
    new version unless it is a live version already; 409 if the subject's level forbids it."""
    req = await SCHEMA_BODY.read(request)
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
    openapi_extra=SCHEMA_BODY.openapi,
)
async def lookup(
    subject: Subject,
    request: Request,
    gw: GW,
    answer: Answer,
    normalize: Normalize = False,
    deleted: Deleted = False,
    format: Format = "",
) -> Response:
    """The version of the subject that is this schema (40403 if none is)."""
    schema = _schema_of(await SCHEMA_BODY.read(request))
    found = await gw.registry.find_version(subject, schema, deleted=deleted, normalize=normalize)
    return _answer(_subject_schema(await registered_in_format(gw.registry, found, format)), answer)


Permanent = Annotated[bool, Query(description="Hard delete (after a soft delete): the records go.")]


@router.delete("/subjects/{subject}", operation_id="deleteSubject", responses={**_ok(list[int]), **ERRORS})
async def delete_subject(subject: Subject, gw: GW, answer: Answer, permanent: Permanent = False) -> Response:
    """Soft-delete every version (40404 if they are already); with ``permanent``, remove them."""
    return _answer(await gw.registry.delete_subject(subject, permanent=permanent), answer)


@router.delete(
    "/subjects/{subject}/versions/{version}",
    operation_id="deleteSubjectVersion",
    responses={**_ok(int), **ERRORS},
)
async def delete_version(
    subject: Subject, version: str, gw: GW, answer: Answer, permanent: Permanent = False
) -> Response:
    number = _version(version)
    return _answer(await gw.registry.delete_version(subject, number, permanent=permanent), answer)
