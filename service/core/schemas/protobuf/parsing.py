"""Parsing a Protobuf schema: ``.proto`` text compiled by protoc, or a registered descriptor.

``ProtobufFormat.parse`` takes a ``.proto`` file (proto2, proto3 or editions) and compiles it with
protoc in-process (``grpc_tools``): the text and the ``.proto`` texts of its references go into a
fresh temporary directory under their import paths, protoc reads them from there and from its
bundled well-known types (``google/protobuf/*.proto``, which need no reference), the built-in
files Confluent resolves by itself (``builtins``) are put beside it when imported, and its errors
become the ``InvalidSchema`` message; custom options no file defines are left out (``options``).
protoc is reached through the entry point grpc_tools' own import hook uses, which raises its
errors as exceptions (``protoc.main`` prints them on the process's stderr, which no thread can
capture for itself); the descriptor is read from the Python module protoc generates. One protoc
runs at a time (a lock), so parsing is safe from any number of worker threads. The schema may
also be what Confluent's own serializers register: a base64 ``FileDescriptorProto``; it is
written as ``.proto`` text (``text``), the text Confluent answers for it, when protoc compiles that
text back to the same file; otherwise it keeps no text and can be imported by other descriptors,
not by ``.proto`` text (protoc needs the text).

Each parsed schema has its own ``DescriptorPool`` holding its file, its references under their
import paths and the well-known types it imports, so two schemas that declare the same file
name, package or message name never collide.

Collaborators: protoc (``grpc_tools``), ``descriptors`` (the well-known files a pool needs),
``builtins``, ``options``, ``text`` and ``schema.ProtobufSchema``, what a parse returns.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from google.protobuf import descriptor_pool, unknown_fields
from google.protobuf.message import DecodeError
from grpc_tools import _protoc_compiler

from ..model import InvalidSchema, ParsedSchema, Schema, SchemaType
from . import builtins, options
from .descriptors import FDP, PROTOC_LOCK, ROOT_FILE, protoc_include, serialized_file, well_known
from .schema import ProtobufSchema, canonical
from .text import Names, render

_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+\Z")
_SYNTAX = re.compile(r"^\s*syntax\s*=", re.MULTILINE)
_IMPORT = re.compile(r'\bimport\s+(?:public\s+|weak\s+)?"([^"\n]+)"')
_MAX_ERRORS: Final = 5
_OPTION_ROUNDS: Final = 5  # protoc reports every unknown option of a file at once: one round is usual


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
        described, blanked = file is not None, False
        if file is None:
            file, blanked = _compile(schema.text, sources)
        pool = _pool(file, dependencies)  # a descriptor is checked before it is written as text
        source: str | None
        names = None if described else Names(_files(file, dependencies), schema.text)
        declared = described or _SYNTAX.search(schema.text) is not None
        written: str | None = None  # the text written from the descriptor, if it says it faithfully
        if described:
            source = written = _as_text(file, sources)
        elif blanked:  # an option protoc does not know is kept in the text as sent
            source = schema.text
        else:
            written = _as_text(file, sources, names, declared)
            source = written or schema.text

        def normalized() -> str | None:  # none where the descriptor's text is not faithful
            return _normalized_text(file, sources) if written is not None else None

        needed = _imports(file, dependencies)

        return ProtobufSchema(
            schema,
            file,
            {p: dependencies[p] for p in needed},
            {p: sources.get(p) for p in needed},
            source,
            pool,
            names=names,
            syntax=declared,
            normalized=normalized,
        )


def _as_text(
    file: FDP, sources: Mapping[str, str | None], names: Names | None = None, syntax: bool = True
) -> str | None:
    """The ``.proto`` text of a parsed file as Confluent stores and answers it: ``text.render``'s,
    if protoc compiles it to the same file (None if not, or if it cannot write the file)."""
    written = render(file, names, syntax=syntax)
    if written is None:
        return None
    try:
        again, _ = _compile(written, sources)
    except InvalidSchema:
        return None
    return written if canonical(again) == canonical(file) else None


def _normalized_text(file: FDP, sources: Mapping[str, str | None]) -> str | None:
    """The ``.proto`` text of a parsed file as Confluent stores it for ``?normalize=true``
    (``text.render``'s normalized print), if protoc compiles it and its own print is itself
    (None if not: a proto3 enum whose negative value sorts before its zero, say). Only its
    order differs from a faithful text's (the file's other print, which ``_as_text`` checked):
    it is another file's, the one ``?normalize=true`` registers, not this one."""
    written = render(file, normalized=True)
    if written is None:
        return None
    try:
        again, _ = _compile(written, sources)
    except InvalidSchema:
        return None
    return written if render(again, normalized=True) == written else None


def _files(file: FDP, dependencies: Mapping[str, FDP]) -> list[FDP]:
    """``file`` and every file it imports, directly or not: those whose types it can name."""
    files = {"": file}
    pending = list(file.dependency)
    while pending:
        name = pending.pop()
        if name in files:
            continue
        found = dependencies.get(name) or well_known(name) or builtins.file(name)
        if found is not None:
            files[name] = found
            pending.extend(found.dependency)
    return list(files.values())


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


def _compile(text: str, sources: Mapping[str, str | None]) -> tuple[FDP, bool]:
    """``text`` compiled by protoc next to the sources of its references and the built-in files
    they import, and whether custom options no file defines were left out (``options``) for it."""
    texts = {path: source for path, source in sources.items() if source is not None}
    texts[ROOT_FILE] = text
    for written in list(texts.values()):
        for path in _IMPORT.findall(written):
            if path not in sources and (builtin := builtins.source(path)) is not None:
                texts[path] = builtin
    with tempfile.TemporaryDirectory(prefix="brokergate-proto-") as tmp:
        root = Path(tmp)
        for path, source in texts.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source, encoding="utf-8")
        for attempt in range(_OPTION_ROUNDS + 1):
            with PROTOC_LOCK:
                try:
                    generated = _protoc_compiler.get_protos(
                        ROOT_FILE.encode(), [str(root).encode(), protoc_include()]
                    )
                    break
                except _protoc_compiler.ProtocErrors as exc:
                    errors = list(exc.errors())
            if attempt == _OPTION_ROUNDS or not _blank_unknown_options(root, texts, errors):
                raise InvalidSchema(_protoc_message(errors, sources))
    file = serialized_file(generated[-1][1])  # the last file is the one asked for
    if file is None:
        raise InvalidSchema("protoc produced no descriptor for the schema")  # a grpc_tools change
    return file, attempt > 0


def _blank_unknown_options(root: Path, texts: dict[str, str], errors: list[Any]) -> bool:
    """Blank out in their files the custom options protoc's ``errors`` call unknown; False if
    any error is another one (or names no option it can find)."""
    changed: dict[str, str] = {}
    for error in errors:
        message = _decoded(error.message)
        path = _decoded(error.filename)
        text = changed.get(path, texts.get(path))
        blanked = options.blank(text, error.line, error.column) if text is not None else None
        if not options.unknown(message) or blanked is None:
            return False
        changed[path] = blanked
    for path, text in changed.items():
        texts[path] = text
        (root / path).write_text(text, encoding="utf-8")
    return bool(changed)


def _decoded(value: str | bytes) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _protoc_message(errors: Iterable[Any], sources: Mapping[str, str | None]) -> str:
    lines = []
    for error in list(errors)[:_MAX_ERRORS]:
        filename = _decoded(error.filename)
        message = _decoded(error.message)
        if filename == ROOT_FILE:
            filename = "schema"
        if "File not found" in message and sources.get(filename, "") is None:
            message += " (the reference was registered as a descriptor, not as .proto text)"
        where = f"{filename}:{error.line + 1}:{error.column + 1}" if error.line >= 0 else filename
        lines.append(f"{where}: {message}")
    return "invalid .proto: " + "; ".join(lines)


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
            dependency = dependencies.get(name) or well_known(name) or builtins.file(name)
            if dependency is None:
                raise InvalidSchema(
                    f"{importer} imports '{name}', which is neither a reference nor a built-in file"
                )
            added.add(name)
            add(dependency, name)
        try:
            pool.Add(proto)
        except Exception as exc:  # the pool says why in a TypeError or a ValueError
            raise InvalidSchema(f"the descriptor of {importer} does not build: {exc}") from None

    add(file, "the schema")
    return pool
