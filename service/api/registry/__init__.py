"""Confluent's schema-registry API, served under ``/schema-registry``.

Its routes: schemas, subjects, compatibility, config and mode.

A registry client is pointed at ``http://host:8082/schema-registry`` and finds the routes,
bodies, query parameters and error codes of Confluent's registry (``RegistryErrorCode``).
Requests may be ``application/vnd.schemaregistry.v1+json``, ``application/vnd.schemaregistry+json``,
``application/json`` or ``application/octet-stream``; answers take the first of the three
JSON types the ``Accept`` header allows, in that order of preference (406 if it allows none).
Each route parses, calls the registry (``service.core.schemas.registry``), and shapes its answer.

The routes are grouped by resource (``schemas``: the root and schemas by id; ``subjects``:
subjects and their versions; ``compatibility``; ``config``: config and mode) over what they
share: the media types (``media``), the registry a route reaches and the router it is declared
on (``served``), what it takes (``requests``) and how it answers (``answers``); ``router`` puts
their routes together.
"""

from .media import (
    CONSUMES,
    JSON,
    PREFIX,
    PRODUCES,
    SLASH,
    SR_DEFAULT,
    SR_V1,
    RegistryJSON,
    is_registry_path,
    response_type,
    subject_segment,
)
from .router import router
from .served import ExternalRegistryInUse, Served, served_registry

__all__ = [
    "CONSUMES",
    "JSON",
    "PREFIX",
    "PRODUCES",
    "SLASH",
    "SR_DEFAULT",
    "SR_V1",
    "ExternalRegistryInUse",
    "RegistryJSON",
    "Served",
    "is_registry_path",
    "response_type",
    "router",
    "served_registry",
    "subject_segment",
]
