"""Whatever a client sends or a topic holds, a codec answers with a value or a ``ConversionError``:
never another exception (a 500), never a crash."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.core.schemas.model import Codec, ConversionError
from tests.unit.schemas import test_avro, test_json_schema, test_protobuf

CODECS: dict[str, Codec] = {
    "avro": test_avro.parse(test_avro.RICH).codec(),
    "json": test_json_schema.parse(test_json_schema.PERSON).codec(),
    "protobuf": test_protobuf.parse(test_protobuf.USER).codec(),
}
# Field names of the schemas above, so that values often get past the first level.
_NAMES = [
    "i",
    "l",
    "f",
    "s",
    "b",
    "e",
    "a",
    "m",
    "u",
    "ts",
    "userName",
    "id",
    "tags",
    "scores",
    "created",
    "kind",
    "address",
    "phone",
    "name",
    "age",
    "extra",
    "com.acme.Point",
    "string",
    "int",
    "x-a",
]
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(_NAMES) | st.text(max_size=3), inner, max_size=5)
    ),
    max_leaves=20,
)


@pytest.mark.parametrize("name", CODECS)
@settings(max_examples=150)
@given(value=_json_values)
def test_any_json_encodes_or_is_a_conversion_error(name: str, value: Any) -> None:
    try:
        CODECS[name].encode(value)
    except ConversionError:
        pass


@pytest.mark.parametrize("name", CODECS)
@settings(max_examples=150)
@given(payload=st.binary(max_size=64))
def test_any_bytes_decode_or_are_a_conversion_error(name: str, payload: bytes) -> None:
    try:
        CODECS[name].decode(payload)
    except ConversionError:
        pass
