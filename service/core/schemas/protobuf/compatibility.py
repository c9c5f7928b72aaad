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
    """Every message and enum type one schema can name, by full name (no leading dot)."""

    def __init__(self, schema: DescribedFile) -> None:
        self.messages: dict[str, tuple[descriptor_pb2.DescriptorProto, str]] = {}
        self.enums: set[str] = set()
        files = [schema.file, *schema.dependencies.values()]
        for proto in files:
            for name in proto.dependency:
                known = well_known(name) or builtins.file(name)
                if known is not None:
                    files.append(known)
        for proto in files:
            self._add(proto.package, proto.package, proto.message_type, proto.enum_type)

    def _add(
        self,
        package: str,
        scope: str,
        messages: Iterable[descriptor_pb2.DescriptorProto],
        enums: Iterable[descriptor_pb2.EnumDescriptorProto],
    ) -> None:
        for enum in enums:
            self.enums.add(f"{scope}.{enum.name}" if scope else enum.name)
        for message in messages:
            full = f"{scope}.{message.name}" if scope else message.name
            self.messages[full] = (message, package)
            self._add(package, full, message.nested_type, message.enum_type)

    def message(self, type_name: str) -> tuple[descriptor_pb2.DescriptorProto, str] | None:
        return self.messages.get(type_name.lstrip("."))


def _is_map(field: FieldProto, types: _Types) -> descriptor_pb2.DescriptorProto | None:
    if field.type != FieldProto.TYPE_MESSAGE or field.label != FieldProto.LABEL_REPEATED:
        return None
    found = types.message(field.type_name)
    if found is not None and found[0].options.map_entry:
        return found[0]
    return None


class Diff:
    """Confluent's Protobuf difference rules: the writer's file against the reader's."""

    def __init__(self, writer: DescribedFile, reader: DescribedFile) -> None:
        self.writer = writer
        self.reader = reader
        self.wtypes = _Types(writer)
        self.rtypes = _Types(reader)
        self.errors: list[str] = []
        self.compared: set[tuple[str, str]] = set()

    def run(self) -> list[str]:
        wfile, rfile = self.writer.file, self.reader.file
        if wfile.package != rfile.package:
            self.errors.append(f"the package changed from '{wfile.package}' to '{rfile.package}'")
        self._messages(wfile.message_type, rfile.message_type, wfile.package, rfile.package, "")
        return self.errors

    def _messages(
        self,
        writer: Iterable[descriptor_pb2.DescriptorProto],
        reader: Iterable[descriptor_pb2.DescriptorProto],
        wscope: str,
        rscope: str,
        local: str,
    ) -> None:
        rby_name = {m.name: m for m in reader}
        for message in writer:
            if message.options.map_entry:
                continue
            name = f"{local}.{message.name}" if local else message.name
            match = rby_name.get(message.name)
            if match is None:
                self.errors.append(f"{name}: the message type was removed")
            else:
                self._message(message, match, join(wscope, message.name), join(rscope, match.name), name)

    def _message(
        self,
        w: descriptor_pb2.DescriptorProto,
        r: descriptor_pb2.DescriptorProto,
        wfull: str,
        rfull: str,
        name: str,
    ) -> None:
        if (wfull, rfull) in self.compared:
            return
        self.compared.add((wfull, rfull))
        wfields, woneof = _fields(w)
        rfields, roneof = _fields(r)
        wgroups = {o for o in woneof.values()}
        deleted = {
            g
            for g in wgroups
            if g not in set(roneof.values()) and not any(n in rfields for n, og in woneof.items() if og == g)
        }
        for oneof in sorted(set(roneof.values())):
            origins = set()
            for number, group in roneof.items():
                if group != oneof:
                    continue
                if number in woneof:
                    origins.add(f"oneof {woneof[number]}")
                elif number in wfields:
                    origins.add(f"field {number}")
            if len(origins) > 1:
                self.errors.append(
                    f"{name}.{oneof}: fields that could be set together are now in one oneof "
                    f"({', '.join(sorted(origins))})"
                )
        for number in sorted(set(wfields) | set(rfields)):
            wf, rf = wfields.get(number), rfields.get(number)
            if rf is None and wf is not None:
                where = f"{name}.{wf.name} ({number})"
                if number in woneof and woneof[number] not in deleted:
                    self.errors.append(f"{where}: the field was removed from oneof {woneof[number]}")
                elif wf.label == FieldProto.LABEL_REQUIRED:
                    self.errors.append(f"{where}: a required field was removed")
            elif wf is None and rf is not None:
                if number not in roneof and rf.label == FieldProto.LABEL_REQUIRED:
                    self.errors.append(f"{name}.{rf.name} ({number}): a required field was added")
            elif wf is not None and rf is not None:
                self._field(wf, rf, f"{name}.{rf.name} ({number})")
        self._messages(w.nested_type, r.nested_type, wfull, rfull, name)

    def _field(self, wf: FieldProto, rf: FieldProto, where: str) -> None:
        wmap, rmap = _is_map(wf, self.wtypes), _is_map(rf, self.rtypes)
        wkind, rkind = self._kind(wf, wmap), self._kind(rf, rmap)
        if wkind != rkind:
            self.errors.append(f"{where}: the field changed from a {wkind} to a {rkind}")
        elif wmap is not None and rmap is not None:
            self._field(wmap.field[0], rmap.field[0], f"{where} key")
            self._field(wmap.field[1], rmap.field[1], f"{where} value")
        elif wkind == "scalar":
            wgroup, rgroup = _SCALAR_GROUPS[wf.type], _SCALAR_GROUPS[rf.type]
            if wgroup != rgroup:
                self.errors.append(
                    f"{where}: the type changed from {_type(wf)} to {_type(rf)}, which are "
                    "encoded differently"
                )
            elif wgroup != "string or bytes" and (wf.label == FieldProto.LABEL_REPEATED) != (
                rf.label == FieldProto.LABEL_REPEATED
            ):
                self.errors.append(f"{where}: a numeric field changed between singular and repeated")
        else:
            wfound, rfound = self.wtypes.message(wf.type_name), self.rtypes.message(rf.type_name)
            if wfound is None or rfound is None:
                if wf.type_name != rf.type_name:
                    self.errors.append(
                        f"{where}: the message type changed from {wf.type_name} to {rf.type_name}"
                    )
                return
            wlocal = _local(wf.type_name, wfound[1])
            rlocal = _local(rf.type_name, rfound[1])
            if wlocal != rlocal:
                self.errors.append(f"{where}: the message type changed from {wlocal} to {rlocal}")
            else:
                self._message(
                    wfound[0], rfound[0], wf.type_name.lstrip("."), rf.type_name.lstrip("."), rlocal
                )

    def _kind(self, field: FieldProto, entry: descriptor_pb2.DescriptorProto | None) -> str:
        if entry is not None:
            return "map"
        if field.type in (FieldProto.TYPE_MESSAGE, FieldProto.TYPE_GROUP):
            return "message"
        return "scalar"


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
