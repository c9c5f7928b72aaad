"""Avro's schema-resolution rules: which writers' schemas a reader's schema reads.

``schema.AvroSchema.reading_errors`` implements Avro's schema resolution as Java's
``SchemaCompatibility`` applies it: promotions int→long→float→double and string↔bytes; records,
enums and fixed match by unqualified name or a reader alias naming the writer's full name;
a reader field is found in the writer by name or by one of its aliases, and a field the writer
lacks needs a default; an enum reader without a default must hold every writer symbol; fixed sizes
must be equal; every branch of a writer union must be readable, and a reader union reads a value
if one of its branches does. Recursive types are followed once per (reader, writer) pair.
Logical types do not enter compatibility (they annotate the same bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .nodes import _NAMED_KINDS, PRIMITIVES, Node, _branch, _kind, _resolve

# Which writer types each reader type reads (Avro's promotions).
_PROMOTIONS: Final[Mapping[str, frozenset[str]]] = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


class _Resolution:
    """One ``reading_errors`` run: Avro's resolution of a writer's schema by a reader's."""

    def __init__(self, reader_named: Mapping[str, Node], writer_named: Mapping[str, Node], errors: list[str]):
        self.rnamed = reader_named
        self.wnamed = writer_named
        self.errors = errors
        self.trial = False
        self.assumed: set[tuple[str, str]] = set()  # named pairs compared or under comparison
        self.failing: set[tuple[str, str]] = set()  # named pairs known not to resolve

    def readable(self, reader: Node, writer: Node, path: str) -> bool:
        """Whether ``reader`` reads ``writer`` (a trial: its errors are not reported)."""
        trial = _Resolution(self.rnamed, self.wnamed, [])
        trial.trial = True
        trial.assumed = self.assumed
        trial.failing = self.failing
        trial.check(reader, writer, path)
        return not trial.errors

    def check(self, reader: Node, writer: Node, path: str) -> None:
        reader = _resolve(reader, self.rnamed)
        writer = _resolve(writer, self.wnamed)
        rkind, wkind = _kind(reader), _kind(writer)
        if wkind == "union":
            for branch in writer:
                bname = _branch(branch)
                if rkind == "union":
                    if not any(self.readable(r, branch, path) for r in reader):
                        self.fail(
                            path,
                            f"the writer's union branch '{bname}' matches no branch of the reader's union",
                        )
                else:
                    self.check(reader, branch, path)
            return
        if rkind == "union":
            if not any(self.readable(r, writer, path) for r in reader):
                self.fail(
                    path, f"the reader's union has no branch that reads the writer's '{_branch(writer)}'"
                )
            return
        if rkind != wkind and not (rkind in ("record", "error") and wkind in ("record", "error")):
            if wkind in _PROMOTIONS.get(rkind, ()):
                return
            self.fail(path, f"the writer's {_describe(writer)} cannot be read as {_describe(reader)}")
            return
        if rkind in PRIMITIVES:
            return
        if rkind == "array":
            self.check(reader["items"], writer["items"], f"{path}[]")
        elif rkind == "map":
            self.check(reader["values"], writer["values"], f"{path}{{}}")
        else:
            self.named(reader, writer, path or reader["name"])

    def named(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        rname, wname = reader["name"], writer["name"]
        if rname.rpartition(".")[2] != wname.rpartition(".")[2] and wname not in reader.get("aliases", ()):
            self.fail(
                path,
                f"the writer's {writer['type']} '{wname}' has another name than the reader's '{rname}' "
                "(and no reader alias names it)",
            )
            return
        if (rname, wname) in self.assumed:
            return  # compared already, or being compared further up (a recursive type)
        if self.trial and (rname, wname) in self.failing:
            self.fail(path, "does not resolve")  # known: unions of unions try a pair many times
            return
        self.assumed.add((rname, wname))
        before = len(self.errors)
        try:
            kind = reader["type"]
            if kind == "fixed":
                if reader["size"] != writer["size"]:
                    self.fail(
                        path, f"fixed '{rname}' has size {reader['size']}, the writer's {writer['size']}"
                    )
            elif kind == "enum":
                if "default" not in reader:
                    missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
                    if missing:
                        self.fail(
                            path,
                            f"the reader's enum '{rname}' lacks the writer's symbols {missing} "
                            "and has no default",
                        )
            else:
                wfields = {f["name"]: f for f in writer["fields"]}
                for field in reader["fields"]:
                    fpath = f"{path}.{field['name']}"
                    match = wfields.get(field["name"])
                    if match is None:
                        match = next((wfields[a] for a in field.get("aliases", ()) if a in wfields), None)
                    if match is not None:
                        self.check(field["type"], match["type"], fpath)
                    elif "default" not in field:
                        self.fail(
                            fpath, "the reader's field is missing from the writer's data and has no default"
                        )
        finally:
            if len(self.errors) > before:
                self.assumed.discard((rname, wname))
                self.failing.add((rname, wname))

    def fail(self, path: str, reason: str) -> None:
        self.errors.append(f"{path}: {reason}" if path else reason)


def _describe(node: Node) -> str:
    kind = _kind(node)
    if kind in _NAMED_KINDS:
        return f"{kind} '{node['name']}'"
    return kind
