"""What the OpenAPI document says each operation answers, as the gateway really answers it.

FastAPI declares every answer in the app's default media type (``application/vnd.kafka.v2+json``)
and knows nothing of the ASGI layers in front of the routes. ``document_answers`` corrects that
from what the gateway sends, which tests/integration/test_openapi.py checks with real requests:

- the media type of each answer: the v3 API (its errors too) and the health probes answer
  ``application/json``;
  the schema registry's answers are in the type ``Accept`` picks (``registry.media.PRODUCES``);
  records are in their embedded format's type, never the generic one; ``/metrics`` is text;
- the bodies FastAPI could not see (the empty objects of ``GET /`` and the registry's root, the
  probes' objects);
- records by format: binary and string keys and values are strings, the other formats any JSON,
  each media type with its own schema (``FORMAT_RECORDS``), so that a client generated for one
  media type reads its records' types without narrowing a union;
- the 401 of ``auth.Authenticate`` on every operation and the 403 of ``access.Authorize`` (a need
  of ``access.RULES``), of a route's own check of the topics its body names, and of
  ``crosssite.CrossSiteGuard`` (a route that changes state), where the route's rule makes them
  possible. These layers answer in the v2 type, whatever the path (a v3 route's too);
- the 400 of an Accept header Jersey cannot read (``http.media_ranges``), on every operation
  that reads Accept (it lists a 406).
"""

from __future__ import annotations

import copy
from typing import Any, Final

from service.core.models import EmbeddedFormat
from service.wire.formats import FORMATS, V2, content_type_for

from .access import RULES
from .registry.media import PRODUCES, SR_V1, is_registry_path

__all__ = ["EMPTY_OBJECT", "FORMAT_RECORDS", "JSON", "document_answers", "record_name"]

JSON: Final = "application/json"
EMPTY_OBJECT: Final[dict[str, Any]] = {"type": "object", "properties": {}, "additionalProperties": False}
_ERROR_REF: Final = {"$ref": "#/components/schemas/ErrorBody"}
_PROBES: Final = frozenset({"/healthz", "/readyz"})

# The bodies of the routes that build their answer without a model.
_BODIES: Final[dict[str, dict[str, Any]]] = {
    "root": {**EMPTY_OBJECT, "description": "An empty object, as Confluent's proxy answers."},
    "registryRoot": {**EMPTY_OBJECT, "description": "An empty object, as Confluent's registry answers."},
    "health": {
        "type": "object",
        "properties": {"status": {"type": "string", "const": "ok"}},
        "required": ["status"],
    },
    "ready": {
        "type": "object",
        "properties": {
            "status": {"type": "string", "const": "ready"},
            "unopened_topics_count": {
                "type": "integer",
                "description": "Topics the embedded log could not open (they answer 503).",
            },
            "unopened_topics": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Each of them with why, for a caller who may DESCRIBE the cluster.",
            },
            "stopped_partitions_count": {
                "type": "integer",
                "description": "Partitions of the embedded log that stopped taking writes until a restart "
                "(a write that could not be undone, a failed fsync, a read-only filesystem); their "
                "records are still read.",
            },
            "stopped_partitions": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Each of them (topic-partition) with why, for a caller who may DESCRIBE "
                "the cluster.",
            },
        },
        "required": ["status"],
    },
}

# The components that hold a record's key and value, and those that hold such records: each gets
# one copy per embedded format, named by ``record_name``.
_RECORDS: Final = ("ConsumerRecord", "ShareRecord")
_HOLDERS: Final = ("ReadRecords",)
_PREFIX: Final[dict[EmbeddedFormat, str]] = {
    "binary": "Binary",
    "json": "Json",
    "string": "String",
    "avro": "Avro",
    "jsonschema": "JsonSchema",
    "protobuf": "Protobuf",
}
_BASE64: Final = {"anyOf": [{"type": "string", "contentEncoding": "base64"}, {"type": "null"}]}
_TEXT: Final = {"anyOf": [{"type": "string"}, {"type": "null"}]}
FORMAT_RECORDS: Final[dict[EmbeddedFormat, tuple[dict[str, Any], str]]] = {
    "binary": (_BASE64, "Base64 of the {part}'s bytes, or null."),
    "string": (_TEXT, "The {part} as UTF-8 text, or null."),
    "json": ({}, "The {part} as the JSON value it was produced as, or null."),
    "avro": ({}, "The {part} as the JSON of its Avro schema, or null."),
    "jsonschema": ({}, "The {part} as the JSON its JSON Schema describes, or null."),
    "protobuf": ({}, "The {part} as the JSON of its Protobuf message, or null."),
}
"""How each embedded format gives a record's key and value: their schema, and its description."""


def record_name(fmt: EmbeddedFormat, base: str) -> str:
    """The name of ``base``'s component in the embedded format ``fmt``: ``BinaryConsumerRecord``."""
    return _PREFIX[fmt] + base


def document_answers(schema: dict[str, Any]) -> None:
    """Correct ``schema``'s answers as the module docstring says (before any path is renamed:
    the rules are keyed by the routes' paths)."""
    components = schema["components"]["schemas"]
    _records_by_format(components)
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            responses = operation.setdefault("responses", {})
            body = _BODIES.get(operation.get("operationId", ""))
            for status, response in responses.items():
                content = response.get("content")
                if content:
                    response["content"] = _served(path, str(status), content, body)
            _refusals(f"{method.upper()} {path}", path, responses)
            if "406" in responses or 406 in responses:
                _unreadable_accept(responses)


def _served(path: str, status: str, content: dict[str, Any], body: dict[str, Any] | None) -> dict[str, Any]:
    """A response's content by the media types the gateway answers it in."""
    ok = status.startswith("2")
    if ok and body is not None:
        # the JSON answers' (a page for a browser, text/html, keeps its own)
        content = {
            mt: {"schema": copy.deepcopy(body)} if mt.endswith("json") else v for mt, v in content.items()
        }
    formats = {content_type_for(fmt): fmt for fmt in FORMATS}
    if ok and formats.keys() & content.keys():  # records, in their format's type only
        return {
            mt: (_by_format(value, formats[mt]) if mt in formats else value)
            for mt, value in content.items()
            if mt != V2
        }
    if path == "/metrics":
        return {mt: value for mt, value in content.items() if mt != V2}
    # the v3 API's answers, its errors too (kafka-rest's v3 resources produce only application/json,
    # and Jersey types their errors by it), and the probes' (readyz's 503 too) are plain JSON
    if path.startswith("/v3/") or (ok and path in _PROBES) or (path == "/readyz" and status == "503"):
        return {JSON if mt == V2 else mt: value for mt, value in content.items()}
    if ok and is_registry_path(path) and SR_V1 in content:
        return {mt: copy.deepcopy(content[SR_V1]) for mt in PRODUCES}
    return content


def _by_format(value: Any, fmt: EmbeddedFormat) -> Any:
    """``value`` with each reference to a record component turned to ``fmt``'s."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in (*_RECORDS, *_HOLDERS):
            return {**value, "$ref": "#/components/schemas/" + record_name(fmt, ref.rsplit("/", 1)[-1])}
        return {k: _by_format(v, fmt) for k, v in value.items()}
    if isinstance(value, list):
        return [_by_format(v, fmt) for v in value]
    return value


def _records_by_format(components: dict[str, Any]) -> None:
    """One copy of each record component, and of each component holding records, per format, in
    place of the one whose key and value said nothing."""
    for base in (*_RECORDS, *_HOLDERS):
        original = components.pop(base, None)
        if original is None:
            continue
        for fmt in FORMATS:
            name = record_name(fmt, base)
            shaped = _by_format(original, fmt)
            shaped["title"] = name
            if base in _RECORDS:
                key_value, description = FORMAT_RECORDS[fmt]
                for part in ("key", "value"):
                    shaped["properties"][part] = {**key_value, "description": description.format(part=part)}
            components[name] = shaped


def _refusals(key: str, path: str, responses: dict[str, Any]) -> None:
    """The 401 and 403 the layers in front of the route give ``key``'s operation."""
    rule = RULES.get(key)
    if path in _PROBES:
        unauthenticated = (
            "With AUTH on: credentials were sent and do not authenticate (40101). This route needs "
            "none, but refuses wrong ones."
        )
    else:
        unauthenticated = (
            "With AUTH on: no credentials were sent, or they do not authenticate (40101). The "
            "WWW-Authenticate headers name the schemes on offer."
        )
    responses.setdefault("401", _error(unauthenticated))
    if rule is None:
        return
    why = []
    if rule.needs or rule.named:
        why.append("with AUTHORIZE on, the caller lacks an ACL operation the route needs")
    if rule.changes(key):
        why.append("the request comes from a page of another site and would change state here")
    if why:
        text = "; or ".join(why)
        responses.setdefault("403", _error(f"{text[0].upper()}{text[1:]} (40301)."))


_UNREADABLE_ACCEPT: Final = "an Accept header Jersey cannot read (error code 400)"


def _unreadable_accept(responses: dict[Any, Any]) -> None:
    """The 400 of ``http.media_ranges`` on an operation that reads Accept (it lists a 406)."""
    listed = responses.get("400", responses.get(400))
    if listed is None:
        responses["400"] = _error(_UNREADABLE_ACCEPT[0].upper() + _UNREADABLE_ACCEPT[1:] + ".")
    elif "Accept" not in listed.get("description", ""):
        listed["description"] = listed.get("description", "").rstrip(".") + "; or " + _UNREADABLE_ACCEPT + "."


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {V2: {"schema": dict(_ERROR_REF)}}}
