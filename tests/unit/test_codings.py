"""Content codings of bodies: gzip and zstd decoded under a bound whatever the bytes claim, and
answers encoded chunk by chunk so a streamed one can be read as it comes."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Callable

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from service.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from service.wire.codings import Coding, Decoder, Encoder, encode, negotiate, request_coding

COMPRESS: dict[Coding, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "zstd": lambda data: zstandard.ZstdCompressor().compress(data),
}
CODINGS: list[Coding] = ["gzip", "zstd"]


def decode(coding: Coding, data: bytes, limit: int = 1 << 20, chunk: int = 1000) -> bytes:
    d = Decoder(coding, limit)
    out = b"".join(d.feed(data[i : i + chunk]) for i in range(0, len(data), chunk))
    d.end()
    return out


@settings(max_examples=50, deadline=None)
@given(data=st.binary(max_size=20_000), chunk=st.integers(1, 5000), coding=st.sampled_from(CODINGS))
def test_what_is_encoded_decodes_to_itself_in_chunks_of_any_size(
    data: bytes, chunk: int, coding: Coding
) -> None:
    assert decode(coding, COMPRESS[coding](data), chunk=chunk) == data
    assert decode(coding, encode(coding, data), chunk=chunk) == data


@pytest.mark.parametrize("coding", CODINGS)
def test_members_one_after_the_other_are_one_body(coding: Coding) -> None:
    assert (
        decode(coding, COMPRESS[coding](b"abc") + COMPRESS[coding](b"") + COMPRESS[coding](b"def"))
        == b"abcdef"
    )


@pytest.mark.parametrize("coding", CODINGS)
def test_a_body_cut_short_or_not_coded_is_a_400(coding: Coding) -> None:
    whole = COMPRESS[coding](b"hello " * 10_000)
    with pytest.raises(BadRequest, match="ends before"):
        decode(coding, whole[:-7])
    with pytest.raises(BadRequest, match=f"not valid {coding}"):
        decode(coding, b'{"records": [{"value": 1}]}')
    assert decode(coding, b"") == b""  # no body at all: an empty one


def test_gzip_with_bytes_after_its_end_is_a_400() -> None:
    with pytest.raises(BadRequest, match="not valid gzip"):
        decode("gzip", gzip.compress(b"abc") + b"trailing")


@pytest.mark.parametrize("coding", CODINGS)
def test_a_bomb_is_refused_once_past_the_limit_and_costs_no_more_than_it(coding: Coding) -> None:
    bomb = COMPRESS[coding](b"\0" * (256 << 20))  # 256 MiB of zeros in a few hundred KiB at most
    limit = 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(PayloadTooLarge, match="more than the limit of 1048576 bytes"):
            decode(coding, bomb, limit=limit, chunk=64 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * limit, peak  # the limit, a chunk of output and the decoder's own state


def test_a_zstd_frame_asking_for_a_window_past_8_mib_is_refused() -> None:
    params = zstandard.ZstdCompressionParameters.from_level(19, window_log=26)  # 64 MiB
    frame = zstandard.ZstdCompressor(compression_params=params).compress(bytes(range(256)) * 300_000)
    with pytest.raises(BadRequest, match="not valid zstd"):
        decode("zstd", frame, limit=1 << 30)


@pytest.mark.parametrize("coding", CODINGS)
def test_each_flushed_chunk_decodes_as_soon_as_it_comes(coding: Coding) -> None:
    encoder = Encoder(coding)
    events = [b"event: records\ndata: [1]\n\n", b": keep-alive\n\n", b"event: records\ndata: [2]\n\n"]
    reader = (
        zlib.decompressobj(16 + zlib.MAX_WBITS)
        if coding == "gzip"
        else zstandard.ZstdDecompressor().decompressobj()
    )
    for event in events:
        assert reader.decompress(encoder.chunk(event, flush=True)) == event
    assert reader.decompress(encoder.finish()) == b""


@pytest.mark.parametrize(
    ("header", "chosen"),
    [
        ("gzip, deflate, br, zstd", "zstd"),  # both as much: zstd
        ("gzip", "gzip"),
        ("gzip;q=1.0, zstd;q=0.5", "gzip"),
        ("zstd;q=0, gzip;q=0.1", "gzip"),
        ("*", "zstd"),
        ("*;q=0.5, gzip;q=0.9", "gzip"),
        ("identity", None),
        ("br, deflate", None),
        ("gzip;q=0, zstd;q=0", None),
        ("gzip;q=oops", None),  # a weight that is no number counts as 0
        ("GZIP", "gzip"),
        ("", None),
        (None, None),
    ],
)
def test_an_answer_is_coded_as_the_client_weighs_it(header: str | None, chosen: str | None) -> None:
    assert negotiate(header) == chosen


@pytest.mark.parametrize(
    ("header", "coding"),
    [
        ("gzip", "gzip"),
        ("x-gzip", "gzip"),
        ("ZSTD", "zstd"),
        ("identity", None),
        (" gzip ", "gzip"),
        ("", None),
    ],
)
def test_a_request_says_its_coding(header: str, coding: str | None) -> None:
    assert request_coding(header) == coding


@pytest.mark.parametrize("header", ["br", "deflate", "gzip, zstd", "compress", "gzip, gzip"])
def test_a_coding_not_decoded_here_is_a_415_naming_those_that_are(header: str) -> None:
    with pytest.raises(UnsupportedMediaType, match="gzip or zstd"):
        request_coding(header)
