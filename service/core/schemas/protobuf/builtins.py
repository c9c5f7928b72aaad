"""The files a schema may import with no reference, beside ``google/protobuf/*``: Confluent's
built-in dependencies.

A Confluent registry resolves ``google/type/*.proto`` (Google's common types: ``color``,
``postal_address``, ``money`` …) and its own ``confluent/meta.proto`` and
``confluent/type/{decimal,variant}.proto`` by itself, so schemas written for it import them
without references. Google's files are read from the ``googleapis-common-protos`` package, which
ships them; Confluent's own (Apache-2.0) are package data under ``builtin/``.

Collaborators: ``parsing`` puts a built-in's text beside the schema for protoc and asks for its
descriptor when it builds a schema's pool; ``compatibility`` names the types it declares. Their
descriptors are compiled by protoc once per process.
"""

from __future__ import annotations

import functools
import importlib.resources
import tempfile
from pathlib import Path
from typing import Final

from grpc_tools import _protoc_compiler

from .descriptors import FDP, PROTOC_LOCK, protoc_include, serialized_file

_GOOGLE_TYPES: Final = (
    "calendar_period",
    "color",
    "date",
    "datetime",
    "dayofweek",
    "decimal",
    "expr",
    "fraction",
    "interval",
    "latlng",
    "money",
    "month",
    "phone_number",
    "postal_address",
    "quaternion",
    "timeofday",
)
_CONFLUENT: Final = ("confluent/meta.proto", "confluent/type/decimal.proto", "confluent/type/variant.proto")
BUILTINS: Final = frozenset([*(f"google/type/{name}.proto" for name in _GOOGLE_TYPES), *_CONFLUENT])
_ALL: Final = "all_builtins.proto"


def source(path: str) -> str | None:
    """The ``.proto`` text of built-in ``path`` (None if it is not one)."""
    if path not in BUILTINS:
        return None
    if path.startswith("google/type/"):
        located = importlib.resources.files("google.type") / path.removeprefix("google/type/")
    else:
        located = importlib.resources.files(__package__) / "builtin" / path
    return located.read_text(encoding="utf-8")


def file(path: str) -> FDP | None:
    """The descriptor of built-in ``path`` (None if it is not one)."""
    return _compiled().get(path) if path in BUILTINS else None


@functools.cache
def _compiled() -> dict[str, FDP]:
    with tempfile.TemporaryDirectory(prefix="brokergate-builtin-") as tmp:
        root = Path(tmp)
        for path in BUILTINS:
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source(path) or "", encoding="utf-8")
        imports = "".join(f'import "{path}";\n' for path in sorted(BUILTINS))
        (root / _ALL).write_text(f'syntax = "proto3";\n{imports}', encoding="utf-8")
        with PROTOC_LOCK:
            generated = _protoc_compiler.get_protos(_ALL.encode(), [str(root).encode(), protoc_include()])
    files: dict[str, FDP] = {}
    for _, code in generated:
        proto = serialized_file(code)
        if proto is not None and proto.name in BUILTINS:
            proto.ClearField("source_code_info")
            files[proto.name] = proto
    return files
