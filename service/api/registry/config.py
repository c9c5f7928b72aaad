"""The schema registry's config and mode: the compatibility level and the mode, global and per
subject, to get, set and delete.

The routes are put together by ``router``; they call ``SchemaRegistry``'s compatibility and mode
methods.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import Response

from api_schemas import registry as sr

from .answers import ERRORS, WRITE_ERRORS, _answer, _ok
from .requests import CONFIG_BODY, MODE_BODY, Answer, Subject, _level, _mode
from .served import GW, registry_router

router = registry_router()


DefaultToGlobal = Annotated[bool, Query(description="The global setting when the subject has none.")]


@router.get("/config", operation_id="getGlobalConfig", responses={**_ok(sr.Config), **ERRORS})
async def get_global_config(gw: GW, answer: Answer, defaultToGlobal: DefaultToGlobal = False) -> Response:
    return _answer({"compatibilityLevel": (await gw.registry.compatibility(None)).value}, answer)


@router.put(
    "/config",
    operation_id="updateGlobalConfig",
    responses={**_ok(sr.ConfigUpdateRequest), **WRITE_ERRORS},
    openapi_extra=CONFIG_BODY.openapi,
)
async def update_global_config(request: Request, gw: GW, answer: Answer) -> Response:
    level = _level((await CONFIG_BODY.read(request)).compatibility)
    await gw.registry.set_compatibility(None, level)
    return _answer({"compatibility": level.value}, answer)


@router.delete("/config", operation_id="deleteGlobalConfig", responses={**_ok(sr.Config), **ERRORS})
async def delete_global_config(gw: GW, answer: Answer) -> Response:
    """Back to the default level; the level it was."""
    return _answer({"compatibilityLevel": (await gw.registry.delete_compatibility(None)).value}, answer)


@router.get("/config/{subject}", operation_id="getSubjectConfig", responses={**_ok(sr.Config), **ERRORS})
async def get_subject_config(
    subject: Subject, gw: GW, answer: Answer, defaultToGlobal: DefaultToGlobal = False
) -> Response:
    """The subject's level (40408 if it has none, unless ``defaultToGlobal``)."""
    level = await gw.registry.compatibility(subject, default_to_global=defaultToGlobal)
    return _answer({"compatibilityLevel": level.value}, answer)


@router.put(
    "/config/{subject}",
    operation_id="updateSubjectConfig",
    responses={**_ok(sr.ConfigUpdateRequest), **WRITE_ERRORS},
    openapi_extra=CONFIG_BODY.openapi,
)
async def update_subject_config(subject: Subject, request: Request, gw: GW, answer: Answer) -> Response:
    level = _level((await CONFIG_BODY.read(request)).compatibility)
    await gw.registry.set_compatibility(subject, level)
    return _answer({"compatibility": level.value}, answer)


@router.delete(
    "/config/{subject}", operation_id="deleteSubjectConfig", responses={**_ok(sr.Config), **ERRORS}
)
async def delete_subject_config(subject: Subject, gw: GW, answer: Answer) -> Response:
    """Remove the subject's level (40401 if it has none); the level it was."""
    return _answer({"compatibilityLevel": (await gw.registry.delete_compatibility(subject)).value}, answer)


@router.get("/mode", operation_id="getGlobalMode", responses={**_ok(sr.Mode), **ERRORS})
async def get_global_mode(gw: GW, answer: Answer, defaultToGlobal: DefaultToGlobal = False) -> Response:
    return _answer({"mode": (await gw.registry.mode(None)).value}, answer)


@router.put(
    "/mode",
    operation_id="updateGlobalMode",
    responses={**_ok(sr.Mode), **WRITE_ERRORS},
    openapi_extra=MODE_BODY.openapi,
)
async def update_global_mode(request: Request, gw: GW, answer: Answer) -> Response:
    """READONLY refuses every write but mode changes (42205); READWRITE allows them again."""
    mode = _mode((await MODE_BODY.read(request)).mode)
    await gw.registry.set_mode(None, mode)
    return _answer({"mode": mode.value}, answer)


@router.get("/mode/{subject}", operation_id="getSubjectMode", responses={**_ok(sr.Mode), **ERRORS})
async def get_subject_mode(
    subject: Subject, gw: GW, answer: Answer, defaultToGlobal: DefaultToGlobal = False
) -> Response:
    """The subject's mode (40409 if it has none, unless ``defaultToGlobal``)."""
    return _answer(
        {"mode": (await gw.registry.mode(subject, default_to_global=defaultToGlobal)).value}, answer
    )


@router.put(
    "/mode/{subject}",
    operation_id="updateSubjectMode",
    responses={**_ok(sr.Mode), **WRITE_ERRORS},
    openapi_extra=MODE_BODY.openapi,
)
async def update_subject_mode(subject: Subject, request: Request, gw: GW, answer: Answer) -> Response:
    mode = _mode((await MODE_BODY.read(request)).mode)
    await gw.registry.set_mode(subject, mode)
    return _answer({"mode": mode.value}, answer)


@router.delete("/mode/{subject}", operation_id="deleteSubjectMode", responses={**_ok(sr.Mode), **ERRORS})
async def delete_subject_mode(subject: Subject, gw: GW, answer: Answer) -> Response:
    """Remove the subject's mode (40401 if it has none); the mode it was."""
    return _answer({"mode": (await gw.registry.delete_mode(subject)).value}, answer)
