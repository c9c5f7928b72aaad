"""A ``FileDescriptorProto`` written as ``.proto`` text, laid out as Confluent's registry writes it.

Confluent answers a schema registered as a base64 descriptor (what its serializers register) with
``.proto`` text: it turns the descriptor into a file element and prints it (its
``ProtobufSchemaUtils.toString``): ``syntax``, ``package``, imports, options, then the messages and
after them the enums, extensions, services; in a message its reserved ranges, options, fields,
oneofs, extension ranges, extensions, then nested messages and nested enums, each group after a
blank line, two spaces of indent, type names fully qualified as the descriptor has them.

Where Confluent's print would not compile with protoc, this one differs: a map field is written
``map<K, V>`` (not its entry message with ``option map_entry``), and proto3's synthetic oneofs of
``optional`` fields are left out. What ``render`` cannot write faithfully (groups, editions'
features, custom options, which a descriptor alone cannot name) makes it return None; ``parsing``
then keeps the descriptor and checks any text it does write compiles to the same schema.

Normalized (``?normalize=true``; Confluent's ``toNormalizedString``, its printer with
``FormatContext(normalize=true)``), rule by rule:

- the ``syntax`` statement only for proto3 (proto2 is what its absence means);
- imports sorted, then public imports sorted;
- every list of options (the file's, a message's, a field's with its ``default`` and
  ``json_name``, a oneof's, an enum's, an enum value's, a service's, a method's) sorted by name;
- a message's fields sorted by tag, its oneofs sorted by their first field's tag (each oneof's
  fields by tag), its reserved ranges and extension ranges one a statement sorted by first
  number (reserved names after them, by name), ``N to N`` written ``N``;
- an enum's values sorted by number, then name; its reserved ranges as a message's;
- an ``extend`` block per extended type, in first-use order, its fields sorted by tag;
- type names fully qualified (a leading dot), map fields ``map<K, .V>``;
- a numeric default in plain decimal (``1e3`` is ``1000``, ``1.50`` is ``1.5``) rounded to three
  decimals, as Java's ``DecimalFormat`` prints it, unless rounding changes the value (Confluent's
  print would store another default; this one keeps the digits); ``inf`` and ``nan`` as written;
- messages, enums, services, methods and nested types stay in the order given (a message's
  index, which a record's payload names, is its position).

Collaborators: none (pure); ``parsing`` calls ``render``.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Sequence
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Final

from google.protobuf import descriptor_pb2, text_encoding, unknown_fields
from google.protobuf.message import Message

from .descriptors import FDP, FieldProto

_MAX_TAG: Final = 536870911
_CONFLUENT_META: Final = 1088  # the number of Confluent's meta option on every kind of options
_NAME: Final = re.compile(r"(?<![\w.])\.?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_SCALARS: Final = {
    value: name[len("TYPE_") :].lower()
    for name, value in FieldProto.Type.items()
    if name not in ("TYPE_MESSAGE", "TYPE_ENUM", "TYPE_GROUP")
}
_LABELS: Final = {FieldProto.LABEL_OPTIONAL: "optional", FieldProto.LABEL_REQUIRED: "required"}
_NUMBERS: Final = frozenset(_SCALARS) - {FieldProto.TYPE_BOOL, FieldProto.TYPE_STRING, FieldProto.TYPE_BYTES}
_THOUSANDTH: Final = Decimal("0.001")  # java.text.DecimalFormat's default: three decimals at most


class _Unwritable(Exception):
    """The descriptor holds what the text cannot say faithfully."""


def render(
    file: FDP,
    names: Names | None = None,
    *,
    syntax: bool = True,
    extensions: bool = True,
    normalized: bool = False,
) -> str | None:
    """``file`` as ``.proto`` text, or None if it holds what this writer cannot say faithfully.
    ``names`` writes type names as a ``.proto`` author does (default: fully qualified, as a
    descriptor has them); ``syntax``: write the ``syntax`` statement of a proto2 file; without
    ``extensions``, Confluent's ``ignore_extensions`` form: no extensions, extension ranges nor
    custom options (but Confluent's own); ``normalized``: Confluent's normalized print (the
    module's rules; ``names`` and ``syntax`` are then the rules')."""
    if normalized:
        names, syntax = None, False
    try:
        return _File(file, names, syntax, extensions, normalized).text()
    except (_Unwritable, KeyError, IndexError, RecursionError):  # a value no .proto has
        return None


class Names:
    """Type names as a ``.proto`` author writes them (Confluent keeps a parsed text's names as
    written): of the names protoc resolves, from where the type is used, to the type meant, the
    longest that ``text`` spells somewhere, else the shortest.

    ``files`` are every file the schema can name types of: its own and those it imports."""

    def __init__(self, files: Iterable[FDP], text: str = "") -> None:
        self._spelled = set(_NAME.findall(text))
        self._symbols: set[str] = set()
        for file in files:
            parts = file.package.split(".") if file.package else []
            self._symbols.update(".".join(parts[: i + 1]) for i in range(len(parts)))
            self._add(file.package, file.message_type, file.enum_type)

    def _add(
        self,
        scope: str,
        messages: Iterable[descriptor_pb2.DescriptorProto],
        enums: Iterable[descriptor_pb2.EnumDescriptorProto],
    ) -> None:
        for enum in enums:
            self._symbols.add(f"{scope}.{enum.name}" if scope else enum.name)
        for message in messages:
            full = f"{scope}.{message.name}" if scope else message.name
            self._symbols.add(full)
            self._add(full, message.nested_type, message.enum_type)

    def written(self, full: str, scope: str) -> str:
        """How to write type ``full`` (``.pkg.Type``) where ``scope`` is (a package or message)."""
        parts = full.lstrip(".").split(".")
        names = [
            ".".join(parts[-size:])
            for size in range(1, len(parts) + 1)
            if self._resolved(parts[-size:], scope) == parts
        ]
        names.append(full)  # a leading dot: resolved from the root
        spelled = [name for name in names if name in self._spelled]
        return spelled[-1] if spelled else names[0]

    def _resolved(self, parts: list[str], scope: str) -> list[str] | None:
        """What protoc resolves ``parts`` to from ``scope``: the first part in the innermost scope
        that has it, the rest inside that."""
        scopes = scope.split(".") if scope else []
        for depth in range(len(scopes), -1, -1):
            first = [*scopes[:depth], parts[0]]
            if ".".join(first) in self._symbols:
                return [*first, *parts[1:]]
        return None


def _indented(lines: str) -> str:
    return "".join(f"  {line}\n" if line else "\n" for line in lines.rstrip("\n").split("\n"))


def _block(head: str, sections: Iterable[str]) -> str:
    body = "\n".join(s for s in sections if s)
    return f"{head} {{\n{_indented(body)}}}\n" if body else f"{head} {{}}\n"


def _quoted(text: str) -> str:
    return '"' + text_encoding.CEscape(text, as_utf8=True) + '"'


def _options(options: Message, custom: bool = True) -> list[str]:
    """``name = value`` of each option set: standard ones, as a descriptor cannot name custom ones
    (without ``custom``, those are left out, but Confluent's own, which it keeps)."""
    numbers = {field.field_number for field in unknown_fields.UnknownFieldSet(options)}
    if numbers and (custom or _CONFLUENT_META in numbers):
        raise _Unwritable
    out = []
    for field, value in options.ListFields():
        if field.message_type is not None or field.is_extension:
            raise _Unwritable  # features, edition defaults, extensions
        values = list(value) if not isinstance(value, (str, bytes, bool, int, float)) else [value]
        for item in values:
            if field.enum_type is not None:
                written = field.enum_type.values_by_number[item].name
            elif isinstance(item, bool):
                written = "true" if item else "false"
            elif isinstance(item, str):
                written = _quoted(item)
            else:
                written = repr(item) if isinstance(item, float) else str(item)
            out.append(f"{field.name} = {written}")
    return out


def _bracketed(options: list[str]) -> str:
    if not options:
        return ""
    if len(options) == 1:
        return f" [{options[0]}]"
    return " [\n" + _indented(",\n".join(options)) + "]"


def _ranges(keyword: str, ranges: Iterable[tuple[int, int]]) -> str:
    lines = []
    for start, last in ranges:
        end = "max" if last >= _MAX_TAG else str(last)
        lines.append(f"{keyword} {start};\n" if start == last else f"{keyword} {start} to {end};\n")
    return "".join(lines)


def _by_name(options: list[str]) -> list[str]:
    """Options sorted by name, as Confluent's normalized print has them (stable: a repeated
    option's values keep their order)."""
    return sorted(options, key=lambda option: option.split(" = ", 1)[0])


def _reserved(ranges: Sequence[tuple[int, int]], names: Iterable[str], normalized: bool) -> str:
    """Reserved ranges (first and last number) and names; normalized, one a statement sorted by
    first number, the names after them by name."""
    if normalized:
        ranges, names = sorted(ranges), sorted(names)
    return _ranges("reserved", ranges) + "".join(f"reserved {_quoted(name)};\n" for name in names)


def _number(text: str, single: bool) -> str:
    """A numeric default as Java's ``DecimalFormat`` prints it (plain decimal, three decimals at
    most), unless those three decimals change the value ``text`` is (of a float if ``single``)."""
    try:
        exact = Decimal(text)
    except InvalidOperation:
        return text
    if not exact.is_finite():
        return text  # inf, nan: Confluent's print keeps them as written too
    exponent = exact.as_tuple().exponent
    rounded = (
        exact.quantize(_THOUSANDTH, ROUND_HALF_EVEN) if isinstance(exponent, int) and exponent < -3 else exact
    )
    value = _single if single else float
    kept = rounded if value(float(rounded)) == value(float(exact)) else exact
    return format(kept.normalize(), "f")


def _single(value: float) -> float:
    """``value`` as a float field holds it (one beyond a float's range: as it is)."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return value


class _File:
    def __init__(
        self, file: FDP, names: Names | None, syntax: bool, extensions: bool, normalized: bool
    ) -> None:
        self.file = file
        self.names = names
        self.syntax = syntax
        self.extensions = extensions
        self.normalized = normalized
        self.proto3 = file.syntax == "proto3"
        if file.syntax not in ("", "proto2", "proto3"):
            raise _Unwritable  # editions

    def text(self) -> str:
        f = self.file
        out = [f'syntax = "{f.syntax or "proto2"}";\n'] if self.proto3 or self.syntax else []
        if f.package:
            out.append(f"package {f.package};\n")
        if f.dependency:
            public, weak = set(f.public_dependency), set(f.weak_dependency)
            imports = [
                f'import {"public " if i in public else "weak " if i in weak else ""}"{name}";\n'
                for i, name in enumerate(f.dependency)
            ]
            if self.normalized:  # sorted, the public ones after the others
                order = sorted(range(len(imports)), key=lambda i: (i in public, f.dependency[i]))
                imports = [imports[i] for i in order]
            out.append("\n" + "".join(imports))
        options = self.statements(f.options)
        if options:
            out.append("\n" + options)
        scope = f.package
        types = [self.message(m, scope) for m in f.message_type] + [self.enum(e) for e in f.enum_type]
        if types:
            out.append("\n" + "".join(types))
        if f.extension and self.extensions:
            out.append("\n" + self.extends(f.extension, scope))
        if f.service:
            out.append("\n" + "".join(self.service(s, scope) for s in f.service))
        return "".join(out)

    def options(self, options: Message) -> list[str]:
        written = _options(options, custom=self.extensions)
        return _by_name(written) if self.normalized else written

    def statements(self, options: Message) -> str:
        return "".join(f"option {option};\n" for option in self.options(options))

    def by_tag(self, fields: Iterable[FieldProto]) -> list[FieldProto]:
        fields = list(fields)
        return sorted(fields, key=lambda f: f.number) if self.normalized else fields

    def name(self, full: str, scope: str) -> str:
        return self.names.written(full, scope) if self.names is not None else full

    def message(self, m: descriptor_pb2.DescriptorProto, outer: str) -> str:
        scope = f"{outer}.{m.name}" if outer else m.name
        entries = {n.name: n for n in m.nested_type if n.options.map_entry}
        reserved = _reserved(
            [(r.start, r.end - 1) for r in m.reserved_range], m.reserved_name, self.normalized
        )
        synthetic = {f.oneof_index for f in m.field if f.proto3_optional}
        fields = "".join(
            self.field(f, scope, entries)
            for f in self.by_tag(m.field)
            if not f.HasField("oneof_index") or f.proto3_optional
        )
        members = [
            (o, self.by_tag(f for f in m.field if _in(f, i)))
            for i, o in enumerate(m.oneof_decl)
            if i not in synthetic
        ]
        if self.normalized:  # by their first field's tag; a oneof without fields is left out
            members = sorted(((o, f) for o, f in members if f), key=lambda member: member[1][0].number)
        oneofs = "".join(
            _block(
                f"oneof {o.name}",
                [
                    self.statements(o.options),
                    "".join(self.field(f, scope, entries, in_oneof=True) for f in group),
                ],
            )
            for o, group in members
        )
        ranges = list(m.extension_range if self.extensions else [])
        if self.normalized:
            ranges.sort(key=lambda r: r.start)
        extensions = "".join(
            _ranges("extensions", [(r.start, r.end - 1)]) if not r.HasField("options") else self.unwritable()
            for r in ranges
        )
        nested = "".join(self.message(n, scope) for n in m.nested_type if n.name not in entries)
        nested += "".join(self.enum(e) for e in m.enum_type)
        sections = [reserved, self.statements(m.options), fields, oneofs, extensions]
        sections += [self.extends(m.extension, scope) if m.extension and self.extensions else "", nested]
        return _block(f"message {m.name}", sections)

    def unwritable(self) -> str:
        raise _Unwritable

    def field(
        self,
        f: FieldProto,
        scope: str,
        entries: dict[str, descriptor_pb2.DescriptorProto],
        in_oneof: bool = False,
    ) -> str:
        entry = entries.get(f.type_name.rsplit(".", 1)[-1]) if f.label == f.LABEL_REPEATED else None
        if entry is not None and f.type_name.endswith(f".{entry.name}"):
            key, value = entry.field[0], entry.field[1]
            written = f"map<{self.type(key, scope)}, {self.type(value, scope)}>"
        else:
            written = self.type(f, scope)
            label = self.label(f) if not in_oneof else ""
            written = f"{label} {written}" if label else written
        options = _options(f.options, custom=self.extensions)  # then default and json_name,
        if f.HasField("default_value") and not self.proto3:  # as Confluent writes them
            options.append(f"default = {self.default(f)}")
        if f.HasField("json_name"):
            options.append(f"json_name = {_quoted(f.json_name)}")
        if self.normalized:
            options = _by_name(options)
        return f"{written} {f.name} = {f.number}{_bracketed(options)};\n"

    def label(self, f: FieldProto) -> str:
        if f.label == f.LABEL_REPEATED:
            return "repeated"
        if f.proto3_optional:
            return "optional"
        return "" if self.proto3 else _LABELS[f.label]

    def type(self, f: FieldProto, scope: str) -> str:
        if f.type == f.TYPE_GROUP:
            raise _Unwritable
        return self.name(f.type_name, scope) if f.type_name else _SCALARS[f.type]

    def default(self, f: FieldProto) -> str:
        if f.type == f.TYPE_STRING:
            return _quoted(f.default_value)
        if f.type == f.TYPE_BYTES:
            return f'"{f.default_value}"'  # a descriptor holds a bytes default escaped already
        if self.normalized and f.type in _NUMBERS:
            return _number(f.default_value, single=f.type == f.TYPE_FLOAT)
        return f.default_value

    def enum(self, e: descriptor_pb2.EnumDescriptorProto) -> str:
        reserved = _reserved([(r.start, r.end) for r in e.reserved_range], e.reserved_name, self.normalized)
        constants = list(e.value)
        if self.normalized:
            constants.sort(key=lambda v: (v.number, v.name))
        values = "".join(f"{v.name} = {v.number}{_bracketed(self.options(v.options))};\n" for v in constants)
        return _block(f"enum {e.name}", [reserved + self.statements(e.options) + values])

    def extends(self, fields: Iterable[FieldProto], scope: str) -> str:
        by_extendee: dict[str, list[FieldProto]] = {}
        for f in fields:
            by_extendee.setdefault(f.extendee, []).append(f)
        return "".join(
            _block(
                f"extend {self.name(extendee, scope)}",
                ["".join(self.field(f, scope, {}) for f in self.by_tag(group))],
            )
            for extendee, group in by_extendee.items()
        )

    def service(self, s: descriptor_pb2.ServiceDescriptorProto, outer: str) -> str:
        scope = f"{outer}.{s.name}" if outer else s.name
        rpcs = []
        for m in s.method:
            request, response = self.name(m.input_type, scope), self.name(m.output_type, scope)
            request = f"stream {request}" if m.client_streaming else request
            response = f"stream {response}" if m.server_streaming else response
            options = self.statements(m.options)
            body = f" {{\n{_indented(options)}}}" if options else ""
            rpcs.append(f"rpc {m.name} ({request}) returns ({response}){body};\n")
        return _block(f"service {s.name}", [self.statements(s.options), "".join(rpcs)])


def _in(f: FieldProto, index: int) -> bool:
    return f.HasField("oneof_index") and f.oneof_index == index and not f.proto3_optional
