"""The Accept header, read as Jersey reads it under Confluent's proxy and registry: one parser
(``media_ranges``) for every route, the v2 routes' 406 and 400, and the embedded formats a records
route may answer in."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Final

from fastapi import Depends, Request

from service.core.models import EmbeddedFormat
from service.errors import BadRequest, NotAcceptable
from service.wire.formats import FORMATS, V2, content_type_for

from .bodies import check_control_type

# What a v2 control route answers in (Confluent's resources produce application/vnd.kafka.v2+json),
# and the types that admit it: plain JSON too, as a generated client asks for it, and wildcards.
V2_ANSWERS = frozenset({V2, "application/json", "application/vnd.kafka+json"})


class MalformedAccept(ValueError):
    """An Accept header Jersey cannot read, under Confluent's proxy and registry: their 400."""


@dataclass(frozen=True, slots=True)
class MediaRange:
    """One item of an Accept header as Jersey's ``AcceptableMediaType`` reads it: ``*`` is
    ``*/*``, a type alone (``application``) is that type's ``/*``, ``q`` in thousandths."""

    type: str
    subtype: str
    q: int = 1000

    def admits(self, produced: str) -> bool:
        """Whether this range admits the media type ``produced``; a wildcard type (``*/x`` too) admits any.

        The rule of JAX-RS's ``MediaType.isCompatible``, which Confluent's proxy answers by.
        """
        kind, _, sub = produced.partition("/")
        return self.type == "*" or (self.type == kind and self.subtype in ("*", sub))


_SEPARATORS: Final = frozenset('()<>@,;:\\"/[]?={} \t')
_ANY: Final = (MediaRange("*", "*"),)


def media_ranges(accept: str | None) -> tuple[MediaRange, ...]:
    """The items of an Accept header (none or empty: ``*/*``), read as Jersey's
    ``HttpHeaderReader`` reads them; ``MalformedAccept`` where it refuses one: an empty item but
    the last, a type or subtype that is no token, whitespace inside a type or around ``=``, a
    parameter without a value, a ``q`` its ``readQualityFactor`` refuses (``abc``, ``2``, ``-1``)."""
    if not accept:
        return _ANY
    ranges: list[MediaRange] = []
    at = _space(accept, 0)
    while at < len(accept):
        item, at = _media_range(accept, at)
        ranges.append(item)
        if at < len(accept):  # at a comma
            at = _space(accept, at + 1)
    return tuple(ranges)


def _media_range(text: str, at: int) -> tuple[MediaRange, int]:
    """The media range at ``at`` (AcceptableMediaType.valueOf), and where it ends: a comma or the end."""
    kind, at = _token(text, at, "a media type")
    subtype = "*"
    if text.startswith("/", at):
        subtype, at = _token(text, at + 1, "a subtype")
    params: dict[str, str] = {}
    while (at := _space(text, at)) < len(text) and text[at] != ",":
        if text[at] != ";":
            raise MalformedAccept(f"';' expected at {at}")
        while at < len(text) and (text[at] == ";" or text[at] in " \t\r\n"):
            at += 1
        if at == len(text) or text[at] == ",":
            break
        name, at = _token(text, at, "a parameter")
        if not text.startswith("=", at):
            raise MalformedAccept(f"'=' expected at {at}")
        value, at = _quoted(text, at + 1) if text.startswith('"', at + 1) else _token(text, at + 1, "a value")
        params[name.lower()] = value
    q = _quality_factor(params["q"]) if "q" in params else 1000
    return MediaRange(kind.lower(), subtype.lower(), q), at


def _space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _token(text: str, at: int, what: str) -> tuple[str, int]:
    end = at
    while end < len(text) and " " < text[end] < "\x7f" and text[end] not in _SEPARATORS:
        end += 1
    if end == at:
        raise MalformedAccept(f"{what} expected at {at}")
    return text[at:end], end


def _quoted(text: str, at: int) -> tuple[str, int]:
    out: list[str] = []
    at += 1
    while at < len(text):
        if text[at] == "\\":
            at += 1
        elif text[at] == '"':
            return "".join(out), at + 1
        out.append(text[at : at + 1])
        at += 1
    raise MalformedAccept("a quoted string is not closed")


def _quality_factor(value: str) -> int:
    """Jersey's ``readQualityFactor``, in thousandths: ``0``, ``1`` or ``.``, a point, digits;
    five characters at most; not above 1."""
    if not 0 < len(value) <= 5 or value[0] not in "01." or value == ".":
        raise MalformedAccept(f"the quality value {value!r} is not 0 to 1")
    if value[0] != "." and len(value) > 1 and value[1] != ".":
        raise MalformedAccept(f"the quality value {value!r} is not 0 to 1")
    fraction = value[2:] if value[0] != "." else value[1:]
    if not all("0" <= c <= "9" for c in fraction):
        raise MalformedAccept(f"the quality value {value!r} is not 0 to 1")
    thousandths = int(fraction[:3].ljust(3, "0")) if fraction else 0
    if value[0] == "1":
        if thousandths:
            raise MalformedAccept(f"the quality value {value!r} is greater than 1")
        return 1000
    return thousandths


def quality(ranges: Iterable[MediaRange], produced: str) -> int:
    """The best ``q`` of the ranges that admit ``produced``; -1 when none does."""
    return max((r.q for r in ranges if r.admits(produced)), default=-1)


def acceptable(accept: str | None, answers: Collection[str] = V2_ANSWERS) -> bool:
    """Whether an Accept header admits one of ``answers`` (no header does), an item weighted 0
    too: Jersey selects by compatibility and only orders by ``q``; ``MalformedAccept`` if Jersey
    cannot read it."""
    ranges = media_ranges(accept)
    return any(quality(ranges, answer) >= 0 for answer in answers)


# Confluent's consumers resource also answers its control routes in every embedded format's type,
# "so you can always use these headers when interacting with" it.
CONSUMER_ANSWERS = V2_ANSWERS | {content_type_for(fmt) for fmt in FORMATS}


def accepts_v2(request: Request) -> None:
    """The v2 control routes' checks, a dependency: the Content-Type first (415), as Jersey checks
    a resource's ``@Consumes`` before Accept, on every method; then 406 when the client accepts
    none of the v2 JSON types. (Confluent's Jersey sends its 406 without a body; the docs list that.)"""
    check_control_type(request)
    check_accept(request.headers.get("accept"))


def accepts_v2_reading_any(request: Request) -> None:
    """``accepts_v2`` for a route whose resource consumes any Content-Type (the brokers'): Accept only."""
    check_accept(request.headers.get("accept"))


def accepts_consumer_types(request: Request) -> None:
    """``accepts_v2`` for the consumer routes, which answer in the embedded formats' types too."""
    check_control_type(request)
    check_accept(request.headers.get("accept"), CONSUMER_ANSWERS)


def check_accept(accept: str | None, answers: Collection[str] = V2_ANSWERS) -> None:
    """406 when the Accept header admits none of ``answers``; 400 when Jersey cannot read it."""
    try:
        admitted = acceptable(accept, answers)
    except MalformedAccept as exc:
        raise _unreadable(exc) from None
    if not admitted:
        raise NotAcceptable(
            f"HTTP 406 Not Acceptable: this route answers in {V2} or application/json, not {accept[:100]!r}."
            if accept
            else "HTTP 406 Not Acceptable"
        )


_ANY_FORMAT: Final = V2_ANSWERS | {"application/*"}


def accepted_formats(accept: str | None) -> set[EmbeddedFormat] | None:
    """The embedded formats a records route may answer in by Accept (``media_ranges``): those of
    the items it weights highest, as Jersey orders by ``q`` (an item weighted 0 too); None when
    they admit them all (no header, a wildcard, a generic v2 JSON type: the instance's or the
    default format); ``BadRequest`` when Jersey cannot read it."""
    try:
        ranges = media_ranges(accept)
    except MalformedAccept as exc:
        raise _unreadable(exc) from None
    best = -1
    any_format = False
    allowed: set[EmbeddedFormat] = set()
    for r in ranges:
        everything = r.type == "*" or f"{r.type}/{r.subtype}" in _ANY_FORMAT
        formats = set() if everything else {fmt for fmt in FORMATS if r.admits(content_type_for(fmt))}
        if (not everything and not formats) or r.q < best:
            continue
        if r.q > best:
            best, any_format, allowed = r.q, False, set()
        any_format = any_format or everything
        allowed |= formats
    return None if any_format else allowed


def _unreadable(exc: MalformedAccept) -> BadRequest:
    return BadRequest(f"HTTP 400 Bad Request: the Accept header cannot be read: {exc}.")


ACCEPTS_V2 = Depends(accepts_v2)
ACCEPTS_V2_READING_ANY = Depends(accepts_v2_reading_any)
ACCEPTS_CONSUMER_TYPES = Depends(accepts_consumer_types)
