"""An Avro schema holding every kind of type, and random values of it in two forms: the Avro JSON a
REST client sends, and the datum Confluent's ``AvroSerializer`` (over fastavro) writes.

The two forms say the same thing, so the bytes the gateway's codec writes for the first must be the
bytes Confluent's serializer writes for the second. Unions are given in fastavro's tuple notation
(``(branch name, datum)``), so that the serializer writes the branch the JSON names rather than the
first that fits; a field the JSON leaves out for its default is given its default in the datum
(fastavro cannot write a ``bytes`` default from its JSON).
"""

from __future__ import annotations

import json
import random
import struct
from typing import Any

from service.core.schemas.avro import PRIMITIVES, AvroSchema
from service.core.schemas.formats import parse
from service.core.schemas.model import Schema, SchemaType

_INNER = {
    "type": "record",
    "name": "Inner",
    "fields": [
        {"name": "x", "type": "int"},
        {"name": "z", "type": "long", "default": 5},
        {"name": "next", "type": ["null", "Inner"], "default": None},
    ],
}
EVERY_TYPE: dict[str, Any] = {
    "type": "record",
    "name": "Every",
    "namespace": "com.acme",
    "fields": [
        {"name": "nothing", "type": "null"},
        {"name": "flag", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "inner", "type": _INNER},
        {"name": "longs", "type": {"type": "array", "items": "long"}},
        {"name": "scores", "type": {"type": "map", "values": ["null", "double", "Color"]}},
        {
            "name": "any",
            "type": [
                "null",
                "boolean",
                "int",
                "long",
                "float",
                "double",
                "string",
                "bytes",
                "Hash",
                "Color",
                "Inner",
                {"type": "array", "items": "string"},
                {"type": "map", "values": "int"},
            ],
        },
        {
            "name": "nested",
            "type": {
                "type": "array",
                "items": {"type": "map", "values": {"type": "array", "items": "Inner"}},
            },
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "at_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local_at", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "clock", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "clock_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {
            "name": "fixed_amount",
            "type": {"type": "fixed", "name": "Amount", "size": 5, "logicalType": "decimal", "precision": 9},
        },
        {
            "name": "period",
            "type": {"type": "fixed", "name": "Period", "size": 12, "logicalType": "duration"},
        },
        {"name": "maybe_at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        # Defaults of every kind, a union's of its first branch (as Avro reads it); a record's
        # default that leaves out fields with defaults of their own (Inner.z, Inner.next).
        {"name": "d_int", "type": "int", "default": -3},
        {"name": "d_float", "type": "float", "default": 1},
        {"name": "d_string", "type": ["string", "null"], "default": "hé"},
        {"name": "d_null", "type": ["null", "Inner"], "default": None},
        {"name": "d_bytes", "type": "bytes", "default": "\u00ff\u0000a"},
        {"name": "d_hash", "type": "Hash", "default": "abcd"},
        {"name": "d_color", "type": "Color", "default": "BLUE"},
        {"name": "d_inner", "type": "Inner", "default": {"x": 1}},
        {"name": "d_longs", "type": {"type": "array", "items": "long"}, "default": [1, -1, 2**40]},
        {"name": "d_map", "type": {"type": "map", "values": "bytes"}, "default": {"k": "\u00e9"}},
        {"name": "d_at", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 0},
    ],
}
EVERY_TYPE_TEXT = json.dumps(EVERY_TYPE)


def every_type() -> AvroSchema:
    parsed = parse(Schema(SchemaType.AVRO, EVERY_TYPE_TEXT), {})
    assert isinstance(parsed, AvroSchema)
    return parsed


_FLOAT32 = struct.Struct("<f")
_TEXT = 'aZ0 é€😀\u0000"\\'
_SPECIAL = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class Values:
    """Random values of a parsed Avro schema, each as ``(Avro JSON, Confluent datum)``, from ``rnd``."""

    def __init__(self, schema: AvroSchema, rnd: random.Random) -> None:
        self.named = schema.named
        self.root = schema.root
        self.rnd = rnd

    def value(self) -> tuple[Any, Any]:
        return self.pair(self.root, 0)

    def _resolve(self, node: Any) -> Any:
        return self.named[node] if isinstance(node, str) and node not in PRIMITIVES else node

    def pair(self, node: Any, depth: int) -> tuple[Any, Any]:
        rnd = self.rnd
        node = self._resolve(node)
        if isinstance(node, list):
            return self._union(node, depth)
        kind = node if isinstance(node, str) else node["type"]
        if kind == "null":
            return None, None
        if kind == "boolean":
            flag = rnd.random() < 0.5
            return flag, flag
        if kind in ("int", "long"):
            bits = 32 if kind == "int" else 64
            n = rnd.choice([0, 1, -1, 63, 64, -64, -65, 8191, 8192, 2 ** (bits - 1) - 1, -(2 ** (bits - 1))])
            n = n if rnd.random() < 0.5 else rnd.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
            return n, n
        if kind in ("float", "double"):
            return self._number(kind)
        if kind == "string":
            text = "".join(rnd.choice(_TEXT) for _ in range(self._length()))
            return text, text
        if kind in ("bytes", "fixed"):
            size = node["size"] if kind == "fixed" else self._length()
            data = bytes(rnd.randrange(256) for _ in range(size))
            return data.decode("latin-1"), data
        if kind == "enum":
            symbol = rnd.choice(node["symbols"])
            return symbol, symbol
        if kind == "array":
            items = [self.pair(node["items"], depth + 1) for _ in range(self._count(depth))]
            return [j for j, _ in items], [d for _, d in items]
        if kind == "map":
            keys = {
                "".join(rnd.choice(_TEXT) for _ in range(rnd.randrange(6))) for _ in range(self._count(depth))
            }
            entries = {k: self.pair(node["values"], depth + 1) for k in keys}
            return {k: j for k, (j, _) in entries.items()}, {k: d for k, (_, d) in entries.items()}
        return self._record(node, depth)

    def _record(self, node: dict[str, Any], depth: int) -> tuple[Any, Any]:
        as_json: dict[str, Any] = {}
        datum: dict[str, Any] = {}
        for field in node["fields"]:
            name = field["name"]
            if "default" in field and self.rnd.random() < 0.4:  # left out: its default is written
                datum[name] = self.default(field["default"], field["type"])
            else:
                as_json[name], datum[name] = self.pair(field["type"], depth + 1)
        return as_json, datum

    def _union(self, branches: list[Any], depth: int) -> tuple[Any, Any]:
        if depth > 4 and "null" in branches:
            return None, None
        branch = self.rnd.choice(branches)
        if branch == "null":
            return None, None
        as_json, datum = self.pair(branch, depth + 1)
        name = _branch(branch)
        return {name: as_json}, (name, datum)

    def default(self, value: Any, node: Any) -> Any:
        """A field default (Avro JSON, union values bare) as a datum: Avro's reading of it."""
        node = self._resolve(node)
        if isinstance(node, list):  # a union's default is a value of its first branch
            return None if node[0] == "null" else (_branch(node[0]), self.default(value, node[0]))
        kind = node if isinstance(node, str) else node["type"]
        if kind in ("bytes", "fixed"):
            return value.encode("latin-1")
        if kind in ("float", "double"):
            return float(value)
        if kind == "array":
            return [self.default(v, node["items"]) for v in value]
        if kind == "map":
            return {k: self.default(v, node["values"]) for k, v in value.items()}
        if kind in ("record", "error"):
            return {
                f["name"]: self.default(value[f["name"]] if f["name"] in value else f["default"], f["type"])
                for f in node["fields"]
            }
        return value

    def _number(self, kind: str) -> tuple[Any, Any]:
        rnd = self.rnd
        pick = rnd.random()
        if pick < 0.15:
            special = rnd.choice(list(_SPECIAL))
            return special, _SPECIAL[special]
        if pick < 0.3:
            n = rnd.randint(-(2**24), 2**24)  # a JSON integer for a float
            return n, float(n)
        if kind == "float":
            value = rnd.choice([0.0, -0.0, 1.5, 1e-45, 3.4028234663852886e38, -1.1754943508222875e-38])
            if rnd.random() < 0.6:
                value = _FLOAT32.unpack(_FLOAT32.pack(rnd.uniform(-1e6, 1e6)))[0]
            return value, value
        value = rnd.choice([0.0, -0.0, 0.1, 5e-324, 1.7976931348623157e308, -2.5])
        if rnd.random() < 0.6:
            value = rnd.uniform(-1e12, 1e12)
        return value, value

    def _length(self) -> int:
        return self.rnd.choice([0, 1, 5, 63, 64, 200])

    def _count(self, depth: int) -> int:
        if depth > 4:
            return 0
        return self.rnd.choice([0, 1, 3, 70]) if depth < 2 else self.rnd.choice([0, 1, 2])


def _branch(node: Any) -> str:
    """How Avro JSON names a union branch: a named type by its full name, others by their type."""
    if isinstance(node, str):
        return node
    return str(node.get("name") or node["type"])
