"""The schema registry's root and its schemas by id: ``/``, ``/schemas/types``, and
``/schemas/ids/{id}`` with its text, its subject versions and its subjects.

The routes are put together by ``router``; they read ``SchemaRegistry.schema`` and ``uses``.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import Query
from fastapi.responses import Response

from api_schemas import registry as sr
from service.core.schemas.output_formats import in_format

from .answers import _RAW, ERRORS, _answer, _described, _ok, _page, _text
from .requests import Answer, Deleted, Format, Limit, Offset
from .served import GW, registry_router

router = registry_router()

SCHEMA_TYPES: Final = ["JSON", "PROTOBUF", "AVRO"]


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
