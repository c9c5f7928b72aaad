"""Protobuf: protoc's verdict on .proto text, one canonical text per schema whatever its spelling,
Confluent's compatibility rules, and protobuf JSON to Confluent's payload and back."""

from __future__ import annotations

import base64
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.core.schemas.model import (
    Compatibility,
    ConversionError,
    InvalidSchema,
    SchemaReference,
    SchemaType,
    compatibility_errors,
)
from service.core.schemas.protobuf import (
    ProtobufFormat,
    ProtobufSchema,
    read_message_indexes,
    write_message_indexes,
)
from tests.unit.schemas.helpers import Parser

parse = Parser(ProtobufFormat(), SchemaType.PROTOBUF)


def proto3(body: str, package: str = "demo") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


USER = proto3(
    """
import "google/protobuf/timestamp.proto";

// A user, as the examples have it.
message User {
  string user_name = 1;
  int64 id = 2;
  repeated string tags = 3;
  map<string, int32> scores = 4;
  optional string nick = 5;
  google.protobuf.Timestamp created = 6;
  Kind kind = 7;
  Address address = 8;
  oneof contact { string email = 9; string phone = 10; }
  bytes avatar = 11;
  message Address { string street = 1; }
}
enum Kind { KIND_UNKNOWN = 0; KIND_ADMIN = 1; }
message Other { double x = 1; }
"""
)


# --- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('syntax = "proto3";\nmessage A { int32 a = 1 }', r"schema:2:\d+: Expected \";\""),
        ('syntax = "proto3";\nmessage A { B b = 1; }', r'"B" is not defined'),
        ('syntax = "proto3";\nmessage A { int32 a = 1; int32 b = 1; }', "has already been used"),
        ('syntax = "proto3";\nimport "missing.proto";', r"missing\.proto: File not found"),
        ('syntax = "proto4";', "Unrecognized syntax identifier"),
        (
            'syntax = "proto3";\nmessage A { required int32 a = 1; }',
            "Required fields are not allowed in proto3",
        ),
    ],
)
def test_protoc_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(InvalidSchema, match=message):
        parse(text)


def test_proto2_parses_with_required_fields() -> None:
    parsed = parse(
        'syntax = "proto2";\nmessage A { required int32 a = 1; optional string b = 2 [default = "x"]; }'
    )
    assert parsed.codec().decode(parsed.codec().encode({"a": 1})) == {"a": 1}


def test_imports_resolve_from_references_by_import_path() -> None:
    common = parse(proto3("message Money { int64 cents = 1; string currency = 2; }", "common"))
    ref = SchemaReference("common/money.proto", "money", 1)
    order = parse(
        proto3('import "common/money.proto";\nmessage Order { common.Money total = 1; }'),
        {"common/money.proto": common},
        (ref,),
    )
    codec = order.codec()
    assert codec.decode(codec.encode({"total": {"cents": "5", "currency": "EUR"}})) == {
        "total": {"cents": "5", "currency": "EUR"}
    }
    with pytest.raises(InvalidSchema, match=r"reference 'common/money\.proto' .* was not given"):
        parse(order.schema.text, {}, (ref,))
    # a file importing the importer: the imports of references come along
    nested_ref = SchemaReference("shop/order.proto", "order", 1)
    invoice = parse(
        proto3('import "shop/order.proto";\nmessage Invoice { Order order = 1; }'),
        {"shop/order.proto": order},
        (nested_ref,),
    )
    assert invoice.codec().encode({"order": {"total": {"cents": "1"}}}) == b"\x00\n\x04\n\x02\x08\x01"


@pytest.mark.parametrize(
    "name", ["../escape.proto", "/abs.proto", "a/../b.proto", "noext", "registered_schema.proto"]
)
def test_reference_names_must_be_relative_import_paths(name: str) -> None:
    common = parse(proto3("message M {}"))
    with pytest.raises(InvalidSchema, match="not a usable import path"):
        parse(proto3(f'import "{name}";'), {name: common}, (SchemaReference(name, "s", 1),))


def test_schemas_registered_as_base64_descriptors_parse() -> None:
    parsed = parse(USER)
    from_descriptor = parse(base64.b64encode(parsed.file.SerializeToString()).decode())
    assert from_descriptor.canonical() == parsed.canonical()
    value = {"userName": "a", "id": "7"}
    assert from_descriptor.codec().encode(value) == parsed.codec().encode(value)


def test_the_same_names_in_two_schemas_do_not_collide() -> None:
    first = parse(proto3("message M { string a = 1; }"))
    second = parse(proto3("message M { int32 a = 1; }"))
    assert first.codec().decode(first.codec().encode({"a": "x"})) == {"a": "x"}
    assert second.codec().decode(second.codec().encode({"a": 5})) == {"a": 5}


def test_parsing_is_safe_from_many_threads() -> None:
    def one(i: int) -> dict[str, Any]:
        parsed = parse(proto3(f"message M {{ int32 f{i} = {i + 1}; }}"))
        return dict(parsed.codec().decode(parsed.codec().encode({f"f{i}": i + 1})))

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(24)))
    assert results == [{f"f{i}": i + 1} for i in range(24)]


# --- canonical text -------------------------------------------------------------------------------


def test_layout_and_comments_do_not_change_the_canonical_text() -> None:
    a = parse(proto3("message A { int32 a = 1; string b = 2 [deprecated=true]; }"))
    b = parse(
        """// leading comment
syntax   =   'proto3';

package demo ;

/* the A message */
message A {
  int32 a = 1;   // trailing
  string b = 2 [ deprecated = true ];
}
"""
    )
    assert a.canonical() == b.canonical()


@pytest.mark.parametrize(
    "other",
    [
        proto3("message A { int32 renamed = 1; string b = 2 [deprecated=true]; }"),
        proto3("message A { int32 a = 1; string b = 2; }"),
        proto3("message A { int32 a = 1; string b = 2 [deprecated=true]; }", "other"),
        proto3("message A { int64 a = 1; string b = 2 [deprecated=true]; }"),
    ],
)
def test_changes_change_the_canonical_text(other: str) -> None:
    assert (
        parse(proto3("message A { int32 a = 1; string b = 2 [deprecated=true]; }")).canonical()
        != parse(other).canonical()
    )


# --- compatibility --------------------------------------------------------------------------------


errors = parse.reading_errors


@pytest.mark.parametrize(
    ("writer", "reader"),
    [
        ("message A { int32 a = 1; }", "message A { int32 a = 1; string b = 2; }"),  # field added
        ("message A { int32 a = 1; string b = 2; }", "message A { int32 a = 1; }"),  # field removed
        ("message A { int32 a = 1; }", "message A { int32 renamed = 1; }"),
        ("message A { int32 a = 1; }", "message A { int64 a = 1; }"),
        ("message A { int32 a = 1; }", "message A { bool a = 1; }"),
        ("message A { int32 a = 1; }", "message A { E a = 1; } enum E { Z = 0; }"),
        ("message A { sint32 a = 1; }", "message A { sint64 a = 1; }"),
        ("message A { string a = 1; }", "message A { bytes a = 1; }"),
        ("message A { string a = 1; }", "message A { repeated string a = 1; }"),
        ("message A { fixed32 a = 1; }", "message A { sfixed32 a = 1; }"),
        ("message A { int32 a = 1; }", "message A { int32 a = 1; } message B {}"),  # message added
        ("message A { int32 a = 1; } message B {}", "message B {} message A { int32 a = 1; }"),  # moved
        (
            "message A { int32 a = 1; } enum E { X = 0; }",
            "message A { int32 a = 1; } enum E { X = 0; Y = 1; }",
        ),
        ("message A { int32 a = 1; } enum E { X = 0; }", "message A { int32 a = 1; }"),  # enum removed
        (
            "message A { oneof o { int32 a = 1; int32 b = 2; } }",
            "message A { oneof o { int32 a = 1; int32 b = 2; int32 c = 3; } }",
        ),
        ("message A { oneof o { int32 a = 1; int32 b = 2; } }", "message A { int32 a = 1; int32 b = 2; }"),
        ("message A { oneof o { int32 a = 1; } }", "message A { }"),  # the whole oneof deleted
        (
            "message A { int32 a = 1; }",
            "message A { oneof o { int32 a = 1; int32 b = 2; } }",
        ),  # one field moved in
        ("message A { int32 a = 1; }", "message A { optional int32 a = 1; }"),
        (
            "message A { B b = 1; } message B { int32 x = 1; }",
            "message A { B b = 1; } message B { int64 x = 1; }",
        ),
        (
            "message A { B b = 1; } message B { int32 x = 1; }",
            "message A { repeated B b = 1; } message B { int32 x = 1; }",
        ),
        ("message A { map<string, int32> m = 1; }", "message A { map<string, int64> m = 1; }"),
        ("message A { A next = 1; int32 v = 2; }", "message A { A next = 1; int64 v = 2; }"),  # recursive
    ],
)
def test_confluent_compatible_changes(writer: str, reader: str) -> None:
    assert errors(proto3(reader), proto3(writer)) == []


A1_KIND = [("FIELD_SCALAR_KIND_CHANGED", "#/A/1")]
A1_KIND_OF_FIELD = [("FIELD_KIND_CHANGED", "#/A/1")]


def kinds(found: list[str]) -> list[tuple[str, str]]:
    """(Confluent's errorType, its path) of each error, checking each is worded as Confluent's."""
    out = []
    for error in found:
        match = re.fullmatch(r'\{errorType:"([A-Z_]+)", description:"(.*)"\}', error)
        assert match is not None, error
        path = re.search(r"'(#/[^']*)'", match.group(2))
        assert path is not None and match.group(2).count("%s") in (1, 2), error
        out.append((match.group(1), path.group(1)))
    return out


@pytest.mark.parametrize(
    ("writer", "reader", "expected"),
    [
        ("message A {}", "message A {}", [("PACKAGE_CHANGED", "#/")]),
        (
            "message A { int32 a = 1; } message B {}",
            "message A { int32 a = 1; }",
            [("MESSAGE_REMOVED", "#/B")],
        ),
        (
            "message A { message N {} }",
            "message A { }",
            [("MESSAGE_REMOVED", "#/A/N")],
        ),
        (
            "message A { int32 a = 1; }",
            "message A { string a = 1; }",
            [("FIELD_SCALAR_KIND_CHANGED", "#/A/1")],
        ),
        (
            "message A { int32 a = 1; }",
            "message A { sint32 a = 1; }",
            [("FIELD_SCALAR_KIND_CHANGED", "#/A/1")],
        ),
        (
            "message A { int32 a = 1; }",
            "message A { fixed32 a = 1; }",
            [("FIELD_SCALAR_KIND_CHANGED", "#/A/1")],
        ),
        (
            "message A { float a = 1; }",
            "message A { double a = 1; }",
            [("FIELD_SCALAR_KIND_CHANGED", "#/A/1")],
        ),
        (
            "message A { int32 a = 1; }",
            "message A { repeated int32 a = 1; }",
            [("FIELD_NUMERIC_LABEL_CHANGED", "#/A/1")],
        ),
        (
            "message A { int32 a = 1; }",
            "message A { B a = 1; } message B {}",
            [("FIELD_KIND_CHANGED", "#/A/1")],
        ),
        (
            "message A { map<string, int32> m = 1; }",
            "message A { repeated int32 m = 1; }",
            [("FIELD_KIND_CHANGED", "#/A/1")],
        ),
        (
            "message A { map<string, int32> m = 1; }",
            "message A { map<string, string> m = 1; }",
            [("FIELD_SCALAR_KIND_CHANGED", "#/A/1")],  # the value's, where the field is
        ),
        (
            "message A { B b = 1; } message B {}",
            "message A { C b = 1; } message C {}",
            [("FIELD_NAMED_TYPE_CHANGED", "#/A/1"), ("MESSAGE_REMOVED", "#/B")],
        ),
        (  # the message's own path, not the field's that uses it
            "message A { B b = 1; } message B { int32 x = 1; }",
            "message A { B b = 1; } message B { string x = 1; }",
            [("FIELD_SCALAR_KIND_CHANGED", "#/B/1")],
        ),
        (
            "message A { oneof o { int32 a = 1; int32 b = 2; } }",
            "message A { oneof o { int32 a = 1; } }",
            [("ONEOF_FIELD_REMOVED", "#/A/o/2")],
        ),
        (
            "message A { oneof o { int32 a = 1; string b = 2; } }",
            "message A { oneof o { int32 a = 1; int32 b = 2; } }",
            [("FIELD_SCALAR_KIND_CHANGED", "#/A/o/2")],
        ),
        (
            "message A { int32 a = 1; int32 b = 2; }",
            "message A { oneof o { int32 a = 1; int32 b = 2; } }",
            [("MULTIPLE_FIELDS_MOVED_TO_ONEOF", "#/A/o")],
        ),
        (
            "message A { oneof o { int32 a = 1; } int32 b = 2; }",
            "message A { oneof o { int32 a = 1; int32 b = 2; } }",
            [("FIELD_MOVED_TO_EXISTING_ONEOF", "#/A/o")],
        ),
        (
            "message A { oneof o { int32 a = 1; } oneof p { int32 b = 2; } }",
            "message A { oneof o { int32 a = 1; int32 b = 2; } }",
            [("FIELD_MOVED_TO_EXISTING_ONEOF", "#/A/o")],
        ),
        (
            "message A { A next = 1; int64 v = 2; }",
            "message A { A next = 1; string v = 2; }",
            [("FIELD_SCALAR_KIND_CHANGED", "#/A/2")],
        ),
    ],
)
def test_confluent_incompatible_changes(writer: str, reader: str, expected: list[tuple[str, str]]) -> None:
    """Confluent's difference types at Confluent's paths: #/ then the message's names, a oneof
    member's oneof, the field's number."""
    package = "other" if expected[0][0] == "PACKAGE_CHANGED" else "demo"
    assert kinds(errors(proto3(reader, package), proto3(writer))) == expected


def test_a_message_type_of_a_reference_is_compared_where_it_is_defined() -> None:
    """A field whose type comes from a reference: that type's differences at its own path, then
    the field's FIELD_NAMED_TYPE_CHANGED, as Confluent compares another subject's version."""
    ref = SchemaReference("dep.proto", "dep", 1)
    main = proto3('import "dep.proto";\nmessage A { D d = 1; }')

    def with_dep(body: str) -> ProtobufSchema:
        return parse(main, {"dep.proto": parse(proto3(body))}, (ref,))

    old, new = with_dep("message D { int32 x = 1; }"), with_dep("message D { string x = 1; }")
    assert kinds(new.reading_errors(old)) == [
        ("FIELD_SCALAR_KIND_CHANGED", "#/D/1"),
        ("FIELD_NAMED_TYPE_CHANGED", "#/A/1"),
    ]
    assert with_dep("message D { int32 x = 1; }").reading_errors(old) == []


def test_a_refusal_is_worded_as_confluents() -> None:
    found = errors(proto3("message A { string a = 1; }"), proto3("message A { int32 a = 1; }"))
    assert found == [
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path \'#/A/1\' '
        'in the %s schema does not match its kind in the %s schema"}'
    ]


@pytest.mark.parametrize(
    ("writer", "reader", "expected"),
    [
        ("message A { required int32 a = 1; }", "message A { }", ("REQUIRED_FIELD_REMOVED", "#/A/1")),
        ("message A { }", "message A { required int32 a = 1; }", ("REQUIRED_FIELD_ADDED", "#/A/1")),
    ],
)
def test_proto2_required_fields_may_be_neither_added_nor_removed(
    writer: str, reader: str, expected: tuple[str, str]
) -> None:
    found = errors(f'syntax = "proto2";\n{reader}', f'syntax = "proto2";\n{writer}')
    assert kinds(found) == [expected]


_SCALARS = [
    "int32",
    "int64",
    "uint32",
    "uint64",
    "bool",
    "sint32",
    "sint64",
    "string",
    "bytes",
    "fixed32",
    "sfixed32",
    "fixed64",
    "sfixed64",
    "float",
    "double",
]
_GROUP = {
    "int32": 0,
    "int64": 0,
    "uint32": 0,
    "uint64": 0,
    "bool": 0,
    "sint32": 1,
    "sint64": 1,
    "string": 2,
    "bytes": 2,
    "fixed32": 3,
    "sfixed32": 3,
    "fixed64": 4,
    "sfixed64": 4,
    "float": 5,
    "double": 6,
}


@settings(max_examples=40)
@given(st.lists(st.sampled_from(_SCALARS), min_size=1, max_size=5), st.data())
def test_a_scalar_type_change_is_compatible_exactly_within_its_wire_group(
    types: list[str], data: st.DataObject
) -> None:
    i = data.draw(st.integers(0, len(types) - 1))
    changed = [*types]
    changed[i] = data.draw(st.sampled_from(_SCALARS))
    body = "message M {{ {} }}"
    old = parse(proto3(body.format(" ".join(f"{t} f{n} = {n + 1};" for n, t in enumerate(types)))))
    new = parse(proto3(body.format(" ".join(f"{t} f{n} = {n + 1};" for n, t in enumerate(changed)))))
    ok = _GROUP[types[i]] == _GROUP[changed[i]]
    for level in (Compatibility.BACKWARD, Compatibility.FORWARD, Compatibility.FULL_TRANSITIVE):
        assert (compatibility_errors(new, [old], level) == []) is ok


# --- codec ----------------------------------------------------------------------------------------

USER_VALUE = {
    "userName": "ada",
    "id": "9007199254740993",
    "tags": ["a", "b"],
    "scores": {"x": 1},
    "nick": "",
    "created": "2024-05-01T12:00:00Z",
    "kind": "KIND_ADMIN",
    "address": {"street": "Main"},
    "phone": "123",
    "avatar": "AAE=",
}


def test_json_as_confluents_rest_proxy_gives_it() -> None:
    codec = parse(USER).codec()
    payload = codec.encode(USER_VALUE)
    assert payload[:1] == b"\x00"  # the message-index list of the first message
    # lowerCamelCase names, defaults printed, 64-bit integers as strings
    assert codec.decode(payload) == USER_VALUE
    assert codec.decode(b"\x00") == {
        "userName": "",
        "id": "0",
        "tags": [],
        "scores": {},
        "kind": "KIND_UNKNOWN",
        "avatar": "",
    }


def test_proto_field_names_are_accepted_on_input() -> None:
    codec = parse(USER).codec()
    assert codec.encode({"user_name": "ada"}) == codec.encode({"userName": "ada"})


def test_payloads_of_other_messages_of_the_file_decode_by_their_index_list() -> None:
    parsed = parse(USER)
    codec = parsed.codec()
    other = codec.message_class([1])(x=1.5)  # Kind is an enum: Other is message 1
    assert codec.decode(write_message_indexes([1]) + other.SerializeToString()) == {"x": 1.5}
    address = codec.message_class([0, 1])(street="s")  # nested: [User, Address]; the map entry is 0
    assert codec.decode(write_message_indexes([0, 1]) + address.SerializeToString()) == {"street": "s"}


@pytest.mark.parametrize("indexes", [[0], [1], [0, 1], [3, 2, 1], [-1], [200]])
def test_message_indexes_round_trip(indexes: list[int]) -> None:
    encoded = write_message_indexes(indexes)
    assert read_message_indexes(encoded + b"rest") == (indexes, len(encoded))


def test_message_indexes_are_zig_zag_varints() -> None:
    assert write_message_indexes([0]) == b"\x00"
    assert write_message_indexes([1]) == b"\x02\x02"
    assert write_message_indexes([0, 1]) == b"\x04\x00\x02"
    assert write_message_indexes([64]) == b"\x02\x80\x01"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "is a JSON object"),
        ({"nope": 1}, 'has no field named "nope"'),
        ({"id": "x"}, "Failed to parse id field"),
        ({"kind": "KIND_OTHER"}, "Invalid enum value KIND_OTHER"),
        ({"created": "yesterday"}, "Failed to parse created field"),
        ({"email": "a", "phone": "b"}, "oneof"),
    ],
)
def test_values_that_do_not_fit_say_why(value: Any, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        parse(USER).codec().encode(value)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "ends inside its message-index list"),
        (b"\x02", "ends inside its message-index list"),
        (b"\x02\x10", "names message \\[8\\]"),
        (b"\x04\x00\x40", "names message \\[0, 32\\]"),
        (b"\x00\x0a\xff", "is not a demo.User message"),
    ],
)
def test_payloads_that_do_not_decode_say_why(payload: bytes, message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        parse(USER).codec().decode(payload)


def test_an_any_of_a_type_the_schema_does_not_know_is_a_conversion_error() -> None:
    codec = parse(
        proto3('import "google/protobuf/any.proto";\nmessage M { google.protobuf.Any a = 1; }')
    ).codec()
    with pytest.raises(ConversionError, match="Can not find message descriptor"):
        codec.encode({"a": {"@type": "type.googleapis.com/other.X", "x": 1}})
    message = codec.message_class()()
    message.a.type_url = "type.googleapis.com/other.X"
    with pytest.raises(ConversionError, match="has no JSON form"):
        codec.decode(b"\x00" + message.SerializeToString())
    known = {"a": {"@type": "type.googleapis.com/demo.M", "a": {"@type": "type.googleapis.com/demo.M"}}}
    assert codec.decode(codec.encode(known)) == known


def test_a_file_without_messages_parses_but_encodes_nothing() -> None:
    parsed = parse(proto3("enum E { Z = 0; }"))
    with pytest.raises(ConversionError, match="defines no message type"):
        parsed.codec().encode({})
