"""The wire format: magic byte, big-endian schema id, payload; anything else is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.core.schemas.model import ConversionError
from service.core.schemas.wire import frame, unframe


def test_frame_is_magic_byte_then_big_endian_id() -> None:
    assert frame(1, b"payload") == b"\x00\x00\x00\x00\x01payload"
    assert frame(0x01020304, b"") == b"\x00\x01\x02\x03\x04"


@given(st.integers(0, 2**31 - 1), st.binary(max_size=64))
def test_unframe_reverses_frame(schema_id: int, payload: bytes) -> None:
    assert unframe(frame(schema_id, payload)) == (schema_id, payload)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00\x01"])
def test_unframe_refuses_data_shorter_than_the_header(data: bytes) -> None:
    with pytest.raises(ConversionError, match="shorter than the 5-byte header"):
        unframe(data)


@pytest.mark.parametrize("data", [b"\x01\x00\x00\x00\x01x", b'{"a": 1}', b"\xff\x00\x00\x00\x01"])
def test_unframe_refuses_another_magic_byte(data: bytes) -> None:
    with pytest.raises(ConversionError, match="magic byte"):
        unframe(data)


def test_unframe_refuses_a_negative_id() -> None:
    with pytest.raises(ConversionError, match="negative"):
        unframe(b"\x00\xff\xff\xff\xffx")


@pytest.mark.parametrize("schema_id", [-1, 2**31])
def test_frame_refuses_ids_a_registry_cannot_give(schema_id: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        frame(schema_id, b"")
