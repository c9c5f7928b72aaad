"""Protobuf's texts without a server: a descriptor written as ``.proto`` text in Confluent's layout
(``text``), custom options no file defines taken out for protoc (``options``), the serialized
form, and Confluent's built-in imports."""

from __future__ import annotations

import base64

import pytest

from service.core.schemas.model import InvalidSchema, SchemaReference, SchemaType
from service.core.schemas.protobuf import ProtobufFormat, ProtobufSchema
from service.core.schemas.protobuf import options as unknown_options
from service.core.schemas.protobuf.descriptors import FDP
from service.core.schemas.protobuf.text import render
from tests.unit.schemas.helpers import Parser

parse = Parser(ProtobufFormat(), SchemaType.PROTOBUF)

SHOP = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
option java_package = "com.shop";
// a comment Confluent's print leaves out
message Order {
  reserved 7, 9 to 11;
  reserved "old";
  string id = 1;
  int32 qty = 2 [deprecated = true, json_name = "quantity"];
  map<string, Item> items = 4;
  optional string note = 5;
  google.protobuf.Timestamp at = 6;
  oneof pay { string card = 12; int64 cash = 13; }
  message Item { string sku = 1; Kind kind = 2; }
  enum Kind { option allow_alias = true; K0 = 0; K1 = 1; K2 = 1; }
}
enum Top { T0 = 0; }
service Orders { rpc Get (Order) returns (stream Order); }
"""

SHOP_AS_CONFLUENT_WRITES_IT = """syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";

option java_package = "com.shop";

message Order {
  reserved 7;
  reserved 9 to 11;
  reserved "old";

  string id = 1;
  int32 qty = 2 [
    deprecated = true,
    json_name = "quantity"
  ];
  map<string, .shop.Order.Item> items = 4;
  optional string note = 5;
  .google.protobuf.Timestamp at = 6;

  oneof pay {
    string card = 12;
    int64 cash = 13;
  }

  message Item {
    string sku = 1;
    .shop.Order.Kind kind = 2;
  }
  enum Kind {
    option allow_alias = true;
    K0 = 0;
    K1 = 1;
    K2 = 1;
  }
}
enum Top {
  T0 = 0;
}

service Orders {
  rpc Get (.shop.Order) returns (stream .shop.Order);
}
"""

PROTO2 = """syntax = "proto2";
package x;
message M {
  optional string s = 1 [default = "a\\"b"];
  required int32 n = 2 [default = -3];
  optional bytes b = 3 [default = "\\001x"];
  optional double d = 4 [default = inf];
  optional E e = 5 [default = TWO];
  extensions 100 to max;
}
enum E { ONE = 1; TWO = 2; reserved 5 to 6; }
extend M { optional int32 ext = 100; }
"""


def schema(text: str) -> ProtobufSchema:
    parsed = parse(text)
    assert isinstance(parsed, ProtobufSchema)
    return parsed


def serialized(text: str) -> str:
    form = schema(text).in_format("serialized")
    assert form is not None
    return form


def test_a_descriptor_is_written_as_confluent_writes_it() -> None:
    registered = schema(serialized(SHOP))
    assert registered.formatted() == SHOP_AS_CONFLUENT_WRITES_IT
    assert registered.canonical() == schema(SHOP).canonical()


@pytest.mark.parametrize("text", [SHOP, PROTO2], ids=["proto3", "proto2"])
def test_the_text_written_compiles_to_the_same_schema(text: str) -> None:
    written = schema(serialized(text)).formatted()
    assert not written.startswith("Cg")  # text, not base64
    assert schema(written).canonical() == schema(text).canonical()


def test_what_the_text_cannot_say_keeps_the_descriptor() -> None:
    with_group = 'syntax = "proto2";\nmessage G { optional group In = 1 { optional int32 a = 2; } }\n'
    form = serialized(with_group)
    assert schema(form).formatted() == form
    file = FDP.FromString(base64.b64decode(serialized(SHOP)))
    file.options.MergeFromString(b"\xc0\x44\x01")  # an extension (1096) no file here defines
    assert render(file) is None


def test_a_proto_text_is_stored_as_confluent_prints_it() -> None:
    """Confluent stores its own print of a parsed .proto (comments left out); type names are
    written as their shortest name (Confluent keeps them as written)."""
    expected = (
        SHOP_AS_CONFLUENT_WRITES_IT.replace(".shop.Order.Item", "Item")
        .replace(".shop.Order.Kind", "Kind")
        .replace(".google.protobuf.Timestamp", "google.protobuf.Timestamp")
        .replace(".shop.Order", "Order")
    )
    parsed = schema(SHOP)
    assert parsed.formatted() == expected
    assert parsed.schema.text == SHOP  # what was sent is what was parsed
    assert schema(expected).formatted() == expected
    without_syntax = "package p;\nmessage A { optional int32 a = 1; }"
    assert schema(without_syntax).formatted() == "package p;\n\nmessage A {\n  optional int32 a = 1;\n}\n"


def test_type_names_stay_as_the_text_spells_them() -> None:
    money = schema('syntax = "proto3";\npackage shop;\nmessage Money { int64 cents = 1; }\n')
    price = (
        'syntax = "proto3";\npackage shop;\nimport "money.proto";\nmessage Price { shop.Money amount = 1; }\n'
    )
    refs = (SchemaReference("money.proto", "money", 1),)
    parsed = parse(price, references={"money.proto": money}, refs=refs)
    assert isinstance(parsed, ProtobufSchema)
    assert parsed.formatted() == (
        'syntax = "proto3";\npackage shop;\n\nimport "money.proto";\n\n'
        "message Price {\n  shop.Money amount = 1;\n}\n"
    )


def test_the_serialized_form_is_the_descriptor_confluent_names_default() -> None:
    file = FDP.FromString(base64.b64decode(serialized(SHOP), validate=True))
    assert file.name == "default" and file.package == "shop"
    assert [m.name for m in file.message_type] == ["Order"]
    assert schema(SHOP).in_format("resolved") is None  # not a Protobuf form: the text as stored


def test_ignore_extensions_leaves_out_extensions_and_custom_options() -> None:
    without = schema(PROTO2).in_format("ignore_extensions")
    assert without is not None and "extend" not in without and "extensions" not in without
    assert schema(without).canonical() != schema(PROTO2).canonical()
    assert 'optional string s = 1 [default = "a\\"b"];' in without
    custom = 'syntax = "proto3";\nmessage P {\n  string a = 1 [(my_option) = 2];\n}\n'
    assert (
        schema(custom).in_format("ignore_extensions")
        == 'syntax = "proto3";\n\nmessage P {\n  string a = 1;\n}\n'
    )


@pytest.mark.parametrize(
    ("text", "line", "column", "expected"),
    [
        ("oneof p { option (o) = true; string x = 1; }", 0, 17, "oneof p { " + " " * 19 + "string x = 1; }"),
        (
            "string x = 1 [(o) = 1, deprecated = true];",
            0,
            14,
            "string x = 1 [" + " " * 9 + "deprecated = true];",
        ),
        (
            "string x = 1 [deprecated = true, (o) = 1];",
            0,
            33,
            "string x = 1 [deprecated = true" + " " * 9 + "];",
        ),
        ("string x = 1 [(o) = 1];", 0, 14, "string x = 1 " + " " * 9 + ";"),
        ('string x = 1 [(o).a = { b: "];," }];', 0, 14, "string x = 1 " + " " * 22 + ";"),
        ("\toption (o) = 1;", 0, 15, "\t" + " " * 15),  # a tab is 8 columns to protoc
        ("\toption (o) = 1;", 0, 14, None),  # no option where protoc says
    ],
)
def test_an_option_protoc_calls_unknown_is_blanked_in_place(
    text: str, line: int, column: int, expected: str | None
) -> None:
    assert unknown_options.blank(text, line, column) == expected


def test_undefined_custom_options_are_accepted_other_errors_are_not() -> None:
    text = 'syntax = "proto3";\nmessage P {\n  oneof p {\n    option (my_option) = true;\n'
    text += "    string a = 1;\n  }\n}\n"
    assert schema(text).formatted() == text
    with pytest.raises(InvalidSchema, match=r"schema:5:\d+: .*strin"):
        parse(text.replace("string a", "strin a"))


@pytest.mark.parametrize(
    "path",
    [
        "google/type/postal_address.proto",
        "google/type/color.proto",
        "confluent/meta.proto",
        "confluent/type/decimal.proto",
    ],
)
def test_confluents_built_in_files_are_imported_without_references(path: str) -> None:
    parsed = schema(f'syntax = "proto3";\nimport "{path}";\nmessage A {{ string a = 1; }}\n')
    assert list(parsed.file.dependency) == [path]
    assert parsed.dependencies == {}  # like the well-known types: no reference needed
