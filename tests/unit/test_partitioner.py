"""The partitioner puts keys where native Kafka clients put them and spreads keyless records."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2

from service.core.partitioner import Partitioner, murmur2, partition_for_key

# Vectors from Kafka's own Java test suite (org.apache.kafka.common.utils.UtilsTest#testMurmur2):
# the signed ints the Java client computes.
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_murmur2_matches_java_client(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_murmur2_is_signed_32_bit() -> None:
    rng = random.Random(7)
    values = [murmur2(rng.randbytes(rng.randrange(0, 40))) for _ in range(2000)]
    assert all(-(2**31) <= v < 2**31 for v in values)
    assert any(v < 0 for v in values) and any(v > 0 for v in values)


def test_murmur2_matches_aiokafka_for_every_length_and_tail() -> None:
    rng = random.Random(1)
    # Every tail length (0..3) and keys longer than the precompiled unpackers.
    for length in [*range(0, 70), 251, 252, 253, 255, 256, 257, 1000, 4099]:
        for _ in range(5):
            key = rng.randbytes(length)
            assert murmur2(key) & 0xFFFFFFFF == aiokafka_murmur2(key), length


def test_partition_for_key_matches_aiokafka_default_partitioner() -> None:
    rng = random.Random(2)
    partitioner = DefaultPartitioner()
    for _ in range(5000):
        n = rng.choice([1, 2, 3, 5, 7, 8, 10, 12, 16, 31, 64, 100, 128, 1000, rng.randrange(1, 5000)])
        key = rng.randbytes(rng.randrange(0, 64))
        partitions = list(range(n))
        assert partition_for_key(key, n) == partitioner(key, partitions, partitions)


def test_partition_for_key_known_placements() -> None:
    # Computed from the Java vectors: toPositive(h) % n.
    assert partition_for_key(b"foobar", 10) == (-790332482 & 0x7FFFFFFF) % 10
    assert partition_for_key(b"21", 3) == (-973932308 & 0x7FFFFFFF) % 3
    assert partition_for_key(b"abc", 1) == 0


def test_partition_for_key_rejects_no_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


def test_explicit_partition_wins_over_key() -> None:
    p = Partitioner()
    assert p.partition("t", b"foobar", 10, explicit=9) == 9
    assert p.partition("t", None, 10, explicit=0) == 0


def test_keyed_record_goes_where_kafka_puts_it() -> None:
    p = Partitioner()
    for key in JAVA_VECTORS:
        for n in (1, 2, 6, 50):
            assert p.partition("t", key, n) == partition_for_key(key, n)
    # An empty key is a key (Java hashes it), not "keyless".
    assert all(p.partition("t", b"", 7) == partition_for_key(b"", 7) for _ in range(5))


def test_two_keyless_records_on_two_partitions_land_one_on_each() -> None:
    for seed in range(50):
        p = Partitioner(random.Random(seed))
        assert {p.partition("t", None, 2), p.partition("t", None, 2)} == {0, 1}


def test_keyless_records_spread_evenly() -> None:
    p = Partitioner(random.Random(3))
    counts = Counter(p.partition("t", None, 7) for _ in range(7 * 100 + 3))
    assert set(counts) == set(range(7))
    assert max(counts.values()) - min(counts.values()) <= 1


def test_keyless_spread_is_per_topic_and_ignores_keyed_records() -> None:
    p = Partitioner(random.Random(4))
    a = [p.partition("a", None, 3) for _ in range(3)]
    p.partition("b", None, 3)
    p.partition("a", b"some-key", 3)
    a += [p.partition("a", None, 3) for _ in range(3)]
    assert sorted(a[:3]) == [0, 1, 2]
    assert a[3:] == a[:3]  # the round-robin continued where it was


def test_keyless_start_is_random() -> None:
    starts = {Partitioner(random.Random(seed)).partition("t", None, 16) for seed in range(200)}
    assert len(starts) > 8


def test_batch_matches_per_record_calls() -> None:
    rng = random.Random(5)
    keys = [None if rng.random() < 0.5 else rng.randbytes(rng.randrange(0, 20)) for _ in range(1000)]
    one = Partitioner(random.Random(9))
    many = Partitioner(random.Random(9))
    expected = [one.partition("t", k, 6) for k in keys]
    assert many.partitions("t", keys, 6) == expected
    # Both continue the same round-robin afterwards.
    assert many.partition("t", None, 6) == one.partition("t", None, 6)


def test_forget_restarts_the_round_robin() -> None:
    p = Partitioner(random.Random(0))
    p.partition("t", None, 4)
    p.forget("t")
    p.forget("never-seen")
    assert p.partition("t", None, 4) in range(4)


def test_keyless_needs_partitions() -> None:
    with pytest.raises(ValueError):
        Partitioner().partition("t", None, 0)
    with pytest.raises(ValueError):
        Partitioner().partitions("t", [None], 0)
