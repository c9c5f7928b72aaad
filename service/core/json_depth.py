"""How deeply a JSON text nests, measured on its bytes without recursion.

Every JSON a client sends (a request body, a WebSocket message, a schema's text) is measured
here before it is parsed: a value nested hundreds of levels deep would otherwise reach code
that walks it recursively (the standard library's parser, a schema's codec) and end in a
``RecursionError``, a 500 with a traceback in the log. orjson parses up to 1,024 levels
itself, so the limit has to be checked before, and by something that cannot recurse.

The measure works on bytes with the C loops of ``bytes``: strings are cut out (a bracket
inside one is text), everything but brackets is deleted, and then innermost pairs are
removed a level at a time, at most ``limit`` + 1 times (or, when few and long runs of
brackets are left, the runs are walked). A text that is not JSON
gets a depth too (its unmatched brackets simply stay); parsing it refuses it afterwards.

Pure: no I/O, no import of the rest of the core.
"""

from __future__ import annotations

import re
from typing import Final

from service.errors import InvalidPayload

# How deeply a schema's own JSON may nest (an Avro record within a record takes three levels):
# what the schema codecs, recursive, walk safely within Python's recursion limit.
MAX_SCHEMA_DEPTH: Final = 128

# Objects and arrays nest alike: ``{`` and ``[`` open, ``}`` and ``]`` close.
_BRACKETS: Final = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_MARKS: Final = bytes(b for b in range(256) if b not in b'[]{}"')  # brackets and quotes are kept
_RUNS: Final = re.compile(rb"\[+|\]+")
_OPEN: Final = ord("[")
# Walk the runs when there are fewer than one per this many brackets (each costs a Python step).
_FEW_RUNS: Final = 16


def exceeds(text: bytes | str, limit: int) -> bool:
    """Whether ``text`` nests objects and arrays more than ``limit`` levels deep."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    brackets = _brackets(data)
    # Fewer openings than the limit cannot nest past it: most texts stop here. Counted among the
    # brackets, not the text: a produce body is mostly strings, and counting a byte in 150 KB
    # cost as much as cutting the strings out.
    if brackets.count(b"[") <= limit:
        return False
    levels = 0
    while levels <= limit:
        # ``[]`` marks where a run of openings meets a run of closings: one per innermost pair.
        innermost = brackets.count(b"[]")
        if not innermost:  # nothing left, or unmatched brackets only (not JSON: the parser says so)
            return False
        if innermost * _FEW_RUNS <= len(brackets):
            # Long runs (deep chains): walk the runs, few of them, rather than peel a level a pass.
            return levels + _runs_depth(brackets) > limit
        # Many short runs: one pass removes every innermost pair, a level, and a good part of the text.
        brackets = brackets.replace(b"[]", b"")
        levels += 1
    return True


def _brackets(data: bytes) -> bytes:
    """The brackets of ``data`` outside its strings, ``{}`` written ``[]``."""
    if b'"' not in data:
        return data.translate(_BRACKETS, _NOT_BRACKETS)
    if b"\\" in data:  # escapes are read on the whole text: a backslash escapes what follows it
        return _without_strings(data).translate(_BRACKETS, _NOT_BRACKETS)
    # No escapes: the quotes and brackets alone (one C pass) are all it takes to cut the strings
    # out, with no piece per string. A string without a bracket is then a pair of quotes side by
    # side; when no quote is left once those pairs go, no string held a bracket (the opening quote
    # of one that does has a bracket after it, and pairs of quotes before it pair off among
    # themselves: it stays).
    marks = data.translate(_BRACKETS, _NOT_MARKS)
    brackets = marks.replace(b'""', b"")
    return brackets if b'"' not in brackets else _without_strings(marks)


def _without_strings(data: bytes) -> bytes:
    """``data`` without its strings' contents, in C loops: escape sequences first, so that every
    quote left opens or closes a string; then every other piece between quotes is a string's."""
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(data.split(b'"')[::2])


def _runs_depth(brackets: bytes) -> int:
    """The deepest nesting of a text of brackets only, walked a run of ``[`` or ``]`` at a time."""
    depth = deepest = 0
    for run in _RUNS.finditer(brackets):
        start, end = run.span()
        if brackets[start] == _OPEN:
            depth += end - start
            deepest = max(deepest, depth)
        else:
            depth -= end - start
    return deepest


def check_depth(text: bytes | str, limit: int, what: str = "Request body") -> None:
    """Refuse ``text`` (``InvalidPayload``, 42206) if it nests more than ``limit`` levels deep."""
    if exceeds(text, limit):
        raise InvalidPayload(f"{what} nests JSON objects and arrays more than {limit} levels deep.")
