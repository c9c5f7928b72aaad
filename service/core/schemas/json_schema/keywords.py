"""The differences of single keywords and the helpers of combined schemas, as Confluent's checker
finds them: annotations (``ID_CHANGED`` …, all compatible), the limits of strings, numbers, objects
and arrays (``MAX_LENGTH_DECREASED`` …), ``pattern``, ``multipleOf`` and integer against number,
``enum``; and for ``compatibility``'s combined schemas, their distinct branches and a maximum
matching of compatible branches.
"""

from __future__ import annotations

from typing import Any, Final

from .constraints import number, requires_integer, same_value
from .differences import Difference, Diffs

_LIMITS: Final = {
    "string": (("maxLength", "MAX_LENGTH"), ("minLength", "MIN_LENGTH")),
    "number": (
        ("maximum", "MAXIMUM"),
        ("minimum", "MINIMUM"),
        ("exclusiveMaximum", "EXCLUSIVE_MAXIMUM"),
        ("exclusiveMinimum", "EXCLUSIVE_MINIMUM"),
    ),
    "object": (("maxProperties", "MAX_PROPERTIES"), ("minProperties", "MIN_PROPERTIES")),
    "array": (
        ("maxItems", "MAX_ITEMS"),
        ("minItems", "MIN_ITEMS"),
        ("maxContains", "MAX_CONTAINS"),
        ("minContains", "MIN_CONTAINS"),
    ),
}


def limits(kind: str, w: dict[str, Any], r: dict[str, Any]) -> Diffs:
    found: Diffs = []
    for keyword, rule in _LIMITS[kind]:
        mine, theirs = number(w.get(keyword)), number(r.get(keyword))
        if mine == theirs:
            continue
        if mine is None:
            found.append(Difference(f"{rule}_ADDED", keyword))
        elif theirs is None:
            found.append(Difference(f"{rule}_REMOVED", keyword))
        else:
            change = "INCREASED" if mine < theirs else "DECREASED"
            found.append(Difference(f"{rule}_{change}", keyword))
    return found


def annotation_changes(w: Any, r: Any) -> Diffs:
    """Changes of id, title, description and default (all compatible)."""
    found: Diffs = []
    for keywords, rule in (
        (("$id", "id"), "ID_CHANGED"),
        (("title",), "TITLE_CHANGED"),
        (("description",), "DESCRIPTION_CHANGED"),
        (("default",), "DEFAULT_CHANGED"),
    ):
        mine = next((w[k] for k in keywords if isinstance(w, dict) and k in w), None)
        theirs = next((r[k] for k in keywords if isinstance(r, dict) and k in r), None)
        if not same_value(mine, theirs):
            found.append(Difference(rule, ""))
    return found


def pattern(w: dict[str, Any], r: dict[str, Any]) -> Diffs:
    mine, theirs = w.get("pattern"), r.get("pattern")
    if mine is None and theirs is not None:
        return [Difference("PATTERN_ADDED", "pattern")]
    if mine is not None and theirs is None:
        return [Difference("PATTERN_REMOVED", "pattern")]
    if mine != theirs:
        return [Difference("PATTERN_CHANGED", "pattern")]
    return []


def number_differences(w: dict[str, Any], r: dict[str, Any]) -> Diffs:
    found: Diffs = []
    mine, theirs = number(w.get("multipleOf")), number(r.get("multipleOf"))
    if mine != theirs:
        if mine is None:
            rule = "MULTIPLE_OF_ADDED"
        elif theirs is None:
            rule = "MULTIPLE_OF_REMOVED"
        elif mine != 0 and theirs % mine == 0:
            rule = "MULTIPLE_OF_EXPANDED"
        elif theirs != 0 and mine % theirs == 0:
            rule = "MULTIPLE_OF_REDUCED"
        else:
            rule = "MULTIPLE_OF_CHANGED"
        found.append(Difference(rule, "multipleOf"))
    if requires_integer(w) != requires_integer(r):
        found.append(Difference("TYPE_EXTENDED" if requires_integer(w) else "TYPE_NARROWED", ""))
    return found


def enum(mine: list[Any], theirs: list[Any]) -> Diffs:
    def within(values: list[Any], others: list[Any]) -> bool:
        return all(any(same_value(v, o) for o in others) for v in values)

    wider, narrower = within(mine, theirs), within(theirs, mine)
    if wider and narrower:
        return []
    rule = "ENUM_ARRAY_EXTENDED" if wider else "ENUM_ARRAY_NARROWED" if narrower else "ENUM_ARRAY_CHANGED"
    return [Difference(rule, "enum")]


def distinct(parts: tuple[Any, ...]) -> tuple[Any, ...]:
    """Branches with the same JSON once (Confluent collapses duplicates through a set)."""
    seen: list[Any] = []
    out = []
    for part in parts:
        if not any(same_value(part, s) and type(part) is type(s) for s in seen):
            seen.append(part)
            out.append(part)
    return tuple(out)


def matching(edges: dict[int, list[int]]) -> dict[int, int]:
    """A maximum matching of writer branches to reader branches: reader branch -> writer branch."""
    partner: dict[int, int] = {}

    def augment(node: int, seen: set[int]) -> bool:
        for other in edges.get(node, []):
            if other not in seen:
                seen.add(other)
                if other not in partner or augment(partner[other], seen):
                    partner[other] = node
                    return True
        return False

    for node in edges:
        augment(node, set())
    return partner
