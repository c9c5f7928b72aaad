"""Protobuf compatibility: what a reader's schema cannot read of a writer's data.

Compatibility (``reading_errors``) follows Confluent's Protobuf rules, comparing the writer's
file and the reader's (and, through fields, the message types they refer to in references):

- incompatible: a changed ``package``; a message type the reader lacks; a field number whose
  kind changes (scalar or enum / message / map); a scalar whose wire group changes (varint
  int32/int64/uint32/uint64/bool/enum, zig-zag sint32/sint64, length-delimited string/bytes,
  fixed32/sfixed32, fixed64/sfixed64, float, double); a numeric field turned repeated or back;
  a field whose message type changes name; a ``required`` field added or removed; a member
  removed from a oneof that still exists; fields that were independent (or in different oneofs)
  brought into one oneof;
- compatible: fields added or removed (their numbers should be ``reserved``), renamed fields,
  string↔bytes, message types added or moved, enums and their values added, removed or renamed,
  oneofs added or removed, a field moved out of a oneof.

Not checked: options, ``reserved`` ranges, extensions, services, default values, field presence
changes other than ``required``. Unlike Confluent, a singular proto3 numeric field without a
label that becomes ``repeated`` is incompatible too (packed repeated values are not read by a
singular field).

Each incompatible difference is worded as Confluent's Protobuf ``Difference`` words it
(``message``): its type (``FIELD_SCALAR_KIND_CHANGED`` …) and a description with Confluent's
path (``#/`` then the message's names, a oneof member's oneof, the field's number: ``#/A/o/2``)
and ``%s`` for the roles. A field of a message type of the same name is compared through that
type, where it is defined, when the two come from different files (a reference); the schemas' own
types are compared where they are. Differences come in the schema's order, where Confluent's
follow its hash maps' order for several messages.

Collaborators: ``schema.ProtobufSchema.reading_errors`` runs a ``Diff``; ``descriptors`` gives
the well-known files a schema's fields may name. The rules read descriptor protos only: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Protocol

from google.protobuf import descriptor_pb2

from . import builtins
from .descriptors import FDP, FieldProto, join, well_known


class DescribedFile(Protocol):
    """What the rules read of a parsed schema: its file and the files it imports (by import path)."""

    @property
    def file(self) -> FDP: ...

    @property
    def dependencies(self) -> Mapping[str, FDP]: ...


_SCALAR_GROUPS: Final[Mapping[int, str]] = {
    FieldProto.TYPE_INT32: "varint",
    FieldProto.TYPE_INT64: "varint",
    FieldProto.TYPE_UINT32: "varint",
    FieldProto.TYPE_UINT64: "varint",
    FieldProto.TYPE_BOOL: "varint",
    FieldProto.TYPE_ENUM: "varint",
    FieldProto.TYPE_SINT32: "zig-zag varint",
    FieldProto.TYPE_SINT64: "zig-zag varint",
    FieldProto.TYPE_STRING: "string or bytes",
    FieldProto.TYPE_BYTES: "string or bytes",
    FieldProto.TYPE_FIXED32: "fixed32",
    FieldProto.TYPE_SFIXED32: "fixed32",
    FieldProto.TYPE_FIXED64: "fixed64",
    FieldProto.TYPE_SFIXED64: "fixed64",
    FieldProto.TYPE_FLOAT: "float",
    FieldProto.TYPE_DOUBLE: "double",
}
_TYPE_NAMES: Final[Mapping[int, str]] = {
    value: name[len("TYPE_") :].lower() for name, value in FieldProto.Type.items()
}


class _Types:
    """Every message and enum type one schema can name, by full name (no leading dot), and the
    file each message is in (``files``: None for the schema's own)."""

    def __init__(self, schema: DescribedFile) -> None:
        self.messages: dict[str, tuple[descriptor_pb2.DescriptorProto, str]] = {}
        self.files: dict[str, FDP | None] = {}
        self.enums: set[str] = set()
        files = [schema.file, *schema.dependencies.values()]
        for proto in files:
            for name in proto.dependency:
                known = well_known(name) or builtins.file(name)
                if known is not None:
                    files.append(known)
        for proto in files:
            origin = None if proto is schema.file else proto
            self._add(proto.package, proto.package, proto.message_type, proto.enum_type, origin)

    def _add(
        self,
        package: str,
        scope: str,
        messages: Iterable[descriptor_pb2.DescriptorProto],
        enums: Iterable[descriptor_pb2.EnumDescriptorProto],
        origin: FDP | None,
    ) -> None:
        for enum in enums:
            self.enums.add(f"{scope}.{enum.name}" if scope else enum.name)
        for message in messages:
            full = f"{scope}.{message.name}" if scope else message.name
            self.messages[full] = (message, package)
            self.files[full] = origin
            self._add(package, full, message.nested_type, message.enum_type, origin)

    def message(self, type_name: str) -> tuple[descriptor_pb2.DescriptorProto, str] | None:
        return self.messages.get(type_name.lstrip("."))


def _is_map(field: FieldProto, types: _Types) -> descriptor_pb2.DescriptorProto | None:
    if field.type != FieldProto.TYPE_MESSAGE or field.label != FieldProto.LABEL_REPEATED:
        return None
    found = types.message(field.type_name)
    if found is not None and found[0].options.map_entry:
        return found[0]
    return None


# Confluent's descriptions of the incompatible differences (its Protobuf Difference), "%s" for
# the roles (the reader's schema, then the writer's), {path} its path.
_DESCRIPTIONS: Final[Mapping[str, str]] = {
    "PACKAGE_CHANGED": "The package at '{path}' in the %s schema does not match the package in the %s schema",
    "MESSAGE_REMOVED": "The %s schema is missing a MESSAGE type at path '{path}' in the %s schema",
    "FIELD_KIND_CHANGED": (
        "The type of a field at path '{path}' in the %s schema does not match the %s schema"
    ),
    "FIELD_SCALAR_KIND_CHANGED": (
        "The kind of a SCALAR field at path '{path}' in the %s schema does not match its kind in the "
        "%s schema"
    ),
    "FIELD_NAMED_TYPE_CHANGED": (
        "The type of a MESSAGE field at path '{path}' in the %s schema does not match its type in the "
        "%s schema"
    ),
    "FIELD_NUMERIC_LABEL_CHANGED": (
        "The label for a NUMERIC field at path '{path}' in the %s schema does not match its label in the "
        "%s schema"
    ),
    "REQUIRED_FIELD_ADDED": "A required field  at path '{path}' in the %s schema is missing in the %s schema",
    "REQUIRED_FIELD_REMOVED": "The %s schema is missing a required field at path: '{path}' in the %s schema",
    "ONEOF_FIELD_REMOVED": "The %s schema is missing a oneof field at path '{path}' in the %s schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": (
        "Multiple fields in the oneof at path '{path}' in the %s schema are outside a oneof in the %s schema"
    ),
    "FIELD_MOVED_TO_EXISTING_ONEOF": (
        "A field in the oneof at path '{path}' in the %s schema is outside an existing oneof in the %s schema"
    ),
}


def message(kind: str, path: str) -> str:
    """Confluent's text of an incompatible difference, ``%s`` for the roles (``model.fill_roles``)."""
    description = _DESCRIPTIONS[kind].replace("{path}", path)
    return f'{{errorType:"{kind}", description:"{description}"}}'


class Diff:
    """Confluent's Protobuf difference rules: the writer's file (Confluent's "original") against
    the reader's ("update"), each incompatible difference at Confluent's path (``#/`` then the
    message's names, a oneof's name, a field's number)."""

    def __init__(self, writer: DescribedFile, reader: DescribedFile) -> None:
        self.writer = writer
        self.reader = reader
        self.wtypes = _Types(writer)
        self.rtypes = _Types(reader)
        self.errors: list[str] = []
        self.compared: dict[tuple[str, str], bool] = {}  # message pairs: compatible (so far)

    def run(self) -> list[str]:
        wfile, rfile = self.writer.file, self.reader.file
        if wfile.package != rfile.package:
            self.fail("PACKAGE_CHANGED", "#/")
        self._messages(wfile.message_type, rfile.message_type, wfile.package, rfile.package, "")
        return self.errors

    def fail(self, kind: str, path: str) -> None:
        self.errors.append(message(kind, path))

    def _messages(
        self,
        writer: Iterable[descriptor_pb2.DescriptorProto],
        reader: Iterable[descriptor_pb2.DescriptorProto],
        wscope: str,
        rscope: str,
        local: str,
    ) -> None:
        rby_name = {m.name: m for m in reader}
        for message_type in writer:
            if message_type.options.map_entry:
                continue
            name = f"{local}.{message_type.name}" if local else message_type.name
            match = rby_name.get(message_type.name)
            if match is None:
                self.fail("MESSAGE_REMOVED", _path(name))
            else:
                self._message(
                    message_type, match, join(wscope, message_type.name), join(rscope, match.name), name
                )

    def _message(
        self,
        w: descriptor_pb2.DescriptorProto,
        r: descriptor_pb2.DescriptorProto,
        wfull: str,
        rfull: str,
        name: str,
    ) -> bool:
        """Compare a message pair once (``name``: its local name); whether it is compatible."""
        if (wfull, rfull) in self.compared:
            return self.compared[(wfull, rfull)]
        self.compared[(wfull, rfull)] = True  # while being compared (a recursive type)
        before = len(self.errors)
        path = _path(name)
        wfields, woneof = _fields(w)
        rfields, roneof = _fields(r)
        deleted = {
            g
            for g in set(woneof.values())
            if g not in set(roneof.values()) and not any(n in rfields for n, og in woneof.items() if og == g)
        }
        for oneof in dict.fromkeys(d.name for d in r.oneof_decl if d.name in set(roneof.values())):
            origins: set[str] = set()
            moved_in = 0
            for number, group in roneof.items():
                if group != oneof:
                    continue
                if number in woneof:
                    origins.add(f"oneof {woneof[number]}")
                elif number in wfields:
                    origins.add(f"field {number}")
                    moved_in += 1
            if len(origins) > 1:
                kind = "MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF"
                self.fail(kind, f"{path}/{oneof}")
        for number in sorted(set(wfields) | set(rfields)):
            wf, rf = wfields.get(number), rfields.get(number)
            if rf is None and wf is not None:
                if number in woneof:
                    if woneof[number] not in deleted:
                        self.fail("ONEOF_FIELD_REMOVED", f"{path}/{woneof[number]}/{number}")
                elif wf.label == FieldProto.LABEL_REQUIRED:
                    self.fail("REQUIRED_FIELD_REMOVED", f"{path}/{number}")
            elif wf is None and rf is not None:
                if number not in roneof and rf.label == FieldProto.LABEL_REQUIRED:
                    self.fail("REQUIRED_FIELD_ADDED", f"{path}/{number}")
            elif wf is not None and rf is not None:
                at = f"{path}/{roneof[number]}/{number}" if number in roneof else f"{path}/{number}"
                self._field(wf, rf, at)
        self._messages(w.nested_type, r.nested_type, wfull, rfull, name)
        compatible = len(self.errors) == before
        self.compared[(wfull, rfull)] = compatible
        return compatible

    def _field(self, wf: FieldProto, rf: FieldProto, path: str) -> None:
        wmap, rmap = _is_map(wf, self.wtypes), _is_map(rf, self.rtypes)
        wkind, rkind = self._kind(wf, wmap), self._kind(rf, rmap)
        if wkind != rkind:
            self.fail("FIELD_KIND_CHANGED", path)
        elif wmap is not None and rmap is not None:  # key and value, where the field is
            self._field(wmap.field[0], rmap.field[0], path)
            self._field(wmap.field[1], rmap.field[1], path)
        elif wkind == "scalar":
            wgroup, rgroup = _SCALAR_GROUPS[wf.type], _SCALAR_GROUPS[rf.type]
            if wgroup != rgroup:
                self.fail("FIELD_SCALAR_KIND_CHANGED", path)
            elif wgroup != "string or bytes" and (wf.label == FieldProto.LABEL_REPEATED) != (
                rf.label == FieldProto.LABEL_REPEATED
            ):
                self.fail("FIELD_NUMERIC_LABEL_CHANGED", path)
        else:
            wfound, rfound = self.wtypes.message(wf.type_name), self.rtypes.message(rf.type_name)
            if wfound is None or rfound is None:
                if wf.type_name != rf.type_name:
                    self.fail("FIELD_NAMED_TYPE_CHANGED", path)
                return
            wlocal = _local(wf.type_name, wfound[1])
            rlocal = _local(rf.type_name, rfound[1])
            if wlocal != rlocal:
                self.fail("FIELD_NAMED_TYPE_CHANGED", path)
                return
            wfile = self.wtypes.files.get(wf.type_name.lstrip("."))
            rfile = self.rtypes.files.get(rf.type_name.lstrip("."))
            if wfile == rfile:  # both the schemas' own (compared by name above), or the same reference
                return
            if not self._message(
                wfound[0], rfound[0], wf.type_name.lstrip("."), rf.type_name.lstrip("."), rlocal
            ):
                self.fail("FIELD_NAMED_TYPE_CHANGED", path)

    def _kind(self, field: FieldProto, entry: descriptor_pb2.DescriptorProto | None) -> str:
        if entry is not None:
            return "map"
        if field.type in (FieldProto.TYPE_MESSAGE, FieldProto.TYPE_GROUP):
            return "message"
        return "scalar"


def _path(local: str) -> str:
    return "#/" + local.replace(".", "/")


def _fields(message: descriptor_pb2.DescriptorProto) -> tuple[dict[int, FieldProto], dict[int, str]]:
    """Fields by number, and the real oneof (not proto3 ``optional``'s) of those in one."""
    fields = {f.number: f for f in message.field}
    oneofs = {
        f.number: message.oneof_decl[f.oneof_index].name
        for f in message.field
        if f.HasField("oneof_index") and not f.proto3_optional
    }
    return fields, oneofs


def _local(type_name: str, package: str) -> str:
    full = type_name.lstrip(".")
    return full[len(package) + 1 :] if package and full.startswith(package + ".") else full


def _type(field: FieldProto) -> str:
    if field.type == FieldProto.TYPE_ENUM:
        return f"enum {field.type_name.lstrip('.')}"
    return _TYPE_NAMES[field.type]
