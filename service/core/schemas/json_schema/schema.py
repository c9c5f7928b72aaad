"""A parsed JSON Schema (``JsonSchema``) and the format that parses one (``JsonSchemaFormat``).

``JsonSchemaFormat.parse`` checks the document against the metaschema of its ``$schema`` (draft-04,
-06, -07, 2019-09 or 2020-12 by the URLs Confluent knows for them; draft-07 when it names none or
another, as Confluent parses it) and checks that every
``$ref`` resolves, inside the document or to a reference: a ``SchemaReference`` is known by its
``name`` (the ``$ref`` as the schema writes it, e.g. ``address.json``, or an absolute URL), by that
name resolved against the schema's ``$id``, and by the referenced document's own ``$id``. Nothing
is ever fetched. Regular expressions (``pattern``, ``patternProperties``) must be RE2 syntax and
are matched by RE2, in linear time, so no schema and value can stall the gateway.

The canonical text (what makes two schemas the same) is the document with sorted keys and no
whitespace, which is also the text ``?normalize=true`` stores; the registry stores the document as
compact JSON with its keys in their order otherwise, as Confluent does.

``JsonSchema`` answers the registry's questions with ``compatibility`` (reading rules) and ``codec``
(built on first use).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urljoin

import jsonschema
import referencing
import referencing.jsonschema
from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

from service.core.json_depth import MAX_SCHEMA_DEPTH, exceeds

from ..model import InvalidSchema, ParsedSchema, Schema, SchemaType
from .codec import JsonSchemaCodec, _limit
from .compatibility import MAX_COMPARISONS, _Comparison, _TooComplex
from .differences import COMPATIBLE, Difference, message
from .patterns import _keywords, _Patterns
from .subschemas import _walk

if TYPE_CHECKING:
    from .subschemas import Resolver

__all__ = ["JsonSchema", "JsonSchemaFormat"]

_DRAFTS: Final[Mapping[type[Any], str]] = {
    jsonschema.Draft4Validator: "draft-04",
    jsonschema.Draft6Validator: "draft-06",
    jsonschema.Draft7Validator: "draft-07",
    jsonschema.Draft201909Validator: "draft 2019-09",
    jsonschema.Draft202012Validator: "draft 2020-12",
}
# The $schema URLs Confluent knows (its SpecificationVersion), each with and without a final "#";
# any other $schema, or none, is draft-07, as Confluent parses it.
_URLS: Final[Mapping[str, type[Any]]] = {
    f"{scheme}://json-schema.org/{path}": cls
    for scheme in ("http", "https")
    for path, cls in (
        ("draft-04/schema", jsonschema.Draft4Validator),
        ("schema", jsonschema.Draft4Validator),
        ("draft-06/schema", jsonschema.Draft6Validator),
        ("draft-07/schema", jsonschema.Draft7Validator),
        ("draft/2019-09/schema", jsonschema.Draft201909Validator),
        ("draft/2020-12/schema", jsonschema.Draft202012Validator),
    )
}


def _compact(document: Any, text: str) -> str:
    try:
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:  # a number beyond a double (1e400) is no JSON once read: keep it as sent
        return text


def _draft_of(document: Any) -> type[Any]:
    url = document.get("$schema") if isinstance(document, dict) else None
    if not isinstance(url, str):
        return jsonschema.Draft7Validator
    return _URLS.get(url.removesuffix("#"), jsonschema.Draft7Validator)


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

    def formatted(self) -> str:
        """The text the registry stores, Confluent's ``canonicalString``: the document as compact
        JSON, its keys in the order they came."""
        return _compact(self.document, self.schema.text)

    def normalized(self) -> str:
        """The text stored for ``?normalize=true``: compact JSON with sorted keys, as Confluent's
        ``normalize()`` reads the schema into sorted nodes."""
        return self._canonical

    def reading_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return [f"the writer's schema is {writer.schema.schema_type}, not JSON"]
        comparison = _Comparison(writer, self)
        try:
            found = comparison.run(writer.document, writer.resolver(), self.document, self.resolver())
        except _TooComplex:
            return [
                f"the schemas are too complex to compare (more than {MAX_COMPARISONS} pairs of subschemas, "
                "mostly from nested combinators)"
            ]
        incompatible = (d for d in found if d.rule not in COMPATIBLE)
        return list(dict.fromkeys(message(Difference(d.rule, "#/" + d.path)) for d in incompatible))

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
        cls = _draft_of(document)
        draft = _DRAFTS[cls]
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
