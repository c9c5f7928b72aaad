"""The most common produce body of all, read without a JSON parser: binary values and nothing else.

A body of the shape ``{"records":[{"value":"<base64>"},...]}`` (with any JSON whitespace
between its tokens) is cut at its quotes, in C: its pieces alternate between the text around
the strings and the strings themselves, so checking the pieces between the strings checks the
whole shape, and each value comes out as the bytes between its two quotes, ready for base64.
No dict nor ``str`` per record, and no depth measure: the shape nests three levels, within any
``max_json_depth`` (at least 4).

It is how the binary format's bodies of values alone are read (``records.parse_produce`` reads
those of the other plain formats, once parsed): the JSON parse and the depth measure of a body
of a thousand values cost about what decoding them does. It takes a body only when the general
way (``http.loads`` then ``records.parse_produce``) would take it and give the same records: a
string holding an escape has a backslash, which is not base64, so every value that decodes is
the very text between its quotes. Anything else (a
key, a null, an escape, a record over the size limit, too many records, not JSON) is ``None``,
and the general way reads the body, refusing what it refuses with its own words.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Final, cast

import pybase64

from service.core.models import NewRecords

from .records import ParsedProduce

DEPTH: Final = 3  # how deeply the shape nests: an object, its array, a record
_SPACE: Final = b" \t\n\r"  # JSON's whitespace, allowed between any two tokens
_OPEN: Final = b"{"  # before "records"
_START: Final = b":[{"  # between "records" and the first "value"
_COLON: Final = b":"  # between "value" and its string
_BETWEEN: Final = b"},{"  # between one record and the next
_CLOSE: Final = b"}]}"  # after the last value


def binary_values(body: bytes, *, max_record_bytes: int, max_records: int | None) -> ParsedProduce | None:
    """The records of a body of binary values alone, each within ``max_record_bytes`` and at most
    ``max_records`` of them; ``None`` when the body is anything else."""
    # {"records":[{"value":"v1"},{"value":"v2"}]} -> '{' records ':[{' (value ':' v '},{')... '}]}':
    # two quotes, then four a record. Cut at most at the quotes of max_records records, so that a
    # body of quotes never becomes a list of millions of pieces (its last piece holds the rest).
    pieces = body.split(b'"', -1 if max_records is None else 2 + 4 * max_records)
    count, rest = divmod(len(pieces) - 3, 4)
    if rest or count < 1 or b'"' in pieces[-1]:
        return None
    if pieces[1] != b"records" or pieces[3::4].count(b"value") != count:
        return None
    if not (
        _is(pieces[0], _OPEN)
        and _is(pieces[2], _START)
        and _all_are(pieces[4::4], _COLON)
        and _all_are(pieces[6:-1:4], _BETWEEN)
        and _is(pieces[-1], _CLOSE)
    ):
        return None
    decode = pybase64.b64decode
    try:
        # (s, altchars, validate) by position: pybase64 reads a keyword argument slower than it decodes 100 B
        values = [decode(value, None, True) for value in pieces[5::4]]
    except ValueError:  # not base64 (binascii.Error is one): an escape, or a value to refuse
        return None
    sizes = list(map(len, values))
    if max(sizes) > max_record_bytes:
        return None
    return ParsedProduce(NewRecords(cast(list[bytes | None], values)), None, sum(sizes))


def _is(piece: bytes, text: bytes) -> bool:
    """Whether ``piece`` is ``text`` with JSON whitespace before, after or inside it (between tokens)."""
    return piece == text or piece.translate(None, _SPACE) == text


def _all_are(pieces: list[bytes], text: bytes) -> bool:
    """``_is`` of every piece: one C pass when all are ``text`` exactly, else each distinct piece."""
    return pieces.count(text) == len(pieces) or all(_is(piece, text) for piece in set(pieces))
