"""Regular expressions in RE2: ``pattern`` and ``patternProperties`` are matched in linear time.

Every pattern of a schema must be RE2 syntax, and is compiled once, when the schema is parsed
(``schema.JsonSchemaFormat``): no schema and value can stall the gateway. The codec's validator
matches ``pattern``, ``patternProperties`` and ``additionalProperties`` through ``_keywords``;
``compatibility`` matches property names with the same options. ``_short`` quotes a value in a
message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Final

import re2
from jsonschema.exceptions import ValidationError

from ..model import InvalidSchema


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the client's error, not a log line
    options.never_capture = True
    options.max_mem = 8 << 20
    return options


_RE2_OPTIONS: Final = _re2_options()


class _Patterns:
    """The schema's regular expressions compiled by RE2, once per parsed schema."""

    def __init__(self) -> None:
        self._compiled: dict[str, Any] = {}

    def add(self, pattern: str, where: str) -> None:
        if pattern in self._compiled:
            return
        try:
            self._compiled[pattern] = re2.compile(pattern, _RE2_OPTIONS)
        except (re2.error, UnicodeEncodeError) as exc:
            detail = exc.args[0] if exc.args else exc
            if isinstance(detail, bytes):
                detail = detail.decode("utf-8", "replace")
            raise InvalidSchema(
                f"{where}: pattern {pattern!r} is not a regular expression in RE2 syntax (patterns are "
                f"matched in linear time: no lookarounds or backreferences): {detail}"
            ) from None

    def search(self, pattern: str, text: str) -> bool:
        compiled = self._compiled.get(pattern)
        if compiled is None:  # a pattern in a referenced document: compiled there, compiled again here
            self.add(pattern, "pattern")
            compiled = self._compiled[pattern]
        return compiled.search(text) is not None


def _keywords(patterns: _Patterns) -> dict[str, Callable[..., Iterator[ValidationError]]]:
    """``pattern``, ``patternProperties`` and ``additionalProperties`` matched by RE2."""

    def pattern(validator: Any, regex: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not patterns.search(regex, instance):
            yield ValidationError(f"{_short(instance)} does not match {regex!r}")

    def pattern_properties(
        validator: Any, value: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        for regex, subschema in value.items():
            for key, item in instance.items():
                if patterns.search(regex, key):
                    yield from validator.descend(item, subschema, path=key, schema_path=regex)

    def additional_properties(
        validator: Any, value: Any, instance: Any, schema: Any
    ) -> Iterator[ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        declared = schema.get("properties", {})
        regexes = list(schema.get("patternProperties", {}))
        extras = [
            key
            for key in instance
            if key not in declared and not any(patterns.search(regex, key) for regex in regexes)
        ]
        if validator.is_type(value, "object"):
            for key in extras:
                yield from validator.descend(instance[key], value, path=key)
        elif value is False and extras:
            names = ", ".join(repr(k) for k in sorted(extras))
            yield ValidationError(f"additional properties are not allowed ({names} unexpected)")

    return {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
    }


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
