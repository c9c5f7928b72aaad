"""JSON Schema: parsing, the canonical text, Confluent's compatibility rules (a subset), the codec.

``JsonSchemaFormat.parse`` checks the document against the metaschema of its ``$schema`` (draft-04,
-06, -07, 2019-09 or 2020-12; draft-07 when it names none, as Confluent does) and checks that every
``$ref`` resolves, inside the document or to a reference: a ``SchemaReference`` is known by its
``name`` (the ``$ref`` as the schema writes it, e.g. ``address.json``, or an absolute URL), by that
name resolved against the schema's ``$id``, and by the referenced document's own ``$id``. Nothing
is ever fetched. Regular expressions (``pattern``, ``patternProperties``) must be RE2 syntax and
are matched by RE2, in linear time, so no schema and value can stall the gateway.

Canonical text: the document with sorted keys and no whitespace.

Compatibility (``reading_errors``) follows Confluent's JSON Schema rules in their default, strict
form: the reader must accept every value the writer's schema accepts. Checked:

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

Codec: a value is validated against the schema (format assertions on), and a mismatch is a
``ConversionError`` with the JSON path and the reason; the payload is the value as compact UTF-8
JSON, which is what Confluent's JSON Schema serializers write after the 5-byte header. Decoding
parses the JSON and does not validate (data already written is given as it is).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urljoin

import jsonschema
import orjson
import re2
import referencing
import referencing.jsonschema
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from service.core.json_depth import MAX_SCHEMA_DEPTH, exceeds

from .model import JSON, ConversionError, InvalidSchema, ParsedSchema, Schema, SchemaType

if TYPE_CHECKING:
    from referencing._core import Resolver as _Resolver

    Resolver = _Resolver[Any]

__all__ = ["MAX_COMPARISONS", "JsonSchema", "JsonSchemaCodec", "JsonSchemaFormat"]

_DRAFTS: Final[Mapping[type[Any], str]] = {
    jsonschema.Draft4Validator: "draft-04",
    jsonschema.Draft6Validator: "draft-06",
    jsonschema.Draft7Validator: "draft-07",
    jsonschema.Draft201909Validator: "draft 2019-09",
    jsonschema.Draft202012Validator: "draft 2020-12",
}
_UNKNOWN: Final[Any] = object()
# Nested combinators make the pairs of subschemas to compare grow fast (each branch against each);
# past this many, the comparison stops and the schemas count as incompatible.
MAX_COMPARISONS: Final = 50_000
_MESSAGE_LIMIT: Final = 300


# --- regular expressions in RE2 --------------------------------------------------------------


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


# --- parsing -----------------------------------------------------------------------------------

# Keywords whose values are data, not subschemas: the walk over a document does not enter them.
_DATA_KEYWORDS: Final = frozenset({"enum", "const", "default", "examples"})
# Keywords whose values are maps of names to subschemas (the names are not keywords).
_SCHEMA_MAPS: Final = frozenset(
    {"properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies"}
)


def _walk(
    node: Any,
    resolver: Resolver,
    spec: referencing.Specification[Any],
    where: str,
    visit: Callable[[dict[str, Any], Resolver, str], None],
) -> None:
    """Calls ``visit`` on every subschema of ``node`` with the resolver of its base URI."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            _walk(item, resolver, spec, f"{where}/{i}", visit)
        return
    if not isinstance(node, dict):
        return
    resolver = _enter(node, resolver, spec)
    visit(node, resolver, where)
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                _walk(sub, resolver, spec, f"{where}/{key}/{name}", visit)
        elif isinstance(value, dict | list):
            _walk(value, resolver, spec, f"{where}/{key}", visit)


def _enter(node: Any, resolver: Resolver, spec: referencing.Specification[Any]) -> Resolver:
    if isinstance(node, dict) and spec.id_of(node) is not None:
        return resolver.in_subresource(spec.create_resource(node))
    return resolver


class JsonSchema:
    """A parsed JSON Schema document with the registry its ``$ref``\\ s resolve in."""

    def __init__(
        self,
        schema: Schema,
        document: Any,
        validator_class: type[Any],
        spec: referencing.Specification[Any],
        resources: list[tuple[str, referencing.Resource[Any]]],
        registry: referencing.Registry[Any],
        base_uri: str,
        patterns: _Patterns,
    ) -> None:
        self.schema = schema
        self.document = document
        self.spec = spec
        self.resources = resources  # this document and its references', by every URI they answer to
        self._validator_class = validator_class
        self._registry = registry
        self._base_uri = base_uri
        self._patterns = patterns
        self._canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        self._codec: JsonSchemaCodec | None = None

    def resolver(self) -> Resolver:
        return self._registry.resolver(base_uri=self._base_uri)

    def canonical(self) -> str:
        return self._canonical

    def reading_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"the writer's schema is {writer.schema.schema_type}, not JSON"]
        comparison = _Comparison(writer, self)
        try:
            comparison.compare(writer.document, writer.resolver(), self.document, self.resolver(), "")
        except _TooComplex:
            return [
                f"the schemas are too complex to compare (more than {MAX_COMPARISONS} pairs of subschemas, "
                "mostly from nested combinators)"
            ]
        return list(dict.fromkeys(comparison.errors))

    def codec(self) -> JsonSchemaCodec:
        if self._codec is None:
            cls = jsonschema.validators.extend(self._validator_class, _keywords(self._patterns))
            validator = cls(
                self.document, registry=self._registry, format_checker=self._validator_class.FORMAT_CHECKER
            )
            self._codec = JsonSchemaCodec(validator)
        return self._codec

    def record_name(self) -> str | None:
        title = self.document.get("title") if isinstance(self.document, dict) else None
        return title if isinstance(title, str) and title else None

    def __repr__(self) -> str:
        return f"JsonSchema({self._canonical[:80]!r})"


class JsonSchemaFormat:
    """Parses JSON Schema documents (``SchemaFormat`` for ``SchemaType.JSON``)."""

    schema_type: SchemaType = SchemaType.JSON

    def parse(self, schema: Schema, references: Mapping[str, ParsedSchema]) -> JsonSchema:
        if exceeds(schema.text, MAX_SCHEMA_DEPTH):  # before the recursive parser and codec see it
            raise InvalidSchema(f"a JSON Schema nests JSON more than {MAX_SCHEMA_DEPTH} levels deep")
        try:
            document = json.loads(schema.text)
        except ValueError as exc:
            raise InvalidSchema(f"a JSON Schema is a JSON document: {exc}") from None
        if not isinstance(document, dict | bool):
            raise InvalidSchema("a JSON Schema is a JSON object or a boolean")
        cls = jsonschema.validators.validator_for(document, default=_UNKNOWN)
        if cls is _UNKNOWN:
            if isinstance(document, dict) and "$schema" in document:
                raise InvalidSchema(
                    f"unsupported $schema {json.dumps(document['$schema'])}: draft-04, -06, -07, 2019-09 "
                    "and 2020-12 are"
                )
            cls = jsonschema.Draft7Validator
        draft = _DRAFTS.get(cls)
        if draft is None:  # draft-03: known to the library, not to schema registries
            raise InvalidSchema(f"unsupported $schema {json.dumps(cls.META_SCHEMA.get('$schema'))}")
        try:
            cls.check_schema(document)
        except SchemaError as exc:
            where = "/" + "/".join(str(p) for p in exc.absolute_path)
            raise InvalidSchema(f"not a valid {draft} schema at {where}: {_limit(exc.message)}") from None
        spec = referencing.jsonschema.specification_with(cls.META_SCHEMA["$schema"])
        base_uri = (spec.id_of(document) if isinstance(document, dict) else None) or ""
        resources = self._references(schema, references, base_uri)
        root = spec.create_resource(document)
        own = [(base_uri, root)]
        registry: referencing.Registry[Any] = referencing.Registry().with_resources(resources + own)
        patterns = _Patterns()

        def check(node: dict[str, Any], resolver: Resolver, where: str) -> None:
            ref = node.get("$ref")
            if isinstance(ref, str):
                try:
                    resolver.lookup(ref)
                except Unresolvable:
                    raise InvalidSchema(
                        f"{where or '/'}: $ref {ref!r} resolves neither inside the schema nor to a reference"
                    ) from None
            if isinstance(node.get("pattern"), str):
                patterns.add(node["pattern"], where or "/")
            if isinstance(node.get("patternProperties"), dict):
                for regex in node["patternProperties"]:
                    patterns.add(regex, f"{where}/patternProperties")

        try:
            _walk(document, registry.resolver(base_uri=base_uri), spec, "", check)
        except RecursionError:
            raise InvalidSchema("the schema is nested too deeply") from None
        return JsonSchema(schema, document, cls, spec, own + resources, registry, base_uri, patterns)

    @staticmethod
    def _references(
        schema: Schema, references: Mapping[str, ParsedSchema], base_uri: str
    ) -> list[tuple[str, referencing.Resource[Any]]]:
        out: list[tuple[str, referencing.Resource[Any]]] = []
        for ref in schema.references:
            parsed = references.get(ref.name)
            if parsed is None:
                raise InvalidSchema(
                    f"reference '{ref.name}' ({ref.subject} version {ref.version}) was not given"
                )
            if not isinstance(parsed, JsonSchema):
                raise InvalidSchema(
                    f"reference '{ref.name}' is a {parsed.schema.schema_type} schema, not JSON"
                )
            resource = parsed.spec.create_resource(parsed.document)
            names = {ref.name, urljoin(base_uri, ref.name) if base_uri else ref.name}
            own_id = parsed.spec.id_of(parsed.document) if isinstance(parsed.document, dict) else None
            if own_id:
                names.add(own_id)
            out += [(name, resource) for name in sorted(names)]
            out += [(uri, res) for uri, res in parsed.resources if uri]  # what the reference imports
        return out


def _limit(text: str) -> str:
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


# --- the codec --------------------------------------------------------------------------------


class JsonSchemaCodec:
    """JSON values checked against the schema, as compact UTF-8 JSON (``Codec``)."""

    def __init__(self, validator: Validator) -> None:
        self._validator = validator

    def encode(self, value: JSON) -> bytes:
        try:
            error = best_match(self._validator.iter_errors(value))
            if error is not None:
                raise ConversionError(f"{error.json_path}: {_limit(error.message)}")
            try:
                return orjson.dumps(value)
            except orjson.JSONEncodeError:  # beyond 64-bit integers or 255 levels: the standard library
                return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        except RecursionError:
            raise ConversionError("the value is nested too deeply") from None

    def decode(self, payload: bytes) -> JSON:
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            raise ConversionError(f"the payload is not JSON: {exc}") from None


# --- compatibility -----------------------------------------------------------------------------

_OBJECT_KEYWORDS: Final = frozenset(
    {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "dependencies",
        "dependentRequired",
        "dependentSchemas",
        "propertyNames",
        "unevaluatedProperties",
    }
)
_ARRAY_KEYWORDS: Final = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
        "unevaluatedItems",
    }
)
_STRING_KEYWORDS: Final = frozenset({"minLength", "maxLength", "pattern"})
_NUMBER_KEYWORDS: Final = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
_CONSTRAINTS: Final = (
    _OBJECT_KEYWORDS
    | _ARRAY_KEYWORDS
    | _STRING_KEYWORDS
    | _NUMBER_KEYWORDS
    | {"type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "$ref", "if"}
)
_UPPER: Final = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")
_LOWER: Final = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")
_LIMIT_TYPES: Final = {
    "maxLength": "string",
    "minLength": "string",
    "maximum": "number",
    "minimum": "number",
    "exclusiveMaximum": "number",
    "exclusiveMinimum": "number",
    "maxItems": "array",
    "minItems": "array",
    "maxProperties": "object",
    "minProperties": "object",
}
_COMBINATORS: Final = ("allOf", "anyOf", "oneOf")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _types(node: dict[str, Any]) -> set[str] | None:
    """The JSON types ``node`` accepts, or None for any."""
    declared = node.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    values = _values(node)
    if values is not None:
        return {_json_type(v) for v in values}
    inferred = set()
    keys = node.keys()
    if keys & _OBJECT_KEYWORDS:
        inferred.add("object")
    if keys & _ARRAY_KEYWORDS:
        inferred.add("array")
    if keys & _STRING_KEYWORDS:
        inferred.add("string")
    if keys & _NUMBER_KEYWORDS:
        inferred.add("number")
    return inferred or None


def _values(node: dict[str, Any]) -> list[Any] | None:
    if "const" in node:
        return [node["const"]]
    enum = node.get("enum")
    return list(enum) if isinstance(enum, list) else None


def _covers(types: set[str] | None, t: str) -> bool:
    return types is None or t in types or (t == "integer" and "number" in types)


def _allows(types: set[str] | None, t: str) -> bool:
    if types is None:
        return True
    return bool(types & {"number", "integer"}) if t == "number" else t in types


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    return bool(a == b)


def _is_open(node: dict[str, Any]) -> bool:
    additional = node.get("additionalProperties", True)
    unevaluated = node.get("unevaluatedProperties", True)
    return additional is True and unevaluated is True and not node.get("patternProperties")


class _TooComplex(Exception):
    """The comparison went past ``MAX_COMPARISONS``."""


class _Comparison:
    """One ``reading_errors`` run: can the reader's schema read all the writer's schema allows?"""

    def __init__(self, writer: JsonSchema, reader: JsonSchema) -> None:
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


def _items(node: dict[str, Any], spec: referencing.Specification[Any]) -> tuple[list[Any], Any]:
    """An array schema's per-position item schemas and the schema of the items after them."""
    if "prefixItems" in node or spec is referencing.jsonschema.DRAFT202012:
        prefix = node.get("prefixItems")
        return (prefix if isinstance(prefix, list) else []), node.get("items", True)
    items = node.get("items", True)
    if isinstance(items, list):
        return items, node.get("additionalItems", True)
    return [], items


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _divides(divisor: float, value: float) -> bool:
    try:
        return Decimal(str(value)) % Decimal(str(divisor)) == 0
    except (InvalidOperation, ZeroDivisionError):
        return False
