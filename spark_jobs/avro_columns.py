"""Avro records as a Spark column: the reader schema's Spark type, and payloads resolved into it.

The column's type comes from the reader schema, as Spark's own ``from_avro``
maps Avro (``SchemaConverters``):

- records → struct (a field without ``null`` in its type is not nullable);
  arrays → array; maps → map<string, _>; enums → string; fixed and bytes → binary;
- a union of ``null`` and one type → that type, nullable; of int and long → long,
  of float and double → double; any other union → a struct of its non-null
  branches, ``member0``, ``member1``, … in union order, one set per value;
- logical types: ``date`` → date; ``timestamp-millis``/``-micros``/``-nanos`` →
  timestamp; ``local-timestamp-*`` → timestamp_ntz; ``decimal`` → decimal(p, s)
  (a string beyond Spark's 38 digits); the others (``time-*``, ``uuid``,
  ``duration``) → their underlying type;
- a recursive type has no Spark type: ``UnsupportedSchema`` when the job is planned.

A payload is decoded with the schema it was written with and resolved to the
reader schema by Avro's rules (fastavro's reader, given both; the registry's
``reading_errors`` decides first whether the writer can be read at all, with
Java's rules: a record or enum whose name changed namespace is matched by its
unqualified name). A writer whose top-level type is ``bytes`` framed its value as
Confluent's serializers do, the bytes alone without Avro's length before them: the
payload is all the bytes, resolved to the reader as Avro bytes are. Logical types
are left out of what fastavro is given and applied here from the reader's schema,
so a value always has the column's type whatever the writer's annotations.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from fastavro import _read_py, parse_schema, schemaless_reader
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from service.core.schemas.avro import PRIMITIVES, AvroSchema
from service.core.schemas.model import ParsedSchema, fill_roles

from .column_types import (
    MICROS_PER_MILLI,
    Convert,
    DecodeError,
    Shape,
    UnsupportedSchema,
    identity,
    not_null,
    nullable,
)

Node = Any  # a node of a normalized Avro schema (``AvroSchema.root``)

MAX_DECIMAL_PRECISION: Final = 38
_NAMED: Final = frozenset({"record", "error", "enum", "fixed"})
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_MISSING: Final[Any] = object()
# Each kind of decoded Python value, and the union branches (in preference order) that hold it.
_BRANCHES_OF: Final[Mapping[type, tuple[str, ...]]] = {
    bool: ("boolean",),
    int: ("int", "long"),
    float: ("float", "double"),
    str: ("string", "enum", "bytes", "fixed"),  # bytes and fixed too: defaults spell them as text
    bytes: ("bytes", "fixed"),
    list: ("array",),
    dict: ("map", "record", "error"),
}


def _kind(node: Node) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    return str(node["type"])


def _short(name: str) -> str:
    return name.rpartition(".")[2]


def _logical(node: Node) -> str | None:
    return node.get("logicalType") if isinstance(node, dict) else None


def _as_bytes(value: Any) -> bytes:
    # fastavro hands out a bytes or fixed default as the schema spells it: code points 0-255
    return value.encode("latin-1") if isinstance(value, str) else bytes(value)


class _Shaper:
    """Walks a reader schema once, building each node's ``Shape``."""

    def __init__(self, named: Mapping[str, Node]) -> None:
        self.named = named
        self._open: list[str] = []  # named types being walked: meeting one again is recursion

    def shape(self, node: Node, where: str) -> Shape:
        if isinstance(node, str) and node not in PRIMITIVES:
            node = self.named[node]
        kind = _kind(node)
        if kind == "union":
            return self._union(node, where)
        if kind not in _NAMED:
            return self._unnamed(node, kind, where)
        name = node["name"]
        if name in self._open:
            raise UnsupportedSchema(
                f"the Avro type {name!r} contains itself ({where or 'at the top'}), "
                "which no Spark column can hold; read the column as binary"
            )
        self._open.append(name)
        try:
            return self._named(node, kind, where or _short(name))
        finally:
            self._open.pop()

    def _named(self, node: dict[str, Any], kind: str, where: str) -> Shape:
        if kind == "enum":
            return Shape(StringType(), False, identity)
        if kind == "fixed":
            return _decimal(node, where) or Shape(BinaryType(), False, _as_bytes)
        fields = []
        converters = []
        for f in node["fields"]:
            inner = f"{where}.{f['name']}"
            s = self.shape(f["type"], inner)
            fields.append(StructField(f["name"], s.type, s.nullable))
            convert = nullable(s.convert) if s.nullable else not_null(s.convert, inner)
            converters.append((f["name"], convert, f.get("default", _MISSING)))

        def convert_record(value: Any) -> dict[str, Any]:
            if not isinstance(value, dict):
                raise DecodeError(f"{where}: expected a record, got {type(value).__name__}")
            out = {}
            for name, convert, default in converters:
                item = value.get(name, default)  # a record default may leave out fields with defaults
                out[name] = convert(None if item is _MISSING else item)
            return out

        return Shape(StructType(fields), False, convert_record)

    def _unnamed(self, node: Node, kind: str, where: str) -> Shape:
        if kind == "array":
            item = self.shape(node["items"], f"{where}[]")
            convert = nullable(item.convert) if item.nullable else not_null(item.convert, f"{where}[]")
            return Shape(ArrayType(item.type, item.nullable), False, lambda v: [convert(x) for x in v])
        if kind == "map":
            value = self.shape(node["values"], f"{where}{{}}")
            convert = nullable(value.convert) if value.nullable else not_null(value.convert, f"{where}{{}}")
            return Shape(
                MapType(StringType(), value.type, value.nullable),
                False,
                lambda v: {k: convert(x) for k, x in v.items()},
            )
        return _primitive(node, kind, where)

    def _union(self, branches: list[Node], where: str) -> Shape:
        resolved = [self.named[b] if isinstance(b, str) and b not in PRIMITIVES else b for b in branches]
        has_null = any(_kind(b) == "null" for b in resolved)
        members = [b for b in resolved if _kind(b) != "null"]
        if not members:
            return Shape(NullType(), True, lambda v: None)
        if len(members) == 1:
            s = self.shape(members[0], where)
            inner = s.convert
            return Shape(s.type, has_null or s.nullable, lambda v: inner(v[1] if type(v) is tuple else v))
        kinds = {_kind(m) for m in members}
        plain = not any(_logical(m) for m in members)
        if plain and kinds <= {"int", "long"}:
            return Shape(LongType(), has_null, identity)
        if plain and kinds <= {"float", "double"}:
            return Shape(DoubleType(), has_null, lambda v: float(v))
        shapes = [self.shape(m, f"{where}.member{i}") for i, m in enumerate(members)]
        struct = StructType([StructField(f"member{i}", s.type, True) for i, s in enumerate(shapes)])
        pick = _picker(members, where)

        def convert_union(value: Any) -> dict[str, Any]:
            index, inner = pick(value)
            return {f"member{index}": shapes[index].convert(inner)}

        return Shape(struct, has_null, convert_union)


def _picker(members: list[Node], where: str) -> Any:
    """Which member of a union a decoded value is: a named type by the name fastavro gives it, the
    others by the kind of Python value (an int in the int branch if it fits, else the long one)."""
    by_name: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    for i, m in enumerate(members):
        kind = _kind(m)
        by_kind.setdefault(kind, i)
        if kind in _NAMED:
            by_name.setdefault(m["name"], i)
            by_name.setdefault(_short(m["name"]), i)

    def pick(value: Any) -> tuple[int, Any]:
        if type(value) is tuple:
            name, inner = value
            index = by_name.get(name, by_name.get(_short(name)))
            if index is None:
                raise DecodeError(f"{where}: the union has no branch {name!r}")
            return index, inner
        kinds = _BRANCHES_OF.get(type(value), ())
        if type(value) is int and not _INT_MIN <= value <= _INT_MAX:
            kinds = ("long",)
        for kind in kinds:
            if kind in by_kind:
                return by_kind[kind], value
        raise DecodeError(f"{where}: a {type(value).__name__} value fits no branch of the union")

    return pick


def _primitive(node: Node, kind: str, where: str) -> Shape:
    logical = _logical(node)
    if kind == "int" and logical == "date":
        return Shape(DateType(), False, identity)  # days since the epoch, as Arrow's date32 takes them
    if kind == "long" and logical is not None and logical.endswith(("-millis", "-micros", "-nanos")):
        if logical.startswith(("timestamp-", "local-timestamp-")):
            spark_type: DataType = TimestampType() if logical.startswith("timestamp-") else TimestampNTZType()
            if logical.endswith("-millis"):
                return Shape(spark_type, False, lambda v: v * MICROS_PER_MILLI)
            if logical.endswith("-nanos"):
                return Shape(spark_type, False, lambda v: v // 1000)
            return Shape(spark_type, False, identity)
    if kind == "bytes":
        return _decimal(node, where) or Shape(BinaryType(), False, _as_bytes)
    simple: dict[str, DataType] = {
        "null": NullType(),
        "boolean": BooleanType(),
        "int": IntegerType(),
        "long": LongType(),
        "float": FloatType(),
        "double": DoubleType(),
        "string": StringType(),
    }
    if kind == "null":
        return Shape(NullType(), True, lambda v: None)
    if kind in ("float", "double"):
        return Shape(simple[kind], False, lambda v: float(v))  # an int default of a float field
    return Shape(simple[kind], False, identity)


def _decimal(node: dict[str, Any] | str, where: str) -> Shape | None:
    """The shape of a ``decimal`` (bytes or fixed: a big-endian two's-complement unscaled value)."""
    if _logical(node) != "decimal":
        return None
    assert isinstance(node, dict)
    precision, scale = node.get("precision"), node.get("scale", 0)
    if type(precision) is not int or type(scale) is not int or not 0 <= scale <= precision or precision < 1:
        return None  # not a valid decimal: Avro says to read the underlying type

    def value_of(raw: Any) -> Decimal:
        unscaled = int.from_bytes(_as_bytes(raw), "big", signed=True)
        if len(str(abs(unscaled))) > precision:
            raise DecodeError(f"{where or 'the value'}: {unscaled} has more than {precision} digits")
        return Decimal(unscaled).scaleb(-scale)

    if precision > MAX_DECIMAL_PRECISION:
        return Shape(StringType(), False, lambda raw: str(value_of(raw)))
    return Shape(DecimalType(precision, scale), False, value_of)


# --- fastavro's schemas ---------------------------------------------------------------------


def _fastavro_schema(
    node: Node, named: Mapping[str, Node], defined: set[str], aliases: Mapping[str, set[str]]
) -> Any:
    """The schema fastavro reads with: named types defined at first use (those of the
    references too), defaults and aliases kept (resolution needs them), logical types left out."""
    if isinstance(node, str):
        if node in PRIMITIVES or node in defined:
            return node
        return _fastavro_schema(named[node], named, defined, aliases)
    if isinstance(node, list):
        return [_fastavro_schema(b, named, defined, aliases) for b in node]
    kind = node["type"]
    if kind in PRIMITIVES:
        return kind
    if kind == "array":
        return {"type": "array", "items": _fastavro_schema(node["items"], named, defined, aliases)}
    if kind == "map":
        return {"type": "map", "values": _fastavro_schema(node["values"], named, defined, aliases)}
    name = node["name"]
    defined.add(name)
    out: dict[str, Any] = {"type": "record" if kind == "error" else kind, "name": name}
    names = {*node.get("aliases", ()), *aliases.get(name, ())}
    if names:
        out["aliases"] = sorted(names)
    if kind == "enum":
        out["symbols"] = node["symbols"]
        if "default" in node:
            out["default"] = node["default"]
    elif kind == "fixed":
        out["size"] = node["size"]
    else:
        fields = []
        for f in node["fields"]:
            field = {"name": f["name"], "type": _fastavro_schema(f["type"], named, defined, aliases)}
            for key in ("default", "aliases"):
                if key in f:
                    field[key] = f[key]
            fields.append(field)
        out["fields"] = fields
    return out


def _renamed(reader: AvroSchema, writer: AvroSchema) -> dict[str, set[str]]:
    """Aliases that let fastavro match named types by unqualified name, as the registry's rules do."""
    out: dict[str, set[str]] = {}
    for rname in reader.named:
        for wname in writer.named:
            if wname != rname and _short(wname) == _short(rname):
                out.setdefault(rname, set()).add(wname)
    return out


def _parsed_for_fastavro(schema: AvroSchema, aliases: Mapping[str, set[str]] | None = None) -> Any:
    return parse_schema(_fastavro_schema(schema.root, schema.named, set(), aliases or {}), {})


def _is_recursive(schema: AvroSchema) -> bool:
    try:
        _Shaper(schema.named).shape(schema.root, "")
    except UnsupportedSchema:
        return True
    return False


class AvroColumns:
    """The column of a reader schema (``ColumnReader``): payloads of any writer schema the reader
    can read, decoded and resolved into the column's type."""

    def __init__(self, reader_id: int, reader: AvroSchema) -> None:
        shape = _Shaper(reader.named).shape(reader.root, "")
        self.data_type: DataType = shape.type
        self._convert: Convert = nullable(shape.convert)
        self._reader_id = reader_id
        self._reader = reader
        # by writer id: the writer's and the reader's fastavro schemas (None: the same),
        # fastavro's reader (its pure-Python one for recursive writers: it cannot overflow the C
        # stack) and whether the writer's payloads are bare bytes; or why it cannot be read
        self._plans: dict[int, tuple[Any, Any, Any, bool] | DecodeError] = {}

    def read(self, writer_id: int, writer: ParsedSchema, payload: bytes) -> Any:
        plan = self._plans.get(writer_id)
        if plan is None:
            plan = self._plans[writer_id] = self._plan(writer_id, writer)
        if isinstance(plan, DecodeError):
            raise plan
        writer_schema, reader_schema, read, bare = plan
        if bare:
            payload = _as_avro_bytes(payload)
        try:
            datum = read(io.BytesIO(payload), writer_schema, reader_schema, return_named_type=True)
        except RecursionError:
            raise DecodeError("the value is nested too deeply") from None
        except Exception as exc:  # fastavro raises many kinds for bytes that are not a datum
            raise DecodeError(f"the payload is not Avro data of schema {writer_id}: {exc!r}") from None
        return self._convert(datum)

    def _plan(self, writer_id: int, writer: ParsedSchema) -> tuple[Any, Any, Any, bool] | DecodeError:
        if not isinstance(writer, AvroSchema):
            return DecodeError(f"schema {writer_id} is {writer.schema.schema_type.value}, not AVRO")
        bare = _kind(writer.root) == "bytes"
        if writer_id == self._reader_id or writer.canonical() == self._reader.canonical():
            return _parsed_for_fastavro(self._reader), None, schemaless_reader, bare
        errors = self._reader.reading_errors(writer)
        if errors:
            return DecodeError(
                f"schema {writer_id} cannot be read as the column's schema {self._reader_id}: "
                f"{fill_roles(errors[0], 'reader', 'writer')}"
            )
        read = _read_py.schemaless_reader if _is_recursive(writer) else schemaless_reader
        return (
            _parsed_for_fastavro(writer),
            _parsed_for_fastavro(self._reader, _renamed(self._reader, writer)),
            read,
            bare,
        )


def _as_avro_bytes(payload: bytes) -> bytes:
    """A bare-bytes payload as Avro's binary encoding has the bytes: their length (zig-zag, then
    7 bits a byte), then them, for fastavro's reader to resolve."""
    n = len(payload) << 1
    length = bytearray()
    while n > 0x7F:
        length.append((n & 0x7F) | 0x80)
        n >>= 7
    length.append(n)
    return bytes(length) + payload
