"""The OpenAPI document of the application: FastAPI's, completed with what it cannot see.

The routers bind their bodies themselves, and declare them (``bodies.request_body``) as the
models' schemas, which are moved into the components here. ``openapi_answers`` says what each
operation answers as the gateway answers it. The security schemes are the three authentication
methods; the always-open paths (``auth.ALWAYS_OPEN``) need none. Generated clients read the
document too: a field a request may leave out is optional in it (``_optional_fields``), and
every path is written without a trailing ``/``. ``openapi.yaml`` is this document (``make
openapi``); tests prove the file equals what the app serves, that Redocly's recommended rules
find nothing in it, and that a TypeScript client generated from it runs the v2 flow
(tests/e2e/test_typescript_client.py).
"""

from __future__ import annotations

from typing import Any, Final

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from service.api.auth import ALWAYS_OPEN
from service.wire.formats import V2

from .openapi_answers import document_answers

__all__ = ["LICENSE", "SECURITY_SCHEMES", "SERVERS", "build_openapi"]

# pyproject.toml's license (a test keeps them equal).
LICENSE: Final[dict[str, str]] = {"name": "Apache License 2.0", "identifier": "Apache-2.0"}
# The gateway serving the document: its paths are relative to where the document was fetched.
SERVERS: Final[list[dict[str, str]]] = [{"url": "/", "description": "The gateway serving this document."}]


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document completed as the module doc says."""
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        license_info=LICENSE,
        servers=SERVERS,
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    models: dict[str, dict[str, Any]] = {}
    for methods in schema["paths"].values():
        for operation in methods.values():
            _body_models(operation, models)
    requests: set[str] = set()  # the body models, and the models they hold
    for name, model_schema in sorted(models.items()):
        model_schema = dict(model_schema)
        for def_name, definition in model_schema.pop("$defs", {}).items():
            components.setdefault(def_name, definition)
            requests.add(def_name)
        components[name] = model_schema
        requests.add(name)
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
    document_answers(schema)
    _optional_fields(components, requests)
    schema["components"]["securitySchemes"] = SECURITY_SCHEMES
    # Any one of the methods the gateway was started with; none when authentication is off ({}).
    schema["security"] = [{}, *({name: []} for name in SECURITY_SCHEMES)]
    for path in ALWAYS_OPEN:
        for operation in schema["paths"].get(path, {}).values():
            operation["security"] = []
    schema["paths"] = {_unslashed(path): methods for path, methods in schema["paths"].items()}
    return schema


def _body_models(operation: dict[str, Any], models: dict[str, dict[str, Any]]) -> None:
    """The operation's request body referring to its models' components, by title; ``models``
    gains their schemas, as the route declared them."""
    body = operation.get("requestBody")
    if body is None:
        return
    content = {}
    for mt, described in body["content"].items():
        name = described["schema"]["title"]
        models[name] = described["schema"]
        content[mt] = {**described, "schema": {"$ref": f"#/components/schemas/{name}"}}
    operation["requestBody"] = {**body, "content": content}


def _optional_fields(components: dict[str, Any], requests: set[str]) -> None:
    """No ``default`` where a generator would make the field required for it.

    openapi-typescript (and others) read a property with a default as one that is always there.
    A ``null`` default means the field may be absent: it goes, everywhere. In a request body
    (``requests``: the body models and the models they hold) every field with a default may be
    left out: the default goes too, and the description says it.
    """
    for name, component in components.items():
        for prop in component.get("properties", {}).values():
            if "default" not in prop:
                continue
            default = prop["default"]
            if default is None:
                del prop["default"]
            elif name in requests:
                del prop["default"]
                said = prop.get("description", "")
                if "default" not in said.lower():
                    prop["description"] = f"{said} Default: {_shown(default)}.".strip()


def _shown(value: Any) -> str:
    return f"`{value}`" if not isinstance(value, bool) else f"`{str(value).lower()}`"


def _unslashed(path: str) -> str:
    """A path as the document lists it: without a trailing ``/`` (the gateway serves both forms,
    ``slashes.TrailingSlash``), so ``/schema-registry/`` is ``/schema-registry``."""
    return path.rstrip("/") or "/"


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
