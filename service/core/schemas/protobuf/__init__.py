"""Protobuf schemas: parsing with protoc, the canonical text, Confluent's rules (a subset), the codec.

``parsing`` compiles ``.proto`` text (or reads a registered descriptor) into a ``schema`` with its
own descriptor pool and canonical text; ``builtins`` are the files Confluent's registry resolves
by itself, ``options`` takes out custom options no file defines, ``text`` writes a descriptor as
``.proto`` text; ``compatibility`` holds Confluent's difference rules; ``codec`` turns Protobuf
JSON into Confluent's payload and back; ``descriptors`` is the vocabulary they share.
"""

from .codec import ProtobufCodec, read_message_indexes, write_message_indexes
from .parsing import ProtobufFormat
from .schema import ProtobufSchema

__all__ = [
    "ProtobufCodec",
    "ProtobufFormat",
    "ProtobufSchema",
    "read_message_indexes",
    "write_message_indexes",
]
