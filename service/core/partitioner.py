"""Where a produced record goes: Kafka's default partitioning, without I/O.

A keyed record must land on the partition a native Kafka client (Java,
aiokafka, librdkafka in ``murmur2_random`` mode) would pick, so producers
through the gateway and native producers agree on where a key lives. That is
``murmur2(key) & 0x7fffffff`` modulo the partition count, with Kafka's exact
murmur2 variant (seed ``0x9747b28c``, little-endian 4-byte words, Java's
signed 32-bit result).

Keyless records are spread record by record (round-robin per topic from a
random start), as the Kafka model this project follows describes: two keyless
records on two partitions land one on each.

``ProduceService`` (``service.core.producer``) owns one ``Partitioner`` and
calls it once per record, so ``murmur2`` is written for speed: words are
unpacked by one precompiled ``struct`` call and every step is masked once.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterable

__all__ = ["Partitioner", "murmur2", "partition_for_key"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF

# Precompiled little-endian word unpackers for keys up to 252 bytes: struct's
# own format cache is a dict lookup plus parsing on a miss, this is one index.
_MAX_CACHED_WORDS = 64
_UNPACKERS: list[Callable[[bytes], tuple[int, ...]]] = [
    struct.Struct(f"<{n}I").unpack_from for n in range(_MAX_CACHED_WORDS)
]


def _murmur2_u32(data: bytes) -> int:
    """Kafka's murmur2 as an unsigned 32-bit value (the bits Java's ``int`` holds)."""
    # Constants are bound as locals: global lookups are a measurable share of
    # the per-key cost at this size.
    m = _M
    mask = _MASK32
    length = len(data)
    h = _SEED ^ length
    words = length >> 2
    if words:
        unpack = _UNPACKERS[words] if words < _MAX_CACHED_WORDS else struct.Struct(f"<{words}I").unpack_from
        for k in unpack(data):
            k = (k * m) & mask
            # (a & mask) ^ (b & mask) == (a ^ b) & mask, so the two products
            # of one round share a single mask.
            h = ((h * m) ^ ((k ^ (k >> 24)) * m)) & mask
    tail = length & 3
    if tail:
        i = length - tail
        if tail == 3:
            h ^= data[i + 2] << 16
        if tail >= 2:
            h ^= data[i + 1] << 8
        h = ((h ^ data[i]) * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    return h ^ (h >> 15)


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the same value the Java client computes, as a signed 32-bit int."""
    h = _murmur2_u32(data)
    return h - 0x100000000 if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's default partition for ``key`` (``toPositive(murmur2(key)) % num_partitions``)."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    # The unsigned and the signed value share their low 31 bits.
    return (_murmur2_u32(key) & 0x7FFFFFFF) % num_partitions


class Partitioner:
    """Picks the partition of each produced record.

    An explicit partition wins; a keyed record goes where Kafka's default
    partitioner puts it; keyless records take the next partition of a
    per-topic round-robin that starts at a random offset (so many gateway
    replicas or restarts do not all pile onto partition 0). Range checks of an
    explicit partition are the caller's (``ProduceService`` reports the record
    index in its error).

    Not thread-safe; the gateway uses it from the event loop only.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._next: dict[str, int] = {}

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, explicit: int | None = None
    ) -> int:
        """The partition for one record of ``topic``, which has ``num_partitions`` partitions."""
        if explicit is not None:
            return explicit
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        if key is not None:
            return (_murmur2_u32(key) & 0x7FFFFFFF) % num_partitions
        counter = self._next.get(topic)
        if counter is None:
            counter = self._rng.randrange(1 << 31)
        self._next[topic] = counter + 1
        return counter % num_partitions

    def partitions(self, topic: str, keys: Iterable[bytes | None], num_partitions: int) -> list[int]:
        """``partition`` for a batch of records, in order (one call instead of one per record)."""
        if num_partitions <= 0:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        counter = self._next.get(topic)
        if counter is None:
            counter = self._rng.randrange(1 << 31)
        out: list[int] = []
        append = out.append
        hash32 = _murmur2_u32
        for key in keys:
            if key is None:
                append(counter % num_partitions)
                counter += 1
            else:
                append((hash32(key) & 0x7FFFFFFF) % num_partitions)
        self._next[topic] = counter
        return out

    def forget(self, topic: str) -> None:
        """Drop ``topic``'s round-robin counter (e.g. when the topic is deleted)."""
        self._next.pop(topic, None)
