"""The schema registry's media types: what it reads, and what it answers in by ``Accept``.

``response_type`` picks the answer's type (the first of ``PRODUCES`` the ``Accept`` header
allows, by its q-values, read by the gateway's one Accept parser, ``service.api.accept``'s, as
Jersey reads them; ``RegistryNotAcceptable`` if it allows none); ``CONSUMES`` are the types
``requests`` reads bodies in; ``is_registry_path`` tells the error handlers which requests are
the registry's (they answer in ``SR_V1`` there). ``check_content_type`` refuses a
``Content-Type`` none of ``CONSUMES`` is. Collaborators: ``service.api.replies``
(``JSONBody``), ``service.api.accept`` (``media_ranges``).
"""

from __future__ import annotations

from typing import Final

from fastapi import Request

from service.api.accept import MalformedAccept, MediaRange, media_ranges, quality
from service.api.replies import JSONBody
from service.errors import RegistryBadRequest, RegistryNotAcceptable, RegistryUnsupportedMediaType
from service.wire.formats import media_type

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


def check_content_type(request: Request) -> None:
    """415 when the request's ``Content-Type`` is compatible with none of ``CONSUMES``, which every
    resource of Confluent's registry declares: Jersey's ``MethodSelectingRouter`` checks it on
    every request that names one (a GET's too), before it reads ``Accept``."""
    mt = media_type(request.headers.get("content-type"))
    if not mt:
        return
    kind, _, sub = mt.partition("/")
    if not any(MediaRange(kind, sub or "*").admits(consumed) for consumed in CONSUMES):
        raise RegistryUnsupportedMediaType("HTTP 415 Unsupported Media Type")  # Jersey's words


def response_type(request: Request) -> str:
    """The media type of the answer, by ``Accept`` (``service.api.accept.media_ranges``, as Jersey
    reads it): the one of ``PRODUCES`` with the highest ``q``, the first of them on a tie (an item
    weighted 0 is served too: Jersey orders by ``q``, it does not drop it); ``RegistryNotAcceptable``
    if it admits none, ``RegistryBadRequest`` if Jersey cannot read it; the ``Content-Type``
    first, as Jersey (``check_content_type``)."""
    check_content_type(request)
    try:
        ranges = media_ranges(request.headers.get("accept"))
    except MalformedAccept as exc:
        raise RegistryBadRequest(f"HTTP 400 Bad Request: the Accept header cannot be read: {exc}.") from None
    best = max(PRODUCES, key=lambda produced: quality(ranges, produced))  # the first of the best
    if quality(ranges, best) < 0:
        raise RegistryNotAcceptable("HTTP 406 Not Acceptable")  # Jersey's words, as Confluent's
    return best
