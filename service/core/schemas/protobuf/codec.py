"""The Protobuf codec: Protobuf JSON to and from Confluent's Protobuf payload.

Codec: the first message type of the file, as Confluent's serializers default to. JSON is
protobuf's JSON mapping (``json_format``), as Confluent's REST Proxy gives it: lowerCamelCase
field names (the proto names are accepted on input), fields at their default value included,
64-bit integers as strings, bytes as base64. The payload is the message-index list, Confluent's
array of zig-zag varints naming the message within the file (the single byte ``0`` for the first
top-level message), then the message's binary encoding (deterministic: map entries in key
order). Decoding follows whatever index list the payload carries.

Collaborators: ``google.protobuf``'s ``json_format`` and ``message_factory`` over the schema's own
descriptor pool (``schema.ProtobufSchema.codec`` makes the codec); ``json_depth`` bounds how deep
message types may nest.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError, Message

from service.core.json_depth import MAX_SCHEMA_DEPTH

from ..model import JSON, ConversionError
from .descriptors import FDP, join


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
            pool.FindMessageTypeByName(join(file.package, m.name)) for m in file.message_type
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
