"""Compatibility of JSON Schemas: Confluent's rules (a subset), in their default, strict form.

``schema.JsonSchema.reading_errors`` asks whether the reader's schema accepts every value the
writer's schema accepts. Checked:

- types: a reader type must cover each writer type (``number`` covers ``integer``); a writer that
  allows any type cannot be read by a reader that restricts types; ``true``/``{}`` reads anything,
  ``false`` writes nothing;
- ``enum``/``const``: the reader's values must include the writer's;
- limits: ``maxLength``/``maximum``/``exclusiveMaximum``/``maxItems``/``maxProperties`` may not be
  added or lowered, their ``min`` counterparts not added or raised; ``multipleOf`` may not be added
  or made a non-divisor; ``pattern`` may not be added or changed; ``uniqueItems`` not added;
- objects, by content model (open: ``additionalProperties`` absent or ``true``, no
  ``patternProperties``; partially open: a schema for additional or pattern properties; closed:
  ``additionalProperties: false``): a property the reader drops is fine if the reader is open or
  its additional/pattern schema reads the property's, and otherwise only if the writer had it as
  ``false``; a property the reader adds to an open writer must be ``{}``/``true`` (the writer may
  have written anything under that name); added to a closed or partially open writer it must read
  what the writer's additional/pattern schema allowed, and may be required only with a
  ``default``; a property that becomes required needs a ``default``; ``additionalProperties`` may
  not become ``false`` or gain a schema the writer's does not satisfy; ``dependencies`` /
  ``dependentRequired`` / ``dependentSchemas`` may not be added or extended; ``propertyNames``;
- arrays: ``items`` (a schema, or a tuple with ``additionalItems``; ``prefixItems``/``items`` in
  2020-12) position by position, the rest against the rest;
- ``allOf``/``anyOf``/``oneOf``: a reader union must read the writer from one of its branches; each
  branch of a writer union must be readable; with the same combinator on both sides every writer
  branch needs its own reader branch (``allOf``: every reader branch its own writer branch);
  ``oneOf`` may become ``anyOf``, not the reverse; a schema with a combinator beside other keywords
  is the ``allOf`` of its parts (as Confluent's schema library reads it), so each part meets its
  counterpart; ``not``: the writer's ``not`` must read the reader's; ``$ref`` is followed
  (recursion-safe).

A comparison stops after ``MAX_COMPARISONS`` pairs of subschemas (a bound on the work a schema
with deeply nested combinators can cause) and then reports the schemas as incompatible.

Not checked: keywords beside ``$ref`` (the target alone is compared), ``if``/``then``/``else``,
``contains``/``minContains``/``maxContains`` beyond equality, ``unevaluatedProperties`` and
``unevaluatedItems`` beyond content models, ``format``, ``contentEncoding``, draft-04's boolean
``exclusiveMaximum``/``exclusiveMinimum``, and Confluent's lenient mode. Like Confluent, a schema
without ``type`` counts as the types its keywords constrain (``properties`` → object).

What a subschema constrains (keyword families, types, values, content models) is in ``constraints``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol

import re2
import referencing
from referencing.exceptions import Unresolvable

from .constraints import (
    _COMBINATORS,
    _CONSTRAINTS,
    _LIMIT_TYPES,
    _LOWER,
    _UPPER,
    _allows,
    _covers,
    _dict,
    _divides,
    _is_number,
    _is_open,
    _items,
    _same_value,
    _types,
    _values,
)
from .patterns import _RE2_OPTIONS, _short
from .subschemas import _enter

if TYPE_CHECKING:
    from .subschemas import Resolver

# Nested combinators make the pairs of subschemas to compare grow fast (each branch against each);
# past this many, the comparison stops and the schemas count as incompatible.
MAX_COMPARISONS: Final = 50_000


class _Document(Protocol):
    """A parsed schema as a comparison reads it (``schema.JsonSchema`` is one): its draft's
    specification, which says how its ``$id``\\ s and items are spelled. A protocol, as ``schema``
    imports this module."""

    spec: referencing.Specification[Any]


class _TooComplex(Exception):
    """The comparison went past ``MAX_COMPARISONS``."""


class _Comparison:
    """One ``reading_errors`` run: can the reader's schema read all the writer's schema allows?"""

    def __init__(self, writer: _Document, reader: _Document) -> None:
        self.writer = writer
        self.reader = reader
        self.errors: list[str] = []
        # Pairs compared or under comparison (recursive $refs), by identity: every node compared
        # stays alive meanwhile, in its document or in ``parts``.
        self.assumed: set[tuple[int, int]] = set()
        self.parts: dict[int, tuple[Any, dict[str, Any]]] = {}
        self.labels: dict[int, list[str]] = {}  # where each part of a split node is, in the schema
        self.trial = False
        self.failing: set[tuple[int, int]] = set()  # pairs known to be incompatible
        self.budget = [MAX_COMPARISONS]  # shared with the trials

    def fail(self, path: str, reason: str) -> None:
        self.errors.append(f"{path or '/'}: {reason}")

    def readable(self, w: Any, wres: Resolver, r: Any, rres: Resolver, path: str) -> bool:
        trial = _Comparison(self.writer, self.reader)
        trial.assumed = self.assumed
        trial.parts = self.parts
        trial.labels = self.labels
        trial.trial = True
        trial.failing = self.failing
        trial.budget = self.budget
        trial.compare(w, wres, r, rres, path)
        return not trial.errors

    def _deref(
        self, node: Any, resolver: Resolver, spec: referencing.Specification[Any], path: str
    ) -> tuple[Any, Resolver]:
        for _ in range(100):
            resolver = _enter(node, resolver, spec)
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                return node, resolver
            try:
                resolved = resolver.lookup(node["$ref"])
            except Unresolvable:
                self.fail(path, f"$ref {node['$ref']!r} does not resolve")
                return True, resolver
            node, resolver = resolved.contents, resolved.resolver
        self.fail(path, "a cycle of $refs")
        return True, resolver

    def compare(self, w: Any, wres: Resolver, r: Any, rres: Resolver, path: str) -> None:
        w, wres = self._deref(w, wres, self.writer.spec, path)
        r, rres = self._deref(r, rres, self.reader.spec, path)
        w, r = self._as_parts(w), self._as_parts(r)
        key = (id(w), id(r))
        if key in self.assumed:
            return
        if self.trial and key in self.failing:  # known: combinators try a pair many times
            self.fail(path, "incompatible")
            return
        self.assumed.add(key)
        before = len(self.errors)
        try:
            self._compare(w, wres, r, rres, path)
        finally:
            if len(self.errors) > before:
                self.assumed.discard(key)
                self.failing.add(key)

    def _as_parts(self, node: Any) -> Any:
        """A schema holding a combinator beside other constraints (or several combinators) as the
        ``allOf`` of its parts, so that each part meets its counterpart on the other side."""
        if not isinstance(node, dict):
            return node
        kinds = [k for k in _COMBINATORS if isinstance(node.get(k), list)]
        base = {k: v for k, v in node.items() if k not in _COMBINATORS}
        has_base = bool(base.keys() & _CONSTRAINTS)
        if not kinds or (len(kinds) == 1 and not has_base):
            return node
        known = self.parts.get(id(node))
        if known is None:
            parts = [base] if has_base else []
            parts += [{k: node[k]} for k in kinds if k != "allOf"]
            labels = [""] * len(parts)
            for i, branch in enumerate(node.get("allOf", [])):
                parts.append(branch)
                labels.append(f"/allOf/{i}")
            known = self.parts[id(node)] = (node, {"allOf": parts})
            self.labels[id(known[1])] = labels
        return known[1]

    def _where(self, node: dict[str, Any], kind: str, i: int, path: str) -> str:
        labels = self.labels.get(id(node))
        return path + (labels[i] if labels is not None else f"/{kind}/{i}")

    def _compare(self, w: Any, wres: Resolver, r: Any, rres: Resolver, path: str) -> None:
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise _TooComplex
        if r is True or (isinstance(r, dict) and not r.keys() & _CONSTRAINTS):
            return
        if w is False:
            return
        if r is False:
            self.fail(path, "the reader accepts no value here")
            return
        w = {} if w is True else w
        if self._combined(w, wres, r, rres, path):
            return
        if "not" in r:
            if "not" in w:
                # Whatever the writer's "not" excluded, the reader's must exclude no more of it.
                self.compare(r["not"], rres, w["not"], wres, f"{path}/not")
            else:
                self.fail(path, "the reader adds 'not'")
        rvalues, wvalues = _values(r), _values(w)
        if rvalues is not None:
            if wvalues is None:
                self.fail(path, f"the reader allows only {_short(rvalues)}, the writer any value")
            else:
                extra = [v for v in wvalues if not any(_same_value(v, x) for x in rvalues)]
                if extra:
                    self.fail(path, f"the reader does not allow the writer's values {_short(extra)}")
        wtypes, rtypes = _types(w), _types(r)
        if rtypes is not None:
            if wtypes is None:
                self.fail(path, f"the writer allows any type, the reader only {sorted(rtypes)}")
                return
            narrowed = sorted(t for t in wtypes if not _covers(rtypes, t))
            if narrowed:
                self.fail(
                    path,
                    f"the writer's type {' and '.join(narrowed)} is not among the reader's {sorted(rtypes)}",
                )

        def shared(t: str) -> bool:  # do both sides allow values of type t (number: or integer)?
            return _allows(wtypes, t) and _allows(rtypes, t)

        self._limits(w, r, path, shared)
        if shared("object"):
            self._object(w, wres, r, rres, path)
        if shared("array"):
            self._array(w, wres, r, rres, path)

    def _combined(
        self, w: dict[str, Any], wres: Resolver, r: dict[str, Any], rres: Resolver, path: str
    ) -> bool:
        """Compares ``allOf``/``anyOf``/``oneOf``; False if neither side has one."""
        wkind = next((k for k in _COMBINATORS if isinstance(w.get(k), list)), None)
        rkind = next((k for k in _COMBINATORS if isinstance(r.get(k), list)), None)
        if wkind is None and rkind is None:
            return False
        wbranches = w.get(wkind, []) if wkind else []
        rbranches = r.get(rkind, []) if rkind else []
        if wkind and rkind and (wkind == rkind or (wkind, rkind) == ("oneOf", "anyOf")):
            self._match(w, wbranches, wres, r, rbranches, rres, path, rkind)
        elif wkind and rkind and {wkind, rkind} == {"anyOf", "oneOf"}:
            self.fail(path, "anyOf became oneOf: a value matching several branches is no longer valid")
        elif rkind in ("anyOf", "oneOf"):
            if not any(
                self.readable(w, wres, b, rres, f"{path}/{rkind}/{i}") for i, b in enumerate(rbranches)
            ):
                self.fail(path, f"no branch of the reader's {rkind} reads the writer's schema")
        elif wkind in ("anyOf", "oneOf"):
            for i, branch in enumerate(wbranches):
                self.compare(branch, wres, r, rres, self._where(w, wkind, i, path))
        elif rkind == "allOf":
            for i, branch in enumerate(rbranches):
                self.compare(w, wres, branch, rres, self._where(r, "allOf", i, path))
        elif not any(self.readable(b, wres, r, rres, path) for b in wbranches):
            self.fail(path, "the reader reads no branch of the writer's allOf")
        return True

    def _match(
        self,
        wnode: dict[str, Any],
        wbranches: list[Any],
        wres: Resolver,
        rnode: dict[str, Any],
        rbranches: list[Any],
        rres: Resolver,
        path: str,
        kind: str,
    ) -> None:
        """Each writer branch (``allOf``: each reader branch) needs a distinct compatible partner."""
        edges = {
            i: [j for j, r in enumerate(rbranches) if self.readable(w, wres, r, rres, path)]
            for i, w in enumerate(wbranches)
        }
        if kind == "allOf":
            inverted: dict[int, list[int]] = {j: [] for j in range(len(rbranches))}
            for i, js in edges.items():
                for j in js:
                    inverted[j].append(i)
            edges = inverted
        partner: dict[int, int] = {}

        def augment(node: int, seen: set[int]) -> bool:
            for other in edges[node]:
                if other not in seen:
                    seen.add(other)
                    if other not in partner or augment(partner[other], seen):
                        partner[other] = node
                        return True
            return False

        unmatched = [n for n in edges if not augment(n, set())]
        side = "reader's" if kind == "allOf" else "writer's"
        for n in unmatched:
            where = self._where(rnode if kind == "allOf" else wnode, kind, n, path)
            before = len(self.errors)
            # Say why against the branch in the same place, when there is one (the usual case:
            # the same combinator on both sides, one branch changed).
            if kind == "allOf" and n < len(wbranches):
                self.compare(wbranches[n], wres, rbranches[n], rres, where)
            elif kind != "allOf" and n < len(rbranches):
                self.compare(wbranches[n], wres, rbranches[n], rres, where)
            if len(self.errors) == before:
                self.fail(where, f"the {side} branch {n} has no compatible branch on the other side")

    def _limits(self, w: dict[str, Any], r: dict[str, Any], path: str, shared: Callable[[str], bool]) -> None:
        for keyword in _UPPER + _LOWER:
            limit = r.get(keyword)
            if not _is_number(limit) or not shared(_LIMIT_TYPES[keyword]):
                continue
            mine = w.get(keyword)
            if not _is_number(mine):
                self.fail(path, f"the reader adds {keyword} {limit}")
            elif (keyword in _UPPER and mine > limit) or (keyword in _LOWER and mine < limit):  # type: ignore[operator]
                self.fail(path, f"the reader's {keyword} {limit} is stricter than the writer's {mine}")
        if "pattern" in r and shared("string") and w.get("pattern") != r["pattern"]:
            what = "changes" if "pattern" in w else "adds"
            self.fail(path, f"the reader {what} pattern {r['pattern']!r}")
        divisor = r.get("multipleOf")
        if _is_number(divisor) and shared("number"):
            mine = w.get("multipleOf")
            if not _is_number(mine):
                self.fail(path, f"the reader adds multipleOf {divisor}")
            elif not _divides(divisor, mine):  # type: ignore[arg-type]
                self.fail(path, f"the reader's multipleOf {divisor} does not divide the writer's {mine}")
        if r.get("uniqueItems") is True and w.get("uniqueItems") is not True and shared("array"):
            self.fail(path, "the reader adds uniqueItems")
        if "contains" in r and shared("array") and not _same_value(w.get("contains"), r["contains"]):
            self.fail(path, "the reader adds or changes 'contains'")

    def _object(
        self, w: dict[str, Any], wres: Resolver, r: dict[str, Any], rres: Resolver, path: str
    ) -> None:
        wprops = _dict(w.get("properties"))
        rprops = _dict(r.get("properties"))
        wrequired = set(w["required"]) if isinstance(w.get("required"), list) else set()
        rrequired = set(r["required"]) if isinstance(r.get("required"), list) else set()
        for name in sorted(set(wprops) | set(rprops)):
            where = f"{path}/properties/{name}"
            if name in wprops and name in rprops:
                self.compare(wprops[name], wres, rprops[name], rres, where)
            elif name in wprops:  # the reader dropped it
                if _is_open(r):
                    continue
                partial = self._partial(r, name)
                if partial is not None:
                    if not self.readable(wprops[name], wres, partial, rres, where):
                        self.fail(
                            where,
                            "the property the reader removed is not read by its additional or "
                            "pattern properties",
                        )
                elif wprops[name] is not False:
                    self.fail(where, "the reader removed the property from a closed content model")
            else:  # the reader added it
                added = rprops[name]
                if _is_open(w):
                    if added is not True and not (
                        isinstance(added, dict) and not added.keys() & _CONSTRAINTS
                    ):
                        self.fail(
                            where,
                            "the reader adds the property to an open content model: the writer may "
                            "have written any value under this name",
                        )
                    continue
                partial = self._partial(w, name)
                if partial is not None and not self.readable(partial, wres, added, rres, where):
                    self.fail(
                        where,
                        "the reader's new property does not read what the writer's additional or "
                        "pattern properties allowed under this name",
                    )
                if name in rrequired and not (isinstance(added, dict) and "default" in added):
                    self.fail(where, "the reader requires a new property that has no default")
        for name in sorted(rrequired - wrequired):
            if name in rprops and name not in wprops:
                continue  # judged above, as an added property
            prop = rprops.get(name)
            if not (isinstance(prop, dict) and "default" in prop):
                self.fail(
                    f"{path}/required/{name}",
                    "the reader requires a property the writer did not, and it has no default",
                )
        self._additional(w, wres, r, rres, path)
        self._dependencies(w, wres, r, rres, path)
        if "propertyNames" in r:
            self.compare(
                w.get("propertyNames", True), wres, r["propertyNames"], rres, f"{path}/propertyNames"
            )

    def _partial(self, node: dict[str, Any], name: str) -> Any:
        """The schema a partially open content model gives property ``name``, or None."""
        for regex, schema in (node.get("patternProperties") or {}).items():
            try:
                if re2.compile(regex, _RE2_OPTIONS).search(name) is not None:
                    return schema
            except re2.error:
                continue
        additional = node.get("additionalProperties")
        if isinstance(additional, dict):
            return additional
        unevaluated = node.get("unevaluatedProperties")
        if "additionalProperties" not in node and isinstance(unevaluated, dict):
            return unevaluated
        return None

    def _additional(
        self, w: dict[str, Any], wres: Resolver, r: dict[str, Any], rres: Resolver, path: str
    ) -> None:
        wadd = w.get("additionalProperties", True)
        radd = r.get("additionalProperties", True)
        where = f"{path}/additionalProperties"
        if radd is False:
            if wadd is not False:
                self.fail(where, "the reader forbids additional properties the writer allowed")
        elif isinstance(radd, dict) and radd.keys() & _CONSTRAINTS:
            if wadd is True:
                self.fail(where, "the reader constrains additional properties the writer allowed freely")
            elif isinstance(wadd, dict):
                self.compare(wadd, wres, radd, rres, where)

    def _dependencies(
        self, w: dict[str, Any], wres: Resolver, r: dict[str, Any], rres: Resolver, path: str
    ) -> None:
        def split(node: dict[str, Any]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
            arrays = {k: v for k, v in (node.get("dependentRequired") or {}).items() if isinstance(v, list)}
            schemas = dict(node.get("dependentSchemas") or {})
            for k, v in (node.get("dependencies") or {}).items():
                (arrays if isinstance(v, list) else schemas)[k] = v
            return arrays, schemas

        warrays, wschemas = split(w)
        rarrays, rschemas = split(r)
        for name, needs in rarrays.items():
            if not set(needs) <= set(warrays.get(name, ())):
                self.fail(f"{path}/dependencies/{name}", "the reader adds or extends a property dependency")
        for name, schema in rschemas.items():
            if name not in wschemas:
                self.fail(f"{path}/dependencies/{name}", "the reader adds a schema dependency")
            else:
                self.compare(wschemas[name], wres, schema, rres, f"{path}/dependencies/{name}")

    def _array(self, w: dict[str, Any], wres: Resolver, r: dict[str, Any], rres: Resolver, path: str) -> None:
        wprefix, wrest = _items(w, self.writer.spec)
        rprefix, rrest = _items(r, self.reader.spec)
        for i in range(max(len(wprefix), len(rprefix))):
            witem = wprefix[i] if i < len(wprefix) else wrest
            ritem = rprefix[i] if i < len(rprefix) else rrest
            self.compare(witem, wres, ritem, rres, f"{path}/items/{i}")
        self.compare(wrest, wres, rrest, rres, f"{path}/items")
