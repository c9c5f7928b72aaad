"""HTTP content codings: request bodies decoded under a bound, answers encoded as they stream.

Two codings besides ``identity``: ``gzip`` (the standard library's zlib) and ``zstd``
(``zstandard``). A ``Decoder`` turns one body's chunks into its decoded bytes as they arrive,
never holding more than the bound: a body whose decoded size passes it is refused
(``PayloadTooLarge``) as soon as it does, whatever its header or its compressed size claim, so a
decompression bomb costs the bound and no more; a zstd frame asking for a window larger than
``MAX_WINDOW_BYTES`` is refused too (its window would be memory of its own). Bytes that are not
the coding, or that end before it does, are a ``BadRequest``.

An ``Encoder`` compresses one answer: each chunk flushed as it goes (``flush``), so an event of a
stream reaches its reader at once, and ``finish`` at the end. ``negotiate`` picks the coding of
an answer from ``Accept-Encoding`` (RFC 9110 12.5.3).
"""

from __future__ import annotations

import zlib
from typing import Any, Final, Literal

import zstandard

from service.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType

Coding = Literal["gzip", "zstd"]
CODINGS: Final[tuple[Coding, ...]] = ("zstd", "gzip")  # preferred first, when a client likes both as much
MAX_WINDOW_BYTES: Final = 8 * 1024 * 1024  # what zstd's levels 1-19 use at most; decoders must support it
GZIP_LEVEL: Final = 6  # zlib's default
ZSTD_LEVEL: Final = 3  # zstd's default
_OUT_CHUNK: Final = 64 * 1024  # decoded bytes produced at a time


def request_coding(header: str | None) -> Coding | None:
    """The coding of a request body from its ``Content-Encoding`` (None: none, or ``identity``);
    a coding this gateway does not decode, or more than one, is a 415 saying which it does."""
    if header is None:
        return None
    names = [n.strip().lower() for n in header.split(",") if n.strip()]
    names = ["gzip" if n == "x-gzip" else n for n in names if n != "identity"]  # (RFC 9110 8.4.1.3)
    if not names:
        return None
    if len(names) == 1 and names[0] in CODINGS:
        return names[0]  # (one of CODINGS)
    raise UnsupportedMediaType(
        f"HTTP 415 Unsupported Media Type: a request body may be coded gzip or zstd (one of them), "
        f"not {header[:100]!r}."
    )


_ZSTD_MAX_RATIO: Final = 32_768  # the most a zstd byte decodes to: an RLE block, 4 bytes for 128 KiB


class Decoder:
    """One request body's decoding (see the module docstring): ``feed`` each chunk as it comes,
    then ``end``. ``limit``: the most decoded bytes the body may have.

    A body may hold several gzip members or zstd frames one after the other (both formats say
    so): each is decoded in turn. zlib bounds each call's output itself; zstandard's does not,
    so zstd input goes in pieces small enough that even the most a piece can decode to stays
    within what the limit leaves (``_ZSTD_MAX_RATIO``)."""

    def __init__(self, coding: Coding, limit: int) -> None:
        self.coding = coding
        self.limit = limit
        self.size = 0
        self._member: Any = None  # the member or frame being decoded; None between them

    def feed(self, data: bytes) -> bytes:
        """The bytes ``data`` decodes to (maybe none yet)."""
        out: list[bytes] = []
        try:
            while data:
                if self._member is None:
                    self._member = self._new()
                data = self._decode(data, out)  # the rest, if any, is the next member's
                if self._member.eof:
                    self._member = None
        except (zlib.error, zstandard.ZstdError) as exc:
            raise BadRequest(f"The request body is not valid {self.coding}: {exc}.") from None
        return b"".join(out)

    def end(self) -> None:
        """Once the last chunk came: a body that stopped short of its end is a 400 (an empty one
        is an empty body: a client may name a coding for a request it sends none with)."""
        if self._member is not None:
            raise BadRequest(f"The request body ends before its {self.coding} stream does.")

    def _new(self) -> Any:
        if self.coding == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        return zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW_BYTES).decompressobj()

    def _decode(self, data: bytes, out: list[bytes]) -> bytes:
        """Decode from ``data`` into ``out`` until it is used up or the member ends; what of
        ``data`` is after the member's end."""
        member = self._member
        if self.coding == "gzip":
            pending = data
            while pending and not member.eof:
                self._count(out, member.decompress(pending, _OUT_CHUNK))
                pending = member.unconsumed_tail
            return bytes(member.unused_data) if member.eof else b""
        at = 0
        while at < len(data) and not member.eof:
            piece = max(64, (self.limit - self.size) // _ZSTD_MAX_RATIO)
            self._count(out, member.decompress(data[at : at + piece]))
            at += piece
        return bytes(member.unused_data) + data[at:] if member.eof else b""

    def _count(self, out: list[bytes], chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            raise PayloadTooLarge(
                f"Request body decodes ({self.coding}) to more than the limit of {self.limit} bytes."
            )
        if chunk:
            out.append(chunk)


class Encoder:
    """One answer's encoding (see the module docstring)."""

    def __init__(self, coding: Coding) -> None:
        self.coding = coding
        if coding == "gzip":
            self._gzip = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        else:
            self._zstd = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj()

    def chunk(self, data: bytes, *, flush: bool) -> bytes:
        """``data`` encoded; with ``flush``, all of it, so the reader can decode it now."""
        if self.coding == "gzip":
            out = self._gzip.compress(data)
            return out + self._gzip.flush(zlib.Z_SYNC_FLUSH) if flush else out
        out = self._zstd.compress(data)
        return out + self._zstd.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) if flush else out

    def finish(self, data: bytes = b"") -> bytes:
        """``data`` and the end of the coding: the last bytes of the answer."""
        if self.coding == "gzip":
            return self._gzip.compress(data) + self._gzip.flush(zlib.Z_FINISH)
        return self._zstd.compress(data) + self._zstd.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH)


def encode(coding: Coding, data: bytes) -> bytes:
    """``data`` whole, encoded."""
    return Encoder(coding).finish(data)


def negotiate(accept_encoding: str | None) -> Coding | None:
    """The coding to answer in by ``Accept-Encoding``: the one of ``CODINGS`` the client weighs
    most (``zstd`` if it likes both as much; ``*`` names any), None for none (identity)."""
    if not accept_encoding:
        return None
    weights: dict[str, float] = {}
    for item in accept_encoding.split(","):
        name, _, params = item.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if name.strip():
            weights[name.strip().lower()] = q if 0.0 <= q <= 1.0 else 0.0
    best: Coding | None = None
    best_q = 0.0
    for coding in CODINGS:
        q = weights.get(coding, weights.get("*", 0.0))
        if q > best_q:
            best, best_q = coding, q
    return best
