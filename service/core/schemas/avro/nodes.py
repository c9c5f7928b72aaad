"""The normalized form of an Avro schema, as the parser builds it and every other module reads it.

A node is a primitive or a full name (``str``), a union (``list``) or a ``dict`` (a named type,
an array or a map, or a primitive with attributes); named types are looked up by full name in the
schema's ``named`` mapping. Also the names and integer ranges Avro defines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from ...rules import INT64_MAX, INT64_MIN

PRIMITIVES: Final = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED_KINDS: Final = frozenset({"record", "error", "enum", "fixed"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INT_RANGE: Final = (-(2**31), 2**31 - 1)
_LONG_RANGE: Final = (INT64_MIN, INT64_MAX)

Node = Any  # a normalized schema: a primitive or full name (str), a union (list) or a dict


def _resolve(node: Node, named: Mapping[str, Node]) -> Node:
    if isinstance(node, str) and node not in PRIMITIVES:
        return named[node]
    return node


def _kind(node: Node) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    return str(node["type"])


def _branch(node: Node) -> str:
    if isinstance(node, str):
        return node
    return str(node.get("name") or node["type"])
