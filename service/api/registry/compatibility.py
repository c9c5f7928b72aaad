"""The schema registry's compatibility checks: whether a schema may follow a subject's version,
or its live versions (``verbose``: and why not).

The routes are put together by ``router``; they call ``SchemaRegistry.check``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import Response

from api_schemas import registry as sr
from service.errors import InvalidSchemaError

from .answers import WRITE_ERRORS, _answer, _ok
from .requests import SCHEMA_BODY, Answer, Normalize, Subject, _schema_of, _version
from .served import GW, Served, registry_router

router = registry_router()


Verbose = Annotated[bool, Query(description="Say why not.")]


async def _check(
    request: Request, gw: Served, subject: str, version: int | None, verbose: bool, answer: str
) -> Response:
    req = await SCHEMA_BODY.read(request)
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
    openapi_extra=SCHEMA_BODY.openapi,
)
async def test_compatibility(
    subject: Subject,
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
    openapi_extra=SCHEMA_BODY.openapi,
)
async def test_compatibility_all(
    subject: Subject,
    request: Request,
    gw: GW,
    answer: Answer,
    verbose: Verbose = False,
    normalize: Normalize = False,
) -> Response:
    """Whether the schema may follow the subject's live versions, as its level compares them."""
    return await _check(request, gw, subject, None, verbose, answer)
