"""The schema registry's root and its schemas: ``/``, ``/schemas`` (every subject's versions),
``/schemas/types``, and ``/schemas/ids/{id}`` with its text, its subject versions and its subjects.

The routes are put together by ``router``; they read ``SchemaRegistry.schema`` and ``uses``.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import Query
from fastapi.responses import Response

from api_schemas import registry as sr
from service.core.schemas.output_formats import in_format
from service.core.schemas.state import Version
from service.errors import SchemaNotFound

from .answers import _RAW, ERRORS, _answer, _described, _ok, _page, _subject_schema, _text
from .requests import Answer, Deleted, Format, Limit, Offset
from .served import GW, Served, registry_router

router = registry_router()

SCHEMA_TYPES: Final = ["JSON", "PROTOBUF", "AVRO"]


@router.get("/", operation_id="registryRoot", responses={200: {"description": "An empty object."}, **ERRORS})
async def root(answer: Answer) -> Response:
    return _answer({}, answer)


@router.get("/schemas/types", operation_id="getSchemaTypes", responses={**_ok(list[str]), **ERRORS})
async def schema_types(answer: Answer) -> Response:
    return _answer(SCHEMA_TYPES, answer)


SEARCH_LIMIT: Final = 1000  # Confluent's schema.search.default.limit and max.limit


@router.get("/schemas", operation_id="getSchemas", responses={**_ok(list[sr.SubjectSchema]), **ERRORS})
async def list_schemas(
    gw: GW,
    answer: Answer,
    subjectPrefix: Annotated[str, Query(max_length=1000, description="Only subjects starting so.")] = "",
    deleted: Deleted = False,
    latestOnly: Annotated[bool, Query(description="Only the latest version of each subject.")] = False,
    offset: Offset = 0,
    limit: Annotated[int, Query(description=f"At most this many (1 to {SEARCH_LIMIT}, else that).")] = -1,
) -> Response:
    """Every subject's versions with their schemas, by subject and version (SchemasResource's
    ``getSchemas``): a limit out of 1 to 1000 is 1000, as Confluent's default and maximum."""
    found = await gw.registry.all_versions(prefix=subjectPrefix, deleted=deleted, latest_only=latestOnly)
    size = limit if 0 < limit <= SEARCH_LIMIT else SEARCH_LIMIT
    return _answer([_subject_schema(r) for r in found[offset : offset + size]], answer)


@router.get("/schemas/ids/{id}", operation_id="getSchemaById", responses={**_ok(sr.SchemaString), **ERRORS})
async def schema_by_id(
    id: int,
    gw: GW,
    answer: Answer,
    subject: Annotated[str | None, Query(description="Also say its version in this subject.")] = None,
    format: Format = "",
) -> Response:
    """The schema with this id (soft-deleted versions keep it; 40403 once none holds it)."""
    schema = await in_format(gw.registry, id, await gw.registry.schema(id), format)
    out: dict[str, Any] = {}
    if subject is not None:
        held = [v for v in await gw.registry.uses(id, deleted=True) if v.subject == subject]
        if held:
            out = {"subject": subject, "version": held[-1].version}
    return _answer(_described(schema, out), answer)


@router.get("/schemas/ids/{id}/schema", operation_id="getSchemaTextById", responses={**_RAW, **ERRORS})
async def schema_text_by_id(id: int, gw: GW, answer: Answer, format: Format = "") -> Response:
    return _text((await in_format(gw.registry, id, await gw.registry.schema(id), format)).text, answer)


@router.get(
    "/schemas/ids/{id}/versions",
    operation_id="getVersionsOfSchema",
    responses={**_ok(list[sr.SubjectVersion]), **ERRORS},
)
async def versions_of_schema(
    id: int, gw: GW, answer: Answer, deleted: Deleted = False, offset: Offset = 0, limit: Limit = -1
) -> Response:
    """The subject versions that are this schema."""
    uses = await _uses(gw, id, deleted=deleted)
    return _answer(_page([{"subject": v.subject, "version": v.version} for v in uses], offset, limit), answer)


@router.get(
    "/schemas/ids/{id}/subjects", operation_id="getSubjectsOfSchema", responses={**_ok(list[str]), **ERRORS}
)
async def subjects_of_schema(
    id: int, gw: GW, answer: Answer, deleted: Deleted = False, offset: Offset = 0, limit: Limit = -1
) -> Response:
    subjects = sorted({v.subject for v in await _uses(gw, id, deleted=deleted)})
    return _answer(_page(subjects, offset, limit), answer)


async def _uses(gw: Served, schema_id: int, *, deleted: bool) -> list[Version]:
    """The subject versions that are schema ``schema_id``; for an id not there, the 40403 of
    Confluent's ``getSubjects`` and ``getVersions``, which do not name the id."""
    try:
        return await gw.registry.uses(schema_id, deleted=deleted)
    except SchemaNotFound:
        raise SchemaNotFound() from None
