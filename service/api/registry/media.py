"""The schema registry's media types: what it reads, and what it answers in by ``Accept``.

``response_type`` picks the answer's type (the first of ``PRODUCES`` the ``Accept`` header
allows, by its q-values; ``RegistryNotAcceptable`` if it allows none); ``CONSUMES`` are the types
``requests`` reads bodies in; ``is_registry_path`` tells the error handlers which requests are
the registry's (they answer in ``SR_V1`` there). Collaborators: ``service.api.http.JSONBody``.
"""

from __future__ import annotations

from typing import Final

from fastapi import Request

from service.api.http import JSONBody
from service.errors import RegistryNotAcceptable

PREFIX: Final = "/schema-registry"
SR_V1: Final = "application/vnd.schemaregistry.v1+json"
SR_DEFAULT: Final = "application/vnd.schemaregistry+json"
JSON: Final = "application/json"
# What the registry answers in, best first (Confluent's qs 0.9, 0.8, 0.5), and what it reads.
PRODUCES: Final = (SR_V1, SR_DEFAULT, JSON)
CONSUMES: Final = frozenset({SR_V1, SR_DEFAULT, JSON, "application/octet-stream"})


class RegistryJSON(JSONBody):
    media_type = SR_V1


def is_registry_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def response_type(request: Request) -> str:
    """The media type of the answer, by ``Accept`` (``RegistryNotAcceptable`` if it allows none)."""
    accept = request.headers.get("accept")
    if not accept or not accept.strip():
        return SR_V1
    best: tuple[float, int] | None = None
    for rank, produced in enumerate(PRODUCES):
        q = _quality(accept, produced)
        if q > 0 and (best is None or q > best[0]):
            best = (q, rank)
    if best is None:
        raise RegistryNotAcceptable(f"HTTP 406 Not Acceptable: answers are one of {', '.join(PRODUCES)}.")
    return PRODUCES[best[1]]


def _quality(accept: str, produced: str) -> float:
    kind = produced.split("/", 1)[0]
    found = 0.0
    for item in accept.split(",")[:32]:
        mt, *params = (p.strip() for p in item.split(";"))
        mt = mt.lower()
        if mt not in (produced, f"{kind}/*", "*/*"):
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0
        found = max(found, q)
    return found
