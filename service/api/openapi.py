"""The OpenAPI document of the application: FastAPI's, completed with what it cannot see.

The routers parse some bodies themselves (``http.BODY_MODELS``): their models are added to the
components. The security schemes are the three authentication methods; the always-open paths
(``auth.ALWAYS_OPEN``) need none. ``openapi.yaml`` is this document (``make openapi``), and a test
proves the file equals what the app serves.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from api_schemas.formats import V2
from service.api.auth import ALWAYS_OPEN
from service.api.http import BODY_MODELS

__all__ = ["SECURITY_SCHEMES", "build_openapi"]


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the request-body models the routers parse themselves."""
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, model in sorted(BODY_MODELS.items()):
        model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for def_name, definition in model_schema.pop("$defs", {}).items():
            components.setdefault(def_name, definition)
        components[name] = model_schema
    for methods in schema["paths"].values():
        for operation in methods.values():
            # FastAPI declares the bare ``Response`` of a 201 (createAcls) as a JSON string; it
            # has no body, and a generated client must not try to parse one.
            created = operation.get("responses", {}).get("201", {})
            if created.get("content", {}).get(V2, {}) == {"schema": {"type": "string"}}:
                del created["content"]
            # Where a route declares a model for its ``Response``, FastAPI leaves the string type
            # beside the model's reference: the reference alone says what the body is.
            for response in operation.get("responses", {}).values():
                for content in response.get("content", {}).values():
                    body = content.get("schema", {})
                    if "$ref" in body and body.get("type") == "string":
                        del body["type"]
    schema["components"]["securitySchemes"] = SECURITY_SCHEMES
    # Any one of the methods the gateway was started with; none when authentication is off ({}).
    schema["security"] = [{}, *({name: []} for name in SECURITY_SCHEMES)]
    for path in ALWAYS_OPEN:
        for operation in schema["paths"].get(path, {}).values():
            operation["security"] = []
    return schema


SECURITY_SCHEMES: dict[str, Any] = {
    "basic": {
        "type": "http",
        "scheme": "basic",
        "description": "AUTH=basic: a user of the gateway's credentials file (brokergate users).",
    },
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "AUTH=jwt: a token of the configured OpenID Connect issuer.",
    },
    "mtls": {
        "type": "mutualTLS",
        "description": "AUTH=mtls: a client certificate signed by the configured CA.",
    },
}
