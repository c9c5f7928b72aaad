"""How a schema-registry route answers, and how the OpenAPI document describes its answers.

``_answer`` sends JSON in the media type ``requests.Answer`` picked, ``_text`` a schema's text
as it is, ``_page`` applies ``offset`` and ``limit``; ``_described`` and ``_subject_schema``
shape a schema and a subject's version as Confluent does. ``ERRORS``, ``WRITE_ERRORS``, ``_ok``
and ``_RAW`` are the routes' documented responses (their bodies are ``requests``' declarations).
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import Response

from api_schemas.v2 import ErrorBody
from service.api.replies import JSONBody
from service.core.schemas.model import Schema, SchemaType
from service.core.schemas.registry import Registered

from .media import SR_V1

_ERROR = {"model": ErrorBody}
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {**_ERROR, "description": "An Accept header Jersey cannot read (error code 400)."},
    404: {**_ERROR, "description": "No such subject (40401), version (40402) or schema (40403)."},
    406: {**_ERROR, "description": "Accept allows none of the registry's media types."},
    415: {
        **_ERROR,
        "description": "A Content-Type the registry does not read, whatever the method (error code 415).",
    },
    422: {**_ERROR, "description": "Invalid schema (42201), version (42202) or subject (42208)."},
    503: {**_ERROR, "description": "A backend is unavailable, or the writer lock busy (50002)."},
}
WRITE_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    400: {
        **_ERROR,
        "description": "The body is not JSON, or not the JSON the route takes; or an Accept header "
        "Jersey cannot read (error code 400).",
    },
    409: {**_ERROR, "description": "The schema is incompatible with an earlier version (409)."},
    413: {**_ERROR, "description": "The body, or the schema text (42201), is over its size limit."},
}


def _answer(content: Any, answer: str, status_code: int = 200) -> Response:
    return JSONBody(content, status_code=status_code, media_type=answer)


def _text(text: str, answer: str) -> Response:
    """A schema's text as it is (for Avro, JSON; for Protobuf, the .proto file), as Confluent answers."""
    return Response(text.encode("utf-8", "surrogatepass"), media_type=answer)


def _page(items: list[Any], offset: int, limit: int) -> list[Any]:
    return items[offset : offset + limit] if limit > 0 else items[offset:]


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


def _ok(model: Any, description: str | None = None) -> dict[int | str, dict[str, Any]]:
    ok: dict[str, Any] = {"model": model}
    if description:
        ok["description"] = description
    return {200: ok}


_RAW: dict[int | str, dict[str, Any]] = {
    200: {"description": "The schema's text as it is.", "content": {SR_V1: {"schema": {"type": "string"}}}}
}
