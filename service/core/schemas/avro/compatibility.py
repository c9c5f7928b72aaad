"""Avro's schema-resolution rules: which writers' schemas a reader's schema reads, and why not,
in the words Confluent's registry gives.

``schema.AvroSchema.reading_errors`` runs ``incompatibilities`` (Avro's Java
``SchemaCompatibility.checkReaderWriterCompatibility``, rule by rule) and words each one as
Confluent's ``Difference`` does: ``{errorType:'TYPE_MISMATCH', description:'…', additionalInfo:'…'}``,
the description holding ``%s`` where Confluent writes the roles (the reader's first, then the
writer's: ``model.fill_roles``).

The rules: promotions int→long→float→double and string↔bytes; records, enums and fixed match by
unqualified name or a reader alias naming the writer's full name (NAME_MISMATCH), and their
contents are compared either way; a reader field is found in the writer by name or by one of its
aliases, and a field the writer lacks needs a default (READER_FIELD_MISSING_DEFAULT_VALUE); an
enum reader without a default must hold every writer symbol (MISSING_ENUM_SYMBOLS); fixed sizes
must be equal (FIXED_SIZE_MISMATCH); every branch of a writer union must be read (by a reader that
is no union, each branch is compared where it is), and a reader union reads a value if one of its
branches does (MISSING_UNION_BRANCH); anything else is a TYPE_MISMATCH. Each incompatibility has
Avro's location, a JSON pointer (``/fields/1/type``). As in Avro, a pair of schemas is compared
once per run: the pair met again gives the same answer (with the location it was first found
at), and a pair met again while it is being compared (a recursive type) reads.
Logical types do not enter compatibility (they annotate the same bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from .nodes import _resolve

Named = dict[str, Any]  # a named type's node

# Which writer types each reader type reads (Avro's promotions).
_PROMOTIONS: Final[Mapping[str, frozenset[str]]] = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}

# Confluent's descriptions (its Avro Difference), "%s" for the roles, {path} and {info} Avro's.
_DESCRIPTIONS: Final[Mapping[str, str]] = {
    "FIXED_SIZE_MISMATCH": (
        "The size of FIXED type field at path '{path}' in the %s schema does not match with the %s schema"
    ),
    "TYPE_MISMATCH": "The type (path '{path}') of a field in the %s schema does not match with the %s schema",
    "NAME_MISMATCH": "The name of the schema has changed (path '{path}')",
    "MISSING_ENUM_SYMBOLS": (
        "The %s schema is missing enum symbols '{info}' at path '{path}' in the %s schema"
    ),
    "MISSING_UNION_BRANCH": (
        "The %s schema is missing a type inside a union field at path '{path}' in the %s schema"
    ),
    "READER_FIELD_MISSING_DEFAULT_VALUE": (
        "The field '{info}' at path '{path}' in the %s schema has no default value "
        "and is missing in the %s schema"
    ),
}


class Incompatibility(NamedTuple):
    """One of Avro's ``SchemaIncompatibilityType``\\ s, its message and where (Avro's location:
    reference tokens from the root, the root's own empty one first)."""

    type: str
    info: str
    location: tuple[str, ...]

    @property
    def path(self) -> str:
        return "/" + "/".join(t.replace("~", "~0").replace("/", "~1") for t in self.location[1:])

    def text(self) -> str:
        """As Confluent's Difference words it, ``%s`` for the roles."""
        description = _DESCRIPTIONS[self.type].replace("{path}", self.path).replace("{info}", self.info)
        return f"{{errorType:'{self.type}', description:'{description}', additionalInfo:'{self.info}'}}"


def incompatibilities(
    reader: Any, writer: Any, reader_named: Mapping[str, Any], writer_named: Mapping[str, Any]
) -> list[Incompatibility]:
    """Why ``reader`` cannot read what ``writer`` wrote, in Avro's order (empty: it can)."""
    return _Checker(reader_named, writer_named).compatibility(reader, writer)


_IN_PROGRESS: Final[list[Incompatibility]] = []


class _Checker:
    """One run of Avro's ``ReaderWriterCompatibilityChecker``, remembering each pair's answer."""

    def __init__(self, reader_named: Mapping[str, Any], writer_named: Mapping[str, Any]) -> None:
        self.rnamed = reader_named
        self.wnamed = writer_named
        # by the nodes' identity, as Avro's by its Schema objects' (a named type is one object
        # wherever it is used; a primitive spelled as a name is a new one each time: not kept)
        self.memo: dict[tuple[int, int], list[Incompatibility]] = {}

    def compatibility(self, reader: Any, writer: Any) -> list[Incompatibility]:
        """A pair on its own: its location starts at the root (Avro's two-argument call)."""
        return self.at("", reader, writer, [])

    def at(self, token: str, reader: Any, writer: Any, location: list[str]) -> list[Incompatibility]:
        location.append(token)
        reader, writer = _resolve(reader, self.rnamed), _resolve(writer, self.wnamed)
        key = (id(reader), id(writer))
        kept = not isinstance(reader, str) and not isinstance(writer, str)
        found = self.memo.get(key) if kept else None
        if found is None:
            if kept:
                self.memo[key] = _IN_PROGRESS
            found = self.calculate(reader, writer, location)
            if kept:
                self.memo[key] = found
        location.pop()
        return found

    def calculate(self, reader: Any, writer: Any, location: list[str]) -> list[Incompatibility]:
        rtype, wtype = _type(reader), _type(writer)
        if rtype == wtype:
            if rtype == "ARRAY":
                return self.at("items", reader["items"], writer["items"], location)
            if rtype == "MAP":
                return self.at("values", reader["values"], writer["values"], location)
            if rtype == "FIXED":
                return self.names(reader, writer, location) + self.size(reader, writer, location)
            if rtype == "ENUM":
                return self.names(reader, writer, location) + self.symbols(reader, writer, location)
            if rtype == "RECORD":
                return self.names(reader, writer, location) + self.fields(reader, writer, location)
            if rtype == "UNION":
                out: list[Incompatibility] = []
                for i, branch in enumerate(writer):
                    location.append(str(i))
                    if self.compatibility(reader, branch):
                        why = f"reader union lacking writer type: {_type(_resolve(branch, self.wnamed))}"
                        out.append(_incompatible("MISSING_UNION_BRANCH", why, location))
                    location.pop()
                return out
            return []
        if wtype == "UNION":  # each branch of the writer's is read by the reader where it is
            return [x for i, branch in enumerate(writer) for x in self.at(str(i), reader, branch, location)]
        if rtype == "UNION":
            if any(not self.compatibility(branch, writer) for branch in reader):
                return []
            why = f"reader union lacking writer type: {wtype}"
            return [_incompatible("MISSING_UNION_BRANCH", why, location)]
        if wtype.lower() in _PROMOTIONS.get(rtype.lower(), ()):
            return []
        why = f"reader type: {rtype} not compatible with writer type: {wtype}"
        return [_incompatible("TYPE_MISMATCH", why, location)]

    def names(self, reader: Named, writer: Named, location: list[str]) -> list[Incompatibility]:
        rname, wname = reader["name"], writer["name"]
        if rname.rpartition(".")[2] == wname.rpartition(".")[2] or wname in reader.get("aliases", ()):
            return []
        return [_incompatible("NAME_MISMATCH", f"expected: {wname}", [*location, "name"])]

    def size(self, reader: Named, writer: Named, location: list[str]) -> list[Incompatibility]:
        if reader["size"] == writer["size"]:
            return []
        why = f"expected: {writer['size']}, found: {reader['size']}"
        return [_incompatible("FIXED_SIZE_MISMATCH", why, [*location, "size"])]

    def symbols(self, reader: Named, writer: Named, location: list[str]) -> list[Incompatibility]:
        missing = sorted(set(writer["symbols"]) - set(reader["symbols"]))
        if not missing or reader.get("default") in reader["symbols"]:
            return []
        why = "[" + ", ".join(missing) + "]"  # a Java TreeSet as it prints
        return [_incompatible("MISSING_ENUM_SYMBOLS", why, [*location, "symbols"])]

    def fields(self, reader: Named, writer: Named, location: list[str]) -> list[Incompatibility]:
        out: list[Incompatibility] = []
        location.append("fields")
        by_name = {f["name"]: f for f in writer["fields"]}
        for i, field in enumerate(reader["fields"]):
            location.append(str(i))
            # by its name, else an alias (Avro refuses a field both find: the first is taken here)
            names = (field["name"], *field.get("aliases", ()))
            match = next((by_name[n] for n in names if n in by_name), None)
            if match is not None:
                out += self.at("type", field["type"], match["type"], location)
            elif "default" not in field:
                ftype = _resolve(field["type"], self.rnamed)
                if _type(ftype) == "ENUM" and "default" in ftype:  # as Avro: compared with the record
                    out += self.at("type", ftype, writer, location)
                else:
                    out.append(_incompatible("READER_FIELD_MISSING_DEFAULT_VALUE", field["name"], location))
            location.pop()
        location.pop()
        return out


def _incompatible(kind: str, info: str, location: list[str]) -> Incompatibility:
    return Incompatibility(kind, info, tuple(location))


def _type(node: Any) -> str:
    """Avro's ``Schema.Type`` of a resolved node (an error is a RECORD)."""
    if isinstance(node, list):
        return "UNION"
    kind = node if isinstance(node, str) else str(node["type"])
    return "RECORD" if kind == "error" else kind.upper()
