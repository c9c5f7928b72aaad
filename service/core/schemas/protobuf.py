"""Protobuf schemas: parsing with protoc, the canonical text, Confluent's rules (a subset), the codec.

``ProtobufFormat.parse`` takes a ``.proto`` file (proto2, proto3 or editions) and compiles it with
protoc in-process (``grpc_tools``): the text and the ``.proto`` texts of its references go into a
fresh temporary directory under their import paths, protoc reads them from there and from its
bundled well-known types (``google/protobuf/*.proto``, which need no reference), and its errors
become the ``InvalidSchema`` message. protoc is reached through the entry point grpc_tools' own
import hook uses, which raises its errors as exceptions (``protoc.main`` prints them on the
process's stderr, which no thread can capture for itself); the descriptor is read from the Python
module protoc generates. One protoc runs at a time (a lock), so parsing is safe from any number of
worker threads. The schema may also be what Confluent's own serializers register: a base64
``FileDescriptorProto``; such a schema can be imported by other descriptors, not by ``.proto``
text (protoc needs the text).

Each parsed schema has its own ``DescriptorPool`` holding its file, its references under their
import paths and the well-known types it imports, so two schemas that declare the same file
name, package or message name never collide.

Canonical text: the ``FileDescriptorProto`` protoc builds, in protobuf text format, without what
is only spelling — the file's own name, source locations and comments, ``json_name`` — so layout,
comments, option syntax and the ``.proto``/descriptor spelling of one schema give one text.

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

Codec: the first message type of the file, as Confluent's serializers default to. JSON is
protobuf's JSON mapping (``json_format``), as Confluent's REST Proxy gives it: lowerCamelCase
field names (the proto names are accepted on input), fields at their default value included,
64-bit integers as strings, bytes as base64. The payload is the message-index list, Confluent's
array of zig-zag varints naming the message within the file (the single byte ``0`` for the first
top-level message), then the message's binary encoding (deterministic: map entries in key
order). Decoding follows whatever index list the payload carries.
"""

from __future__ import annotations

import ast
import base64
import binascii
import importlib.resources
import posixpath
import re
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeAlias

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    json_format,
    message_factory,
    text_format,
    unknown_fields,
)
from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.message import DecodeError, Message
from grpc_tools import _protoc_compiler

from service.core.json_depth import MAX_SCHEMA_DEPTH

from .model import JSON, ConversionError, InvalidSchema, ParsedSchema, Schema, SchemaType

__all__ = [
    "ProtobufCodec",
    "ProtobufFormat",
    "ProtobufSchema",
    "read_message_indexes",
    "write_message_indexes",
]

ROOT_FILE: Final = "registered_schema.proto"  # the name the parsed file has inside its own pool
_WELL_KNOWN: Final = "google/protobuf/"
_PROTOC_LOCK = threading.Lock()
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+\Z")
_MAX_ERRORS: Final = 5

FDP: TypeAlias = descriptor_pb2.FileDescriptorProto
FieldProto: TypeAlias = descriptor_pb2.FieldDescriptorProto


def _well_known_include() -> str:
    return str(importlib.resources.files("grpc_tools") / "_proto")


def _well_known(name: str) -> FDP | None:
    """The runtime's own descriptor of a well-known type's file (``google/protobuf/…``)."""
    if not name.startswith(_WELL_KNOWN):
        return None
    module = name[len(_WELL_KNOWN) : -len(".proto")].replace("/", ".") + "_pb2"
    try:
        generated = importlib.import_module(f"google.protobuf.{module}")
    except ImportError:
        return None
    return FDP.FromString(generated.DESCRIPTOR.serialized_pb)


# --- parsing -----------------------------------------------------------------------------------


class ProtobufFormat:
    """Parses ``.proto`` files and Confluent's base64 descriptors (``SchemaFormat`` for PROTOBUF)."""

    schema_type: SchemaType = SchemaType.PROTOBUF

    def parse(self, schema: Schema, references: Mapping[str, ParsedSchema]) -> ProtobufSchema:
        dependencies: dict[str, FDP] = {}
        sources: dict[str, str | None] = {}
        for ref in schema.references:
            parsed = references.get(ref.name)
            if parsed is None:
                raise InvalidSchema(
                    f"reference '{ref.name}' ({ref.subject} version {ref.version}) was not given"
                )
            if not isinstance(parsed, ProtobufSchema):
                raise InvalidSchema(
                    f"reference '{ref.name}' is a {parsed.schema.schema_type} schema, not PROTOBUF"
                )
            _check_import_path(ref.name)
            imported = FDP()
            imported.CopyFrom(parsed.file)
            imported.name = ref.name
            for path, proto in [(ref.name, imported), *parsed.dependencies.items()]:
                if dependencies.setdefault(path, proto) != proto:
                    raise InvalidSchema(f"two references give different files for import '{path}'")
            sources.setdefault(ref.name, parsed.source)
            for path, text in parsed.sources.items():
                sources.setdefault(path, text)
        file = _from_descriptor(schema.text)
        source: str | None = None
        if file is None:
            file = _compile(schema.text, sources)
            source = schema.text
        pool = _pool(file, dependencies)
        needed = _imports(file, dependencies)
        return ProtobufSchema(
            schema,
            file,
            {p: dependencies[p] for p in needed},
            {p: sources.get(p) for p in needed},
            source,
            pool,
        )


def _check_import_path(path: str) -> None:
    normalized = posixpath.normpath(path)
    if (
        not path.endswith(".proto")
        or path.startswith("/")
        or normalized != path
        or normalized.startswith("..")
        or "\\" in path
        or path == ROOT_FILE
    ):
        raise InvalidSchema(
            f"reference name '{path}' is not a usable import path (a relative path to a .proto)"
        )


def _from_descriptor(text: str) -> FDP | None:
    """The file of a base64 ``FileDescriptorProto`` schema (as Confluent's serializers register
    them), or None if ``text`` is not one."""
    if not text.strip() or not _BASE64.match(text):
        return None
    try:
        file = FDP.FromString(base64.b64decode("".join(text.split()), validate=True))
    except (binascii.Error, DecodeError, ValueError):
        return None
    if len(unknown_fields.UnknownFieldSet(file)):
        return None  # bytes that happen to parse, not a descriptor
    file.name = ROOT_FILE
    file.ClearField("source_code_info")
    return file


def _compile(text: str, sources: Mapping[str, str | None]) -> FDP:
    """``text`` compiled by protoc next to the sources of its references."""
    with tempfile.TemporaryDirectory(prefix="brokergate-proto-") as tmp:
        root = Path(tmp)
        for path, source in sources.items():
            if source is None:
                continue  # registered as a descriptor: protoc reports it if the text imports it
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source, encoding="utf-8")
        (root / ROOT_FILE).write_text(text, encoding="utf-8")
        with _PROTOC_LOCK:
            try:
                generated = _protoc_compiler.get_protos(
                    ROOT_FILE.encode(), [str(root).encode(), _well_known_include().encode()]
                )
            except _protoc_compiler.ProtocErrors as exc:
                raise InvalidSchema(_protoc_message(exc.errors(), sources)) from None
    return _serialized_file(generated[-1][1])  # the last file is the one asked for


def _protoc_message(errors: Iterable[Any], sources: Mapping[str, str | None]) -> str:
    lines = []
    for error in list(errors)[:_MAX_ERRORS]:
        filename = (
            error.filename.decode("utf-8", "replace") if isinstance(error.filename, bytes) else error.filename
        )
        message = (
            error.message.decode("utf-8", "replace") if isinstance(error.message, bytes) else error.message
        )
        if filename == ROOT_FILE:
            filename = "schema"
        if "File not found" in message and sources.get(filename, "") is None:
            message += " (the reference was registered as a descriptor, not as .proto text)"
        where = f"{filename}:{error.line + 1}:{error.column + 1}" if error.line >= 0 else filename
        lines.append(f"{where}: {message}")
    return "invalid .proto: " + "; ".join(lines)


def _serialized_file(code: bytes) -> FDP:
    """The ``FileDescriptorProto`` protoc embeds in the Python module it generates."""
    for node in ast.walk(ast.parse(code)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AddSerializedFile"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, bytes)
        ):
            return FDP.FromString(node.args[0].value)
    raise InvalidSchema("protoc produced no descriptor for the schema")  # a grpc_tools change


def _imports(file: FDP, dependencies: Mapping[str, FDP]) -> list[str]:
    """The non-well-known files ``file`` imports, directly or not."""
    seen: list[str] = []

    def visit(proto: FDP) -> None:
        for name in proto.dependency:
            if name not in seen and name in dependencies:
                seen.append(name)
                visit(dependencies[name])

    visit(file)
    return seen


def _pool(file: FDP, dependencies: Mapping[str, FDP]) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(proto: FDP, importer: str) -> None:
        for name in proto.dependency:
            if name in added:
                continue
            dependency = dependencies.get(name) or _well_known(name)
            if dependency is None:
                raise InvalidSchema(
                    f"{importer} imports '{name}', which is neither a reference nor a well-known type"
                )
            added.add(name)
            add(dependency, name)
        try:
            pool.Add(proto)
        except Exception as exc:  # the pool says why in a TypeError or a ValueError
            raise InvalidSchema(f"the descriptor of {importer} does not build: {exc}") from None

    add(file, "the schema")
    return pool


# --- the parsed schema -------------------------------------------------------------------------


class ProtobufSchema:
    """A parsed ``.proto``: its file, the files it imports, its own descriptor pool and codec."""

    def __init__(
        self,
        schema: Schema,
        file: FDP,
        dependencies: Mapping[str, FDP],
        sources: Mapping[str, str | None],
        source: str | None,
        pool: descriptor_pool.DescriptorPool,
    ) -> None:
        self.schema = schema
        self.file = file
        self.dependencies = dependencies  # import path -> file, every file imported but well-known ones
        self.sources = sources  # import path -> .proto text (None: registered as a descriptor)
        self.source = source  # this schema's .proto text (None: registered as a descriptor)
        self.pool = pool
        self.descriptor: FileDescriptor = pool.FindFileByName(ROOT_FILE)
        self._canonical = _canonical(file)
        self._codec: ProtobufCodec | None = None

    def canonical(self) -> str:
        return self._canonical

    def reading_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"the writer's schema is {writer.schema.schema_type}, not PROTOBUF"]
        return list(dict.fromkeys(_Diff(writer, self).run()))

    def codec(self) -> ProtobufCodec:
        if self._codec is None:
            self._codec = ProtobufCodec(self.file, self.pool)
        return self._codec

    def record_name(self) -> str | None:
        if not self.file.message_type:
            return None
        name = self.file.message_type[0].name
        return f"{self.file.package}.{name}" if self.file.package else name

    def __repr__(self) -> str:
        messages = [m.name for m in self.file.message_type]
        return f"ProtobufSchema(package={self.file.package!r}, messages={messages})"


def _canonical(file: FDP) -> str:
    normalized = FDP()
    normalized.CopyFrom(file)
    normalized.ClearField("name")
    normalized.ClearField("source_code_info")
    if normalized.syntax == "proto2":
        normalized.ClearField("syntax")  # proto2 is what an absent syntax means
    for message in _all_messages(normalized.message_type):
        for field in message.field:
            field.ClearField("json_name")
        for extension in message.extension:
            extension.ClearField("json_name")
    for extension in normalized.extension:
        extension.ClearField("json_name")
    return text_format.MessageToString(normalized, print_unknown_fields=True)  # custom options too


def _all_messages(
    messages: Iterable[descriptor_pb2.DescriptorProto],
) -> Iterable[descriptor_pb2.DescriptorProto]:
    for message in messages:
        yield message
        yield from _all_messages(message.nested_type)


# --- compatibility -----------------------------------------------------------------------------

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

    def __init__(self, schema: ProtobufSchema) -> None:
        self.messages: dict[str, tuple[descriptor_pb2.DescriptorProto, str]] = {}
        self.enums: set[str] = set()
        files = [schema.file, *schema.dependencies.values()]
        for proto in files:
            for name in proto.dependency:
                well_known = _well_known(name)
                if well_known is not None:
                    files.append(well_known)
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


class _Diff:
    """Confluent's Protobuf difference rules: the writer's file against the reader's."""

    def __init__(self, writer: ProtobufSchema, reader: ProtobufSchema) -> None:
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
                self._message(message, match, _join(wscope, message.name), _join(rscope, match.name), name)

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


def _join(scope: str, name: str) -> str:
    return f"{scope}.{name}" if scope else name


def _local(type_name: str, package: str) -> str:
    full = type_name.lstrip(".")
    return full[len(package) + 1 :] if package and full.startswith(package + ".") else full


def _type(field: FieldProto) -> str:
    if field.type == FieldProto.TYPE_ENUM:
        return f"enum {field.type_name.lstrip('.')}"
    return _TYPE_NAMES[field.type]


# --- the codec ---------------------------------------------------------------------------------


def write_message_indexes(indexes: list[int]) -> bytes:
    """Confluent's message-index list: ``[0]`` as the single byte 0, else the count and each
    index as zig-zag varints."""
    if indexes == [0]:
        return b"\x00"
    out = bytearray()
    for value in [len(indexes), *indexes]:
        value = (value << 1) ^ (value >> 63)
        while value > 0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


def read_message_indexes(payload: bytes) -> tuple[list[int], int]:
    """The message-index list at the start of ``payload`` and where the message begins."""
    position = 0

    def varint() -> int:
        nonlocal position
        result = shift = 0
        while True:
            if position >= len(payload):
                raise ConversionError("the payload ends inside its message-index list")
            byte = payload[position]
            position += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7
            if shift > 63:
                raise ConversionError("the payload's message-index list holds an overlong varint")

    count = varint()
    if count == 0:
        return [0], position
    if count < 0 or count > 64:
        raise ConversionError(f"the payload's message-index list claims {count} indexes")
    return [varint() for _ in range(count)], position


def _class_depth(root: Descriptor) -> int:
    """How deep ``message_factory.GetMessageClass(root)`` would recurse, walked with a stack: it
    visits, depth first, the message types of fields that have no class yet (a type gets its class
    as it is entered, so a cycle of types ends the walk)."""
    seen = {root.full_name}
    stack = [iter(_field_types(root))]
    deepest = 1
    while stack:
        for child in stack[-1]:
            if child.full_name not in seen and getattr(child, "_concrete_class", None) is None:
                seen.add(child.full_name)
                stack.append(iter(_field_types(child)))
                deepest = max(deepest, len(stack))
                break
        else:
            stack.pop()
    return deepest


def _field_types(descriptor: Descriptor) -> list[Descriptor]:
    """The message types ``GetMessageClass`` goes on to from ``descriptor``: its fields', and its
    extensions' (what they extend and what they hold)."""
    types = [f.message_type for f in descriptor.fields if f.message_type is not None]
    for extension in descriptor.extensions:
        types.append(extension.containing_type)
        if extension.message_type is not None:
            types.append(extension.message_type)
    return types


class ProtobufCodec:
    """Protobuf JSON to and from Confluent's Protobuf payload (``Codec``): the first message type
    of the file on encode, the one the payload's index list names on decode."""

    def __init__(self, file: FDP, pool: descriptor_pool.DescriptorPool) -> None:
        self._pool = pool
        self._classes: dict[str, type[Message]] = {}
        # In declaration order: the order the message-index list counts in.
        self._messages: list[Descriptor] = [
            pool.FindMessageTypeByName(_join(file.package, m.name)) for m in file.message_type
        ]
        self._default = self._messages[0] if self._messages else None

    def message_class(self, indexes: Sequence[int] = (0,)) -> type[Message]:
        """The generated class of the message the index list names (the first one by default)."""
        return self._class(self._descriptor(list(indexes)))

    def _class(self, descriptor: Descriptor) -> type[Message]:
        cls = self._classes.get(descriptor.full_name)
        if cls is None:
            # protobuf makes a message's class by recursion over the message types of its fields:
            # a chain of hundreds of types would end in a RecursionError, so its depth is bounded
            if (depth := _class_depth(descriptor)) > MAX_SCHEMA_DEPTH:
                raise ConversionError(
                    f"{descriptor.full_name} nests message types {depth} deep, more than {MAX_SCHEMA_DEPTH}"
                )
            cls = message_factory.GetMessageClass(descriptor)
            self._classes[descriptor.full_name] = cls
        return cls

    def encode(self, value: JSON) -> bytes:
        if self._default is None:
            raise ConversionError("the schema defines no message type")
        if not isinstance(value, dict):
            raise ConversionError(f"a {self._default.full_name} message is a JSON object")
        message = self._class(self._default)()
        try:
            json_format.ParseDict(value, message, descriptor_pool=self._pool)
        except RecursionError:
            raise ConversionError("the value is nested too deeply") from None
        except (json_format.ParseError, TypeError, ValueError) as exc:
            raise ConversionError(f"not a {self._default.full_name} message: {exc}") from None
        return b"\x00" + message.SerializeToString(deterministic=True)

    def decode(self, payload: bytes) -> JSON:
        indexes, start = read_message_indexes(payload)
        descriptor = self._descriptor(indexes)
        try:
            message = self._class(descriptor).FromString(payload[start:])
        except DecodeError as exc:
            raise ConversionError(f"the payload is not a {descriptor.full_name} message: {exc}") from None
        try:
            return json_format.MessageToDict(
                message, always_print_fields_with_no_presence=True, descriptor_pool=self._pool
            )
        except (TypeError, ValueError, RecursionError) as exc:  # e.g. an Any of a type the schema lacks
            raise ConversionError(f"the {descriptor.full_name} message has no JSON form: {exc}") from None

    def _descriptor(self, indexes: list[int]) -> Descriptor:
        if not indexes or not 0 <= indexes[0] < len(self._messages):
            raise ConversionError(f"the payload names message {indexes}, which the schema does not have")
        descriptor = self._messages[indexes[0]]
        for index in indexes[1:]:
            if not 0 <= index < len(descriptor.nested_types):
                raise ConversionError(f"the payload names message {indexes}, which the schema does not have")
            descriptor = descriptor.nested_types[index]
        return descriptor
