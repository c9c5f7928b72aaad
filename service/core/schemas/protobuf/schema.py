"""The parsed Protobuf schema (``ParsedSchema`` for PROTOBUF) and its canonical text.

A ``ProtobufSchema`` holds its file, the files it imports, their ``.proto`` texts and its own
descriptor pool; it answers the registry's questions about itself through its collaborators:
``compatibility.Diff`` (what a reader of it cannot read of a writer's data) and
``codec.ProtobufCodec`` (its records' payloads).

Canonical text: the ``FileDescriptorProto`` protoc builds, in protobuf text format, without what
is only spelling — the file's own name, source locations and comments, ``json_name`` — so layout,
comments, option syntax and the ``.proto``/descriptor spelling of one schema give one text.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from google.protobuf import descriptor_pb2, descriptor_pool, text_format
from google.protobuf.descriptor import FileDescriptor

from ..model import ParsedSchema, Schema
from .codec import ProtobufCodec
from .compatibility import Diff
from .descriptors import FDP, ROOT_FILE
from .text import Names, render

SERIALIZED: Final = "serialized"
IGNORE_EXTENSIONS: Final = "ignore_extensions"
_SERIALIZED_NAME: Final = "default"  # the file name Confluent's serialized descriptors carry


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
        *,
        names: Names | None = None,
        syntax: bool = True,
        normalized: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.schema = schema
        self.file = file
        self.dependencies = dependencies  # import path -> file, every file imported but well-known ones
        self.sources = sources  # import path -> .proto text (None: registered as a descriptor)
        self.source = source  # this schema's .proto text (None: a descriptor no text says faithfully)
        self.pool = pool
        self._names = names  # how its text spells type names (None: fully qualified)
        self._syntax = syntax  # whether its text says its syntax
        self._normalized = normalized  # its normalized text, written on demand (None: none is)
        self.descriptor: FileDescriptor = pool.FindFileByName(ROOT_FILE)
        self._canonical = canonical(file)
        self._codec: ProtobufCodec | None = None

    def canonical(self) -> str:
        return self._canonical

    def formatted(self) -> str:
        """The text the registry stores and answers: the ``.proto`` text (a schema registered as
        a descriptor written as text, as Confluent does, where ``text.render`` can say it)."""
        return self.source if self.source is not None else self.schema.text

    def normalized(self) -> str:
        """The text ``?normalize=true`` stores: Confluent's normalized print (``text``'s rules),
        where the text can say the schema faithfully, else ``formatted``."""
        return self._normalized() or self.formatted()

    def in_format(self, name: str) -> str | None:
        """The text for Confluent's ``?format=``: ``serialized``, the ``FileDescriptorProto`` in
        base64 (what Confluent's deserializers ask for); ``ignore_extensions``, the text without
        extensions, extension ranges and custom options; None for a name it has no form of (or
        a text it cannot write)."""
        if name == IGNORE_EXTENSIONS:
            return render(self.file, self._names, syntax=self._syntax, extensions=False)
        if name != SERIALIZED:
            return None
        file = FDP()
        file.CopyFrom(self.file)
        file.name = _SERIALIZED_NAME
        return base64.b64encode(file.SerializeToString()).decode("ascii")

    def reading_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return [f"the writer's schema is {writer.schema.schema_type}, not PROTOBUF"]
        return list(dict.fromkeys(Diff(writer, self).run()))

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


def canonical(file: FDP) -> str:
    """The schema's canonical text: its file in text format without what is only spelling."""
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
