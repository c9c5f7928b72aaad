"""The schema registry's media types: what it reads, and what it answers in by ``Accept``.

``response_type`` picks the answer's type (the first of ``PRODUCES`` the ``Accept`` header
allows, by its q-values, ``*`` and ``*/x`` allowing any, as Jersey reads them;
``RegistryNotAcceptable`` if it allows none); ``CONSUMES`` are the types
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


# A subject may hold "/", sent percent-encoded ("%2F") in its one path segment. RawPathGuard
# hands routing that segment with this character in place of each "/" (routing sees one segment)
# and refuses any path that decodes to hold it; the routes' ``subject`` parameter turns it back.
SLASH: Final = "\uffff"
_SUBJECT_AFTER: Final = {("subjects",): 3, ("config",): 3, ("mode",): 3, ("compatibility", "subjects"): 4}


def subject_segment(segments: list[bytes]) -> int | None:
    """Which of a path's decoded ``segments`` (split at "/", the first empty) is a registry
    subject, the only segment of a registry path that may hold an encoded "/"; None if none is."""
    if len(segments) < 4 or segments[1] != PREFIX[1:].encode():
        return None
    for head, at in _SUBJECT_AFTER.items():
        if tuple(s.decode("latin-1") for s in segments[2 : 2 + len(head)]) == head and len(segments) > at:
            return at
    return None


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
        raise RegistryNotAcceptable("HTTP 406 Not Acceptable")  # Jersey's words, as Confluent's
    return PRODUCES[best[1]]


def _quality(accept: str, produced: str) -> float:
    kind = produced.split("/", 1)[0]
    found = 0.0
    for item in accept.split(",")[:32]:
        mt, *params = (p.strip() for p in item.split(";"))
        mt = mt.lower()
        # Jersey, under Confluent's registry, reads "*" as "*/*" and a wildcard type ("*/x") as
        # matching any type: both are served.
        if mt not in (produced, f"{kind}/*", "*") and not mt.startswith("*/"):
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
