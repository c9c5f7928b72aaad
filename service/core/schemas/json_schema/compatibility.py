"""Compatibility of JSON Schemas, decided as Confluent's checker decides it (its ``diff`` package:
``SchemaDiff`` and the ``*SchemaDiff`` of each kind of schema), in its default, strict policy.

``schema.JsonSchema.reading_errors`` asks whether the reader's schema may follow the writer's:
``_Comparison`` lists the differences between them (the writer's schema is Confluent's
"original", the reader's the "update"), each named by Confluent's rule (``differences``), and the
ones Confluent's strict policy does not accept are the errors, in Confluent's words. The schemas
are compared as the typed schemas Confluent's library loads (``constraints.Shapes``):

- different kinds: ``TYPE_CHANGED``, unless the writer's is ``false`` or the reader's empty; a
  combined schema on one side only is first tried as its single branch, or (a reader's
  ``anyOf``/``oneOf``) any branch that reads the writer (``SUM_TYPE_EXTENDED``), or (a writer's
  ``allOf``) any branch the reader reads (``PRODUCT_TYPE_NARROWED``);
- strings, numbers, arrays and objects keyword by keyword (``MAX_LENGTH_DECREASED``,
  ``TYPE_NARROWED`` from number to integer, ``ITEM_ADDED_TO_OPEN_CONTENT_MODEL``,
  ``REQUIRED_ATTRIBUTE_ADDED`` …), with Confluent's content models for added and removed
  properties and items (open, closed, partially open through ``patternProperties`` or a schema of
  additional properties or items); ``propertyNames``, ``contains``, ``format`` and ``if`` are not
  compared, as Confluent does not, and changed annotations (title, description …) are compatible;
- ``enum`` by its set of values, ``const`` by its value, ``not`` the other way round;
- combined schemas by criterion (``COMBINED_TYPE_CHANGED``, ``…_EXTENDED``), by number of branches
  (``SUM_TYPE_NARROWED`` …) and by a maximum matching of compatible branches
  (``COMBINED_TYPE_SUBSCHEMAS_CHANGED`` when it does not cover the smaller side);
- ``$ref`` is followed; a pair under comparison met again (a recursive schema) counts as
  compatible, and a pair compared once is not compared again.

A comparison stops after ``MAX_COMPARISONS`` pairs of subschemas (a bound on the work a schema
with deeply nested combinators can cause) and then reports the schemas as incompatible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

import re2
import referencing
from referencing.exceptions import Unresolvable

from .constraints import (
    Shapes,
    additional,
    is_empty,
    items,
    same_value,
    unevaluated,
)
from .differences import Difference, Diffs, at, compatible
from .keywords import annotation_changes, distinct, enum, limits, matching, number_differences, pattern
from .objects import object_differences
from .patterns import _RE2_OPTIONS
from .subschemas import _enter

if TYPE_CHECKING:
    from .subschemas import Resolver

# Nested combinators make the pairs of subschemas to compare grow fast (each branch against each);
# past this many, the comparison stops and the schemas count as incompatible.
MAX_COMPARISONS: Final = 50_000


class _Document(Protocol):
    """A parsed schema as a comparison reads it (``schema.JsonSchema`` is one): its draft's
    specification. A protocol, as ``schema`` imports this module."""

    spec: referencing.Specification[Any]


class _TooComplex(Exception):
    """The comparison went past ``MAX_COMPARISONS``."""


class _Comparison:
    """One comparison of a writer's schema (original) with a reader's (update)."""

    def __init__(self, writer: _Document, reader: _Document) -> None:
        self.writer = writer
        self.reader = reader
        self.shapes = Shapes()
        self.memo: dict[tuple[int, int], Diffs] = {}
        self.running: set[tuple[int, int]] = set()
        self.seed: dict[tuple[int, int], Diffs] = {}
        self.optimistic = False
        self.budget = MAX_COMPARISONS

    def run(self, w: Any, wres: Resolver, r: Any, rres: Resolver) -> Diffs:
        """The differences between the two documents. A pass that took a cycle for compatible may
        have reused that assumption elsewhere: it is run again with the pairs found incompatible
        given, until they no longer change (as Confluent's ``SchemaDiff.compare`` iterates)."""
        while True:
            self.memo, self.running, self.optimistic = {}, set(), False
            found = self.differences(w, wres, r, rres)
            failing = {k: v for k, v in self.memo.items() if not compatible(v)}
            if not self.optimistic or failing.keys() == self.seed.keys():
                return found
            self.seed = failing

    def differences(self, w: Any, wres: Resolver, r: Any, rres: Resolver) -> Diffs:
        """All differences, paths relative to the pair (``""`` is the pair itself)."""
        w, wres = self._deref(w, wres, self.writer.spec)
        r, rres = self._deref(r, rres, self.reader.spec)
        key = (id(w), id(r))
        known = self.memo.get(key)
        if known is not None:
            return known
        if key in self.running:  # a cycle: compatible unless an earlier pass found otherwise
            seeded = self.seed.get(key)
            if seeded is not None:
                return seeded
            self.optimistic = True
            return []
        self.budget -= 1
        if self.budget < 0:
            raise _TooComplex
        self.running.add(key)
        try:
            found = self._types(w, wres, r, rres)
        finally:
            self.running.discard(key)
        self.memo[key] = found
        return found

    def _optional(self, w: Any, wres: Resolver, r: Any, rres: Resolver) -> Diffs:
        if w is None and r is None:
            return []
        if w is None:
            return [Difference("SCHEMA_ADDED", "")]
        if r is None:
            return [Difference("SCHEMA_REMOVED", "")]
        return self.differences(w, wres, r, rres)

    def _deref(
        self, node: Any, resolver: Resolver, spec: referencing.Specification[Any]
    ) -> tuple[Any, Resolver]:
        for _ in range(100):
            resolver = _enter(node, resolver, spec)
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                return node, resolver
            try:
                resolved = resolver.lookup(node["$ref"])
            except Unresolvable:
                return True, resolver  # refused when parsed: not reached for a registered schema
            node, resolver = resolved.contents, resolved.resolver
        return True, resolver

    def _types(self, w: Any, wres: Resolver, r: Any, rres: Resolver) -> Diffs:
        ws, rs = self.shapes.of(w), self.shapes.of(r)
        if ws.kind != "combined" and rs.kind == "combined":
            if len(rs.parts) == 1:
                found = self.differences(w, wres, rs.parts[0], rres)
                if compatible(found):
                    return found
            elif rs.criterion in ("anyOf", "oneOf"):
                for part in rs.parts:
                    found = self.differences(w, wres, part, rres)
                    if compatible(found):
                        return [*found, Difference("SUM_TYPE_EXTENDED", "")]
        elif ws.kind == "combined" and rs.kind != "combined":
            if len(ws.parts) == 1:
                found = self.differences(ws.parts[0], wres, r, rres)
                if compatible(found):
                    return found
            elif ws.criterion == "allOf":
                for part in ws.parts:
                    found = self.differences(part, wres, r, rres)
                    if compatible(found):
                        return [*found, Difference("PRODUCT_TYPE_NARROWED", "")]
        if ws.kind != rs.kind:
            if ws.kind == "false" or rs.kind == "empty":
                return []
            if _connect_type(w) == _connect_type(r) == "bytes":
                return []  # Confluent lets two bytes types of its Connect converter differ
            return [Difference("TYPE_CHANGED", "")]
        found = annotation_changes(w, r)
        if ws.kind in ("string", "number", "object", "array"):
            found += limits(ws.kind, ws.node, rs.node)
        if ws.kind == "string":
            found += pattern(ws.node, rs.node)
        elif ws.kind == "number":
            found += number_differences(ws.node, rs.node)
        elif ws.kind == "const" and not same_value(ws.node["const"], rs.node["const"]):
            found.append(Difference("ENUM_ARRAY_CHANGED", "const"))
        elif ws.kind == "enum":
            found += enum(ws.node["enum"], rs.node["enum"])
        elif ws.kind == "not":
            inner = self.differences(rs.node["not"], rres, ws.node["not"], wres)  # the other way round
            found.append(Difference("NOT_TYPE_NARROWED" if compatible(inner) else "NOT_TYPE_EXTENDED", "not"))
        elif ws.kind == "combined":
            found += self._combined(ws.criterion, ws.parts, wres, rs.criterion, rs.parts, rres)
        elif ws.kind == "object":
            found += object_differences(self, ws.node, wres, rs.node, rres)
        elif ws.kind == "array":
            found += self._array(ws.node, wres, rs.node, rres)
        return found

    def _combined(
        self,
        wcriterion: str,
        wparts: tuple[Any, ...],
        wres: Resolver,
        rcriterion: str,
        rparts: tuple[Any, ...],
        rres: Resolver,
    ) -> Diffs:
        found: Diffs = []
        if wcriterion != rcriterion:
            if (
                rcriterion == "anyOf"
                or (len(wparts) == 1 and len(rparts) == 1)
                or (len(wparts) == 1 and rcriterion == "oneOf")
                or (len(rparts) == 1 and wcriterion == "allOf")
            ):
                found.append(Difference("COMBINED_TYPE_EXTENDED", ""))
            else:
                return [Difference("COMBINED_TYPE_CHANGED", "")]
        wparts, rparts = distinct(wparts), distinct(rparts)
        if len(wparts) < len(rparts):
            found.append(
                Difference("PRODUCT_TYPE_EXTENDED" if rcriterion == "allOf" else "SUM_TYPE_EXTENDED", "")
            )
        elif len(wparts) > len(rparts):
            found.append(
                Difference("PRODUCT_TYPE_NARROWED" if wcriterion == "allOf" else "SUM_TYPE_NARROWED", "")
            )
        edges: dict[int, dict[int, Diffs]] = {}
        for i, w in enumerate(wparts):
            for j, r in enumerate(rparts):
                diffs = self.differences(w, wres, r, rres)
                if compatible(diffs):
                    edges.setdefault(i, {})[j] = at(f"{wcriterion}/{i}", diffs)
        partner = matching({i: list(js) for i, js in edges.items()})
        for j, i in partner.items():
            found += edges[i][j]
        if len(partner) < min(len(wparts), len(rparts)):
            found.append(Difference("COMBINED_TYPE_SUBSCHEMAS_CHANGED", ""))
        return found

    def _array(self, w: dict[str, Any], wres: Resolver, r: dict[str, Any], rres: Resolver) -> Diffs:
        spec_w, spec_r = self.writer.spec, self.reader.spec
        wall, wlist, wmore = items(w, spec_w)
        rall, rlist, rmore = items(r, spec_r)
        found = at("items", self._optional(wall, wres, rall, rres))
        wopen, wpartial = self.content(w, wmore, "unevaluatedItems", spec_w)
        ropen, rpartial = self.content(r, rmore, "unevaluatedItems", spec_r)
        for i in range(max(len(wlist), len(rlist))):
            where = f"items/{i}"
            if i < len(wlist) and i < len(rlist):
                found += at(where, self.differences(wlist[i], wres, rlist[i], rres))
            elif i < len(wlist):  # the reader has no schema for this position
                found += self.removed(wlist[i], wres, ropen, rpartial, rres, where, "ITEM")
            else:
                found += self.added(rlist[i], rres, wopen, wpartial, wres, where, "ITEM")
        found += self.additional(w, wres, wmore, r, rres, rmore, "ITEMS")
        found += self.unevaluated(w, wres, r, rres, "unevaluatedItems", "ITEMS")
        if bool(w.get("uniqueItems")) != bool(r.get("uniqueItems")):
            rule = "UNIQUE_ITEMS_REMOVED" if w.get("uniqueItems") else "UNIQUE_ITEMS_ADDED"
            found.append(Difference(rule, "uniqueItems"))
        return found

    def content(
        self, node: dict[str, Any], more: str, uneval: str, spec: referencing.Specification[Any]
    ) -> tuple[bool, Any]:
        """Whether the content model is open, and the schema of a partially open one (or None)."""
        permits, schema = additional(node, more)
        u = unevaluated(node, uneval, spec)
        open_ = permits and schema is None and (u is None or is_empty(u, self.shapes))
        if more == "additionalProperties" and node.get("patternProperties"):
            open_ = False
        if schema is None and permits and u is not None and u is not False and not is_empty(u, self.shapes):
            schema = u  # additional properties or items absent, unevaluated ones given a schema
        return open_, schema

    def removed(
        self, wnode: Any, wres: Resolver, open_: bool, partial: Any, rres: Resolver, where: str, what: str
    ) -> Diffs:
        """A property or item the writer had and the reader has no schema for."""
        if open_:
            return [Difference(f"{what}_REMOVED_FROM_OPEN_CONTENT_MODEL", where)]
        if partial is not None:
            diffs = self.differences(wnode, wres, partial, rres)
            covered = "IS" if compatible(diffs) else "NOT"
            return [
                *at(where, diffs),
                Difference(f"{what}_REMOVED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where),
            ]
        if wnode is False:
            return [Difference(f"{what}_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)]
        return [Difference(f"{what}_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)]

    def added(
        self, rnode: Any, rres: Resolver, open_: bool, partial: Any, wres: Resolver, where: str, what: str
    ) -> Diffs:
        """An item the reader has and the writer had no schema for (properties: ``objects``)."""
        if open_:
            rule = "ITEM_WITH_EMPTY_SCHEMA_ADDED" if is_empty(rnode, self.shapes) else "ITEM_ADDED"
            return [Difference(f"{rule}_TO_OPEN_CONTENT_MODEL", where)]
        if partial is not None:
            diffs = self.differences(partial, wres, rnode, rres)
            covered = "IS" if compatible(diffs) else "NOT"
            return [
                *at(where, diffs),
                Difference(f"{what}_ADDED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where),
            ]
        return [Difference("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", where)]

    def additional(
        self,
        w: dict[str, Any],
        wres: Resolver,
        wkey: str,
        r: dict[str, Any],
        rres: Resolver,
        rkey: str,
        what: str,
    ) -> Diffs:
        """``additionalProperties``/``additionalItems``: permitted, and by which schema."""
        wpermits, wschema = additional(w, wkey)
        rpermits, rschema = additional(r, rkey)
        where = "additionalProperties" if what == "PROPERTIES" else "additionalItems"
        if wpermits != rpermits:
            return [Difference(f"ADDITIONAL_{what}_{'ADDED' if rpermits else 'REMOVED'}", where)]
        if wschema is None and rschema is not None:
            return [Difference(f"ADDITIONAL_{what}_NARROWED", where)]
        if rschema is None and wschema is not None:
            return [Difference(f"ADDITIONAL_{what}_EXTENDED", where)]
        return at(where, self._optional(wschema, wres, rschema, rres))

    def unevaluated(
        self, w: dict[str, Any], wres: Resolver, r: dict[str, Any], rres: Resolver, keyword: str, what: str
    ) -> Diffs:
        wu = unevaluated(w, keyword, self.writer.spec)
        ru = unevaluated(r, keyword, self.reader.spec)
        if wu is None and ru is None:
            return []
        rule = f"UNEVALUATED_{what}_"
        if wu is None:
            rule += "REMOVED" if ru is False else "NARROWED"
        elif ru is None:
            rule += "ADDED" if wu is False else "EXTENDED"
        elif wu is False and ru is not False:
            rule += "ADDED"
        elif wu is not False and ru is False:
            rule += "REMOVED"
        elif is_empty(wu, self.shapes) and not is_empty(ru, self.shapes):
            rule += "NARROWED"
        elif not is_empty(wu, self.shapes) and is_empty(ru, self.shapes):
            rule += "EXTENDED"
        else:
            return at(keyword, self.differences(wu, wres, ru, rres))
        return [Difference(rule, keyword)]

    def pattern_schema(self, node: dict[str, Any], name: str) -> Any:
        """The schema the first of ``patternProperties`` that finds ``name`` gives, or None."""
        for regex, schema in (node.get("patternProperties") or {}).items():
            try:
                if re2.compile(regex, _RE2_OPTIONS).search(name) is not None:
                    return schema
            except re2.error:
                continue
        return None


def _connect_type(node: Any) -> Any:
    return node.get("connect.type") if isinstance(node, dict) else None
