"""Translation of aiokafka's exceptions and Kafka's wire error codes into ``service.errors``.

The one place that knows aiokafka's error classes. Every other module of the
Kafka log calls ``translate`` (an exception it caught), ``for_code`` (an
error code inside a response) or ``start_failure`` (a log that could not
start) and raises what they return, so no aiokafka exception ever reaches the
core. Where a module must decide before translating, it asks a question
here (``is_retriable``, ``is_broken_producer``, ``is_connection_failure``, ``is_metadata_error``,
``is_unknown_topic``, ``not_ready``); where it must hand aiokafka one of its
own exceptions, it gets it here (``corrupt_records``, ``no_broker_answered``).
The policy of ``translate``, in order:

* the topic or partition does not exist -> ``TopicNotFound`` / ``PartitionNotFound``
* the payload is too big for the broker -> ``PayloadTooLarge``
* a topic create/alter the broker refuses -> ``TopicExists``, ``InvalidTopic``, ``InvalidTopicConfig``
* anything a retry may fix (``retriable`` errors, timeouts, lost connections) -> ``BackendUnavailable``
  (503 with Retry-After)
* the rest -> ``BackendError`` naming the operation and Kafka's error

``start_failure`` also tells a cluster that refused the gateway's credentials or TLS
handshake from one that could not be reached.
"""

from __future__ import annotations

import ssl
from typing import Final

from aiokafka import errors as ke

from service.errors import (
    BackendError,
    BackendUnavailable,
    GatewayError,
    InvalidTopic,
    InvalidTopicConfig,
    PartitionNotFound,
    PayloadTooLarge,
    TopicExists,
    TopicNotFound,
)

from ..tls import failure_reason

RETRY_AFTER_S: Final = 1.0

_TOO_LARGE: Final = (ke.MessageSizeTooLargeError, ke.RecordListTooLargeError, ke.RecordTooLargeError)
_BAD_TOPIC_CONFIG: Final = (
    ke.InvalidPartitionsError,
    ke.InvalidReplicationFactorError,
    ke.InvalidReplicationAssignmentError,
    ke.InvalidConfigurationError,
    ke.PolicyViolationError,
    ke.InvalidRequestError,
)
# Connection-level failures after which another broker may still answer.
_TRY_NEXT: Final = (ke.NodeNotReadyError, ke.KafkaConnectionError, ke.StaleMetadata)
# Topic-level codes that mean "exists, but not ready yet" (just created, leader moving).
_NOT_READY: Final = (ke.LeaderNotAvailableError, ke.NotLeaderForPartitionError, ke.KafkaStorageError)
# What a cluster answers an idempotent producer's InitProducerId with when it cannot give one.
_NO_IDEMPOTENCE: Final = (ke.UnknownError, ke.UnsupportedVersionError, ke.ClusterAuthorizationFailedError)
# An idempotent producer whose sequence numbers or id the broker no longer accepts: the batch was
# refused, not written, and only a new producer (a new id) writes to the partition again.
_BROKEN_PRODUCER: Final = (
    ke.OutOfOrderSequenceNumber,
    ke.UnknownProducerId,
    ke.InvalidProducerEpoch,
    ke.ProducerFenced,
)
# A broker that would not accept the gateway's SASL credentials or mechanism.
_AUTH_REFUSED: Final = (
    ke.SaslAuthenticationFailed,
    ke.AuthenticationFailedError,
    ke.UnsupportedSaslMechanismError,
    ke.IllegalSaslStateError,
)
# Not flagged retriable by aiokafka, yet nothing but time (or a broker coming back) is missing.
_UNAVAILABLE: Final = (
    ke.KafkaTimeoutError,
    ke.RequestTimedOutError,
    ke.NodeNotReadyError,
    ke.KafkaConnectionError,
    ke.NoBrokersAvailable,
    ke.ProducerClosed,
    ke.BrokerNotAvailableError,
)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    name = type(exc).__name__
    if not text or text == name:
        return name
    return text if text.startswith(name) else f"{name}: {text}"


def translate(
    exc: BaseException,
    what: str,
    *,
    topic: str | None = None,
    partition: int | None = None,
) -> GatewayError:
    """The ``GatewayError`` to raise for ``exc``, caught while doing ``what`` (e.g. "appending to t-0").

    ``topic``/``partition`` pick between ``TopicNotFound`` and ``PartitionNotFound``
    when Kafka answers "unknown topic or partition": with a partition the caller
    has already checked the topic, so the partition is what is missing.
    """
    if isinstance(exc, GatewayError):
        return exc
    detail = _describe(exc)
    if isinstance(exc, ke.UnknownTopicOrPartitionError):
        if partition is not None and topic is not None:
            return PartitionNotFound(f"Partition {partition} of topic {topic!r} not found.")
        return TopicNotFound(f"Topic {topic!r} not found." if topic else "Topic not found.")
    if isinstance(exc, _TOO_LARGE):
        return PayloadTooLarge(f"Kafka refused the records as too large while {what}: {detail}")
    if isinstance(exc, ke.TopicAlreadyExistsError):
        return TopicExists(f"Topic {topic!r} already exists." if topic else None)
    if isinstance(exc, ke.InvalidTopicError):
        return InvalidTopic(f"Kafka refused the topic name {topic!r}: {detail}")
    if isinstance(exc, _BAD_TOPIC_CONFIG):
        return InvalidTopicConfig(f"Kafka refused the topic settings while {what}: {detail}")
    if isinstance(exc, (ke.IncompatibleBrokerVersion, ke.UnsupportedVersionError)):
        return BackendError(f"The Kafka cluster does not support what {what} needs: {detail}")
    if isinstance(exc, ke.UnsupportedCodecError):
        return BackendError(
            f"Cannot decode records while {what}: {detail} (install the codec's Python package)"
        )
    if isinstance(exc, ke.CorruptRecordException):
        return BackendError(f"Kafka returned corrupt records while {what}: {detail}")
    if isinstance(exc, (*_UNAVAILABLE, TimeoutError, OSError)) or getattr(exc, "retriable", False) is True:
        return BackendUnavailable(f"Kafka is unavailable while {what}: {detail}", retry_after=RETRY_AFTER_S)
    if isinstance(exc, ke.KafkaError):
        return BackendError(f"Kafka error while {what}: {detail}")
    return BackendError(f"Unexpected error while {what}: {detail}")


def for_code(
    code: int,
    what: str,
    *,
    topic: str | None = None,
    partition: int | None = None,
    message: str | None = None,
) -> GatewayError | None:
    """The ``GatewayError`` for a Kafka error code in a response; None for 0 (no error)."""
    if code == 0:
        return None
    cls = ke.for_code(code)
    exc = cls(message) if message else cls()
    if cls is ke.UnknownError:  # a code aiokafka does not know: keep the number for the operator
        exc = ke.UnknownError(f"Kafka error code {code}" + (f": {message}" if message else ""))
    return translate(exc, what, topic=topic, partition=partition)


def is_metadata_error(code: int) -> bool:
    """Whether an error code means our view of leaders or partitions is stale."""
    return code != 0 and bool(getattr(ke.for_code(code), "invalid_metadata", False))


def is_retriable(exc: BaseException) -> bool:
    """Whether ``exc`` leaves the producer and the data intact (a retry could succeed)."""
    return isinstance(exc, (*_UNAVAILABLE, TimeoutError)) or bool(getattr(exc, "retriable", False))


def is_broken_producer(exc: BaseException) -> bool:
    """Whether the broker refused ``exc``'s batch for the producer's own state (its sequence
    numbers, its id): nothing was written, and a new producer will be accepted."""
    return isinstance(exc, _BROKEN_PRODUCER)


def is_connection_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure to reach one broker, after which another may still answer."""
    return isinstance(exc, _TRY_NEXT)


def is_unknown_topic(code: int) -> bool:
    """Whether a topic-level error code says the topic does not exist."""
    return ke.for_code(code) is ke.UnknownTopicOrPartitionError


def not_ready(code: int) -> str | None:
    """The error's name when ``code`` says the topic exists but is not ready yet (no leader); else None."""
    if not code:
        return None
    cls = ke.for_code(code)
    return cls.__name__ if issubclass(cls, _NOT_READY) else None


def start_failure(
    exc: Exception, servers: str, *, idempotence: bool, timeout_ms: int, security: str = "PLAINTEXT"
) -> GatewayError:
    """The error of a Kafka log that could not start, in one line naming ``servers``.

    ``idempotence``: whether the producer asked for InitProducerId (a broker
    without it refuses in ways worth a hint); ``timeout_ms``: what bounded the start;
    ``security``: how the gateway signed in (``KafkaSecurity.describe``), named when the
    brokers refused it.
    """
    if idempotence and isinstance(exc, _NO_IDEMPOTENCE):
        return BackendError(
            f"The Kafka cluster at {servers} refused an idempotent producer ({one_line(exc)}); "
            "set BROKERGATE_KAFKA_IDEMPOTENCE=false for brokers without InitProducerId support."
        )
    if (refusal := _refusal(exc, security)) is not None:
        return BackendUnavailable(f"The Kafka cluster at {servers} {refusal}")
    plaintext = security == "PLAINTEXT"
    if isinstance(exc, TimeoutError):
        reason = f"no answer within {timeout_ms} ms"
    elif isinstance(exc, ke.KafkaConnectionError | ke.NodeNotReadyError | OSError) and plaintext:
        reason = "no bootstrap server accepted a connection"
    else:  # with credentials in play, how the connection failed (closed in the handshake, say) tells more
        reason = one_line(exc)
    where = servers if plaintext else f"{servers} ({security})"
    return BackendUnavailable(f"Cannot reach the Kafka cluster at {where}: {reason}")


def _refusal(exc: Exception, security: str) -> str | None:
    """What the brokers refused of the gateway's identity, if ``exc`` says so."""
    if isinstance(exc, ssl.SSLError):
        reason = failure_reason(exc)
        if "alert" in reason and "certificate" in reason:  # the broker's verdict on our certificate
            reason += (
                " (the brokers refused the gateway's client certificate, or want one: kafka_ssl_certfile)"
            )
        return f"failed the TLS handshake ({security}): {reason}"
    if isinstance(exc, _AUTH_REFUSED) or (isinstance(exc, KeyError) and "SCRAM" in security):
        # aiokafka's SCRAM reads the server's proof ("v") from a final message that, on refusal,
        # carries an error ("e") instead, and fails with KeyError: a refusal all the same.
        detail = "" if isinstance(exc, KeyError) else f": {one_line(exc)}"
        return f"refused the gateway's credentials ({security}){detail}"
    return None


def one_line(exc: BaseException) -> str:
    """``exc`` as one line of text that names its class."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if type(exc).__name__ in text else f"{type(exc).__name__}: {text}"


def corrupt_records(message: str) -> Exception:
    """What record decoding raises for a batch that fails its CRC (``translate`` words it)."""
    return ke.CorruptRecordException(message)


def no_broker_answered(servers: str) -> Exception:
    """What ``translate`` is given when no broker of ``servers`` answered in time."""
    return ke.NoBrokersAvailable(f"no broker of {servers} answered in time")
