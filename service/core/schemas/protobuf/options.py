"""Custom options no file defines, taken out of a ``.proto`` text so protoc compiles the rest.

Confluent's parser reads ``option (my_option) = true;`` as written and never resolves the
extension, so it accepts a schema whose custom options are defined nowhere; protoc refuses such a
file ("Option "(my_option)" unknown"). ``parsing`` compiles the text again with each option protoc
names that way blanked out (replaced by spaces, line breaks kept, so every other error keeps its
line and column): an option statement (``option (x) = …;``) or one entry of a field's or enum
value's ``[…]`` list (the list itself when it was its only entry). The stored text keeps them.

Collaborators: none; ``parsing`` calls ``unknown`` on protoc's messages and ``blank`` on the text.
"""

from __future__ import annotations

import re
from typing import Final

_UNKNOWN: Final = re.compile(r'Option "\(.+\)[^"]*" unknown')
_NAME: Final = re.compile(r"\([A-Za-z0-9_.\s]+\)(\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*")
_TAB: Final = 8  # protoc's tokenizer counts a tab as a move to the next multiple of 8


def unknown(message: str) -> bool:
    """Whether protoc's ``message`` is about a custom option no file defines."""
    return _UNKNOWN.match(message) is not None


def blank(text: str, line: int, column: int) -> str | None:
    """``text`` without the custom option whose name starts at ``line``:``column`` (protoc's,
    from 0); None if no option is there."""
    start = _offset(text, line, column)
    if start is None or not (name := _NAME.match(text, start)):
        return None
    value = _skip_space(text, name.end())
    if value >= len(text) or text[value] != "=":
        return None
    end = _value_end(text, _skip_space(text, value + 1))
    before = _back_space(text, start)
    after = _skip_space(text, end)
    if text[max(0, before - 6) : before] == "option":
        if after >= len(text) or text[after] != ";":
            return None
        return _spaces(text, before - 6, after + 1)
    if before > 0 and text[before - 1] == ",":
        return _spaces(text, before - 1, end)
    if before > 0 and text[before - 1] == "[" and after < len(text):
        if text[after] == ",":
            return _spaces(text, start, after + 1)
        if text[after] == "]":
            return _spaces(text, before - 1, after + 1)
    return None


def _offset(text: str, line: int, column: int) -> int | None:
    lines = text.split("\n")
    if not 0 <= line < len(lines):
        return None
    offset = sum(len(previous) + 1 for previous in lines[:line])
    at = 0
    for index, char in enumerate(lines[line]):
        if at >= column:
            return offset + index if char == "(" else None
        at += _TAB - at % _TAB if char == "\t" else len(char.encode("utf-8", "surrogatepass"))
    return None


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index].isspace():
        index += 1
    return index


def _back_space(text: str, index: int) -> int:
    while index > 0 and text[index - 1].isspace():
        index -= 1
    return index


def _value_end(text: str, index: int) -> int:
    """Where the option's value starting at ``index`` ends: a braced message value with what it
    nests, or a scalar up to the ``,``, ``]`` or ``;`` after it (quoted strings skipped)."""
    depth = 0
    while index < len(text):
        char = text[index]
        if char in "\"'":
            index = _string_end(text, index)
            continue
        if char in "{[":
            depth += 1
        elif char in "}]" and depth:
            depth -= 1
            if not depth and char == "}":
                return index + 1
        elif char in ",];" and not depth:
            return _back_space(text, index)
        index += 1
    return index


def _string_end(text: str, index: int) -> int:
    quote, index = text[index], index + 1
    while index < len(text) and text[index] not in (quote, "\n"):
        index += 2 if text[index] == "\\" else 1
    return index + 1


def _spaces(text: str, start: int, end: int) -> str:
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]
