"""Protobuf's normalized print (``?normalize=true``) without a server, one test a rule of
Confluent's ``toNormalizedString`` (``text``'s docstring lists them), and what holds of the
print as a whole: protoc compiles it, it is its own normalized print, and two spellings of one
schema (options, fields, imports in other orders) print alike."""

from __future__ import annotations

import pytest

from service.core.schemas.model import SchemaType
from service.core.schemas.protobuf import ProtobufFormat, ProtobufSchema
from service.core.schemas.protobuf.text import render
from tests.unit.schemas.helpers import Parser

parse = Parser(ProtobufFormat(), SchemaType.PROTOBUF)


def normalized(text: str) -> str:
    parsed = parse(text)
    assert isinstance(parsed, ProtobufSchema)
    return parsed.normalized()


def body(text: str) -> str:
    """The normalized print of a proto3 message ``M`` holding ``text``, without its head."""
    written = normalized(f'syntax = "proto3";\npackage p;\nmessage M {{\n{text}\n}}\n')
    head = 'syntax = "proto3";\npackage p;\n\nmessage M {\n'
    assert written.startswith(head), written
    return written[len(head) :]


def test_proto2_has_no_syntax_statement_proto3_has_it() -> None:
    assert normalized('syntax = "proto2";\npackage p;\nmessage A { optional int32 a = 1; }\n') == (
        "package p;\n\nmessage A {\n  optional int32 a = 1;\n}\n"
    )
    assert normalized('syntax = "proto3";\nmessage A { int32 a = 1; }\n').startswith('syntax = "proto3";\n')


def test_imports_are_sorted_the_public_ones_after_the_others() -> None:
    text = (
        'syntax = "proto3";\nimport public "google/protobuf/empty.proto";\n'
        'import "google/protobuf/timestamp.proto";\nimport public "google/protobuf/any.proto";\n'
        'import "google/protobuf/duration.proto";\n'
        "message A { google.protobuf.Timestamp t = 1; google.protobuf.Duration d = 2; }\n"
    )
    assert normalized(text).split("\n\n")[1] == (
        'import "google/protobuf/duration.proto";\nimport "google/protobuf/timestamp.proto";\n'
        'import public "google/protobuf/any.proto";\nimport public "google/protobuf/empty.proto";'
    )


def test_file_options_are_sorted_by_name() -> None:
    text = (
        'syntax = "proto3";\noption java_package = "a.b";\noption deprecated = true;\n'
        "option java_multiple_files = true;\noption cc_enable_arenas = true;\n"
        "message A { int32 a = 1; }\n"
    )
    assert normalized(text).split("\n\n")[1] == (
        "option cc_enable_arenas = true;\noption deprecated = true;\n"
        'option java_multiple_files = true;\noption java_package = "a.b";'
    )


def test_message_options_are_sorted_by_name() -> None:
    assert body(
        "option no_standard_descriptor_accessor = true;\noption deprecated = true;\nint32 a = 1;"
    ) == (
        "  option deprecated = true;\n  option no_standard_descriptor_accessor = true;\n\n  int32 a = 1;\n}\n"
    )


def test_field_options_are_sorted_by_name_json_name_among_them() -> None:
    assert body('repeated int32 a = 1 [packed = false, json_name = "x", deprecated = true];') == (
        '  repeated int32 a = 1 [\n    deprecated = true,\n    json_name = "x",\n'
        "    packed = false\n  ];\n}\n"
    )


def test_a_default_is_sorted_among_a_fields_options() -> None:
    text = 'syntax = "proto2";\nmessage A {\n  optional int32 a = 1 [deprecated = true, default = 4];\n}\n'
    assert "optional int32 a = 1 [\n    default = 4,\n    deprecated = true\n  ];" in normalized(text)


@pytest.mark.parametrize(
    ("written", "printed"),
    [
        ("0x10", "16"),  # protoc's decimal
        ("1.50", "1.5"),
        ("1e3", "1000"),
        ("-2.5e-1", "-0.25"),
        ("0.0001", "0.0001"),  # three decimals would make it 0: the digits are kept
        ("inf", "inf"),
        ("nan", "nan"),
    ],
)
def test_a_numeric_default_is_plain_decimal(written: str, printed: str) -> None:
    kind = "int32" if written.startswith("0x") else "double"
    text = f'syntax = "proto2";\nmessage A {{\n  optional {kind} a = 1 [default = {written}];\n}}\n'
    assert f"optional {kind} a = 1 [default = {printed}];" in normalized(text)


def test_fields_are_sorted_by_tag() -> None:
    assert body("string c = 3;\nint32 a = 1;\nbool b = 2;") == (
        "  int32 a = 1;\n  bool b = 2;\n  string c = 3;\n}\n"
    )


def test_oneofs_are_sorted_by_first_tag_their_fields_by_tag() -> None:
    text = "int32 a = 1;\noneof late { string z = 9; string y = 8; }\noneof early { string w = 5; }"
    assert body(text) == (
        "  int32 a = 1;\n\n  oneof early {\n    string w = 5;\n  }\n"
        "  oneof late {\n    string y = 8;\n    string z = 9;\n  }\n}\n"
    )


def test_reserved_are_one_a_statement_sorted_names_last() -> None:
    assert body('reserved "b", "a";\nreserved 20 to 22, 7, 3 to 3;\nint32 x = 1;') == (
        '  reserved 3;\n  reserved 7;\n  reserved 20 to 22;\n  reserved "a";\n  reserved "b";\n\n'
        "  int32 x = 1;\n}\n"
    )


def test_extension_ranges_and_extend_fields_are_sorted() -> None:
    text = (
        'syntax = "proto2";\npackage p;\nmessage A {\n  extensions 200 to 300;\n  extensions 100 to 150;\n}\n'
        "extend A { optional int32 late = 201; optional int32 early = 101; }\n"
    )
    assert normalized(text) == (
        "package p;\n\nmessage A {\n  extensions 100 to 150;\n  extensions 200 to 300;\n}\n\n"
        "extend .p.A {\n  optional int32 early = 101;\n  optional int32 late = 201;\n}\n"
    )


def test_enum_values_are_sorted_by_number_then_name_its_options_by_name() -> None:
    text = (
        'syntax = "proto2";\nenum E {\n  option deprecated = true;\n  option allow_alias = true;\n'
        "  reserved 9, 5;\n  B = 1;\n  Z = 0;\n  A = 1 [deprecated = true];\n"
        "  C = 2 [debug_redact = true, deprecated = true];\n}\n"
    )
    assert normalized(text) == (
        "\nenum E {\n  reserved 5;\n  reserved 9;\n  option allow_alias = true;\n"
        "  option deprecated = true;\n  Z = 0;\n  A = 1 [deprecated = true];\n  B = 1;\n"
        "  C = 2 [\n    debug_redact = true,\n    deprecated = true\n  ];\n}\n"
    )


def test_service_and_method_options_are_sorted_methods_stay_in_order() -> None:
    text = (
        'syntax = "proto3";\npackage p;\nmessage M { int32 a = 1; }\nservice S {\n'
        "  option deprecated = true;\n  rpc Z (M) returns (M) {\n"
        "    option idempotency_level = NO_SIDE_EFFECTS;\n    option deprecated = true;\n  }\n"
        "  rpc A (M) returns (stream M);\n}\n"
    )
    written = normalized(text)
    assert written[written.index("service S") :] == (
        "service S {\n  option deprecated = true;\n\n"
        "  rpc Z (.p.M) returns (.p.M) {\n    option deprecated = true;\n"
        "    option idempotency_level = NO_SIDE_EFFECTS;\n  };\n"
        "  rpc A (.p.M) returns (stream .p.M);\n}\n"
    )


def test_types_stay_in_order_names_are_fully_qualified() -> None:
    text = (
        'syntax = "proto3";\npackage p;\nmessage Z { Y.In i = 1; map<string, Y> m = 2; }\n'
        "message Y { message In { int32 a = 1; } }\n"
    )
    assert normalized(text) == (
        'syntax = "proto3";\npackage p;\n\nmessage Z {\n  .p.Y.In i = 1;\n  map<string, .p.Y> m = 2;\n}\n'
        "message Y {\n  message In {\n    int32 a = 1;\n  }\n}\n"
    )


def test_a_print_protoc_would_refuse_is_not_stored() -> None:
    """Sorting a proto3 enum's values puts a negative one before its zero, which protoc refuses:
    the text is then the schema's other print."""
    parsed = parse('syntax = "proto3";\nenum E {\n  Z = 0;\n  N = -1;\n}\n')
    assert isinstance(parsed, ProtobufSchema)
    assert render(parsed.file, normalized=True) == 'syntax = "proto3";\n\nenum E {\n  N = -1;\n  Z = 0;\n}\n'
    assert parsed.normalized() == parsed.formatted()


SPELLED_ONE_WAY = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
option java_package = "com.shop";
option java_multiple_files = true;
message Order {
  option deprecated = true;
  string id = 1 [json_name = "ident", deprecated = true];
  google.protobuf.Timestamp at = 3;
  google.protobuf.Duration wait = 2;
}
"""

SPELLED_ANOTHER_WAY = """syntax = "proto3";
package shop;
import "google/protobuf/duration.proto";
import "google/protobuf/timestamp.proto";
option java_multiple_files = true;
option java_package = "com.shop";
message Order {
  option deprecated = true;
  google.protobuf.Duration wait = 2;
  string id = 1 [deprecated = true, json_name = "ident"];
  .google.protobuf.Timestamp at = 3;
}
"""


def test_two_spellings_of_a_schema_print_alike_and_the_print_is_its_own() -> None:
    one, other = normalized(SPELLED_ONE_WAY), normalized(SPELLED_ANOTHER_WAY)
    assert one == other
    assert normalized(one) == one


def test_the_other_print_keeps_the_order_given() -> None:
    parsed = parse(SPELLED_ONE_WAY)
    assert isinstance(parsed, ProtobufSchema)
    assert 'option java_package = "com.shop";\noption java_multiple_files = true;' in parsed.formatted()
    assert parsed.formatted().index("at = 3") < parsed.formatted().index("wait = 2")
