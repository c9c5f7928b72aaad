"""What ``service.adapters.kafka.errors`` decides besides ``translate``: the questions other modules
ask about aiokafka's errors, and how a failed start is worded. Translation itself is in
``test_pure_logic.py``."""

from __future__ import annotations

from aiokafka import errors as ke

from service.adapters.kafka.errors import (
    corrupt_records,
    is_connection_failure,
    is_unknown_topic,
    no_broker_answered,
    not_ready,
    start_failure,
    translate,
)
from service.errors import BackendError, BackendUnavailable

SERVERS = "127.0.0.1:9092"


def failure(exc: Exception, *, idempotence: bool = False) -> str:
    error = start_failure(exc, SERVERS, idempotence=idempotence, timeout_ms=500)
    assert SERVERS in error.message and "\n" not in error.message
    return error.message


def test_topic_level_codes() -> None:
    assert is_unknown_topic(ke.UnknownTopicOrPartitionError.errno)
    assert not is_unknown_topic(0)
    assert not_ready(ke.LeaderNotAvailableError.errno) == "LeaderNotAvailableError"
    assert not_ready(0) is None
    assert not_ready(ke.UnknownTopicOrPartitionError.errno) is None


def test_connection_failures_are_worth_another_broker() -> None:
    assert is_connection_failure(ke.KafkaConnectionError())
    assert is_connection_failure(ke.NodeNotReadyError())
    assert not is_connection_failure(ke.UnknownTopicOrPartitionError())
    assert not is_connection_failure(OSError())


def test_a_failed_start_names_the_servers_and_why_in_one_line() -> None:
    assert "no answer within 500 ms" in failure(TimeoutError())
    assert "no bootstrap server accepted" in failure(ke.KafkaConnectionError("refused\nat once"))
    assert "refused\nat once" not in failure(RuntimeError("refused\nat once"))
    refused = start_failure(ke.UnsupportedVersionError(), SERVERS, idempotence=True, timeout_ms=500)
    assert isinstance(refused, BackendError) and "BROKERGATE_KAFKA_IDEMPOTENCE=false" in refused.message
    plain = start_failure(ke.UnsupportedVersionError(), SERVERS, idempotence=False, timeout_ms=500)
    assert isinstance(plain, BackendUnavailable)


def test_the_exceptions_made_here_translate_as_their_kind() -> None:
    corrupt = translate(corrupt_records("batch at offset 3 fails its CRC check"), "fetching t-0")
    assert isinstance(corrupt, BackendError) and "corrupt" in corrupt.message
    unreachable = translate(no_broker_answered(SERVERS), "listing topics")
    assert isinstance(unreachable, BackendUnavailable) and SERVERS in unreachable.message
