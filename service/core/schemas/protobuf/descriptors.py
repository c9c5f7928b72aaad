"""The descriptor vocabulary the Protobuf modules share: file and field descriptor protos, the
name a parsed file has in its own pool, the well-known types' files, full names, and protoc's
lock, its include directory and the descriptor in each module it generates.

Collaborators: ``parsing`` (builds a schema's pool with the well-known files it imports),
``compatibility`` (names every type a schema can reach) and ``codec`` (finds message types by
full name); ``google.protobuf``'s generated modules hold the well-known types' descriptors.
"""

from __future__ import annotations

import ast
import importlib
import importlib.resources
import threading
from typing import Final, TypeAlias

from google.protobuf import descriptor_pb2

ROOT_FILE: Final = "registered_schema.proto"  # the name the parsed file has inside its own pool
_WELL_KNOWN: Final = "google/protobuf/"

FDP: TypeAlias = descriptor_pb2.FileDescriptorProto
FieldProto: TypeAlias = descriptor_pb2.FieldDescriptorProto

# One protoc runs at a time, so parsing is safe from any number of worker threads.
PROTOC_LOCK: Final = threading.Lock()


def protoc_include() -> bytes:
    """The include directory of the well-known types' ``.proto`` files bundled with protoc."""
    return str(importlib.resources.files("grpc_tools") / "_proto").encode()


def serialized_file(code: bytes) -> FDP | None:
    """The ``FileDescriptorProto`` protoc embeds in a Python module it generates (None: none)."""
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
    return None


def well_known(name: str) -> FDP | None:
    """The runtime's own descriptor of a well-known type's file (``google/protobuf/…``)."""
    if not name.startswith(_WELL_KNOWN):
        return None
    module = name[len(_WELL_KNOWN) : -len(".proto")].replace("/", ".") + "_pb2"
    try:
        generated = importlib.import_module(f"google.protobuf.{module}")
    except ImportError:
        return None
    return FDP.FromString(generated.DESCRIPTOR.serialized_pb)


def join(scope: str, name: str) -> str:
    """``name`` in ``scope`` (a package or a message's full name; "" for none)."""
    return f"{scope}.{name}" if scope else name
