"""The rule of offsets carried into Kafka from the coordinator's own store, that the gateway and
the Spark jobs both read by."""

from __future__ import annotations

from service.core.carried_offsets import CARRIED, as_read, is_carried, to_carry
from service.core.models import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_kafkas_offsets_win_and_the_older_store_fills_in_until_the_group_was_carried() -> None:
    kafka, older = {A0: 7}, {A0: 3, A1: 4, B0: 1}
    # not carried yet: what the gateway carries at its first read, and answers meanwhile
    assert as_read(kafka, older) == {A0: 7, A1: 4, B0: 1}
    assert as_read({}, older) == older
    # carried: Kafka's alone, an offset deleted there stays deleted, and the mark never shows
    carried = {**older, CARRIED: 1_700_000_000_000}
    assert as_read(kafka, carried) == {A0: 7}
    assert as_read({}, carried) == {}
    assert as_read(kafka, {}) == kafka


def test_carrying_takes_what_kafka_lacks_once_and_never_the_mark() -> None:
    older = {A0: 3, A1: 4}
    assert not is_carried(older)
    assert to_carry(older, {A0: 7}) == {A1: 4}
    assert to_carry(older, {}) == older
    assert to_carry({**older, CARRIED: 1}, {}) == {}
    assert is_carried({CARRIED: 1})
