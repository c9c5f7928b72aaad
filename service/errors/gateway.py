"""``GatewayError``, the root every error of brokergate derives from, and the REST proxy's errors.

Each class says its HTTP status, its Confluent ``error_code`` (``ErrorCode``) and whether a client
may retry it; ``service.api.error_handlers`` turns any of them into Confluent's body.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Confluent REST Proxy error codes, plus brokergate's own in the same scheme."""

    BAD_REQUEST = 40001
    INVALID_CONSUMER_CONFIG_CONSTRAINT = 40001  # Confluent's Errors: a config outside its range
    TOPIC_EXISTS = 40002
    UNAUTHORIZED = 40101
    FORBIDDEN = 40301
    NOT_FOUND = 404  # Jersey's own errors: rest-utils answers the status as the code
    TOPIC_NOT_FOUND = 40401
    PARTITION_NOT_FOUND = 40402
    CONSUMER_INSTANCE_NOT_FOUND = 40403
    LEADER_NOT_AVAILABLE = 40404
    GROUP_NOT_FOUND = 40405
    METHOD_NOT_ALLOWED = 405
    REQUEST_TIMEOUT = 40801
    CONSUMER_FORMAT_MISMATCH = 40601
    NOT_ACCEPTABLE = 406  # Jersey's NotAcceptableException: rest-utils' mapper gives the status
    CONSUMER_ALREADY_SUBSCRIBED = 40901
    CONSUMER_ALREADY_EXISTS = 40902
    ILLEGAL_STATE = 40903
    PAYLOAD_TOO_LARGE = 41301
    UNSUPPORTED_MEDIA_TYPE = 415
    HEADERS_TOO_LARGE = 43101
    KEY_SCHEMA_MISSING = 42201
    VALUE_SCHEMA_MISSING = 42202
    CONVERSION = 42203
    INVALID_CONSUMER_CONFIG = 42204
    INVALID_SCHEMA = 42205
    INVALID_REQUEST = 42206
    UNPROCESSABLE = 422  # rest-utils' RestConstraintViolationException's default code: the status
    INVALID_TOPIC = 42207
    SERIALIZATION = 42207  # Confluent's proxy: a key or value its schema cannot serialize with
    INVALID_TOPIC_CONFIG = 42208
    THROTTLED = 42901
    INTERNAL = 50001
    BACKEND = 50002
    BACKEND_RETRIABLE = 50003
    UNAVAILABLE = 50301


class GatewayError(Exception):
    """Root of every error a client can see."""

    http_status: int = 500
    error_code: int = ErrorCode.INTERNAL
    retriable: bool = False
    default_message: str = "Internal server error."

    def __init__(self, message: str | None = None, *, retry_after: float | None = None) -> None:
        super().__init__(message or self.default_message)
        self.message = message or self.default_message
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message


class TopicExists(GatewayError):
    http_status = 400
    error_code = ErrorCode.TOPIC_EXISTS
    default_message = "Topic already exists."


class Forbidden(GatewayError):
    """Authenticated, but the ACL bindings do not allow the operation (Kafka's ``*_AUTHORIZATION_FAILED``)."""

    http_status = 403
    error_code = ErrorCode.FORBIDDEN
    default_message = "Not authorized."


class NotFound(GatewayError):
    """A resource that is not there; the subclasses are Confluent's codes for which one, this
    the status as the code, as rest-utils answers Jersey's NotFoundException."""

    http_status = 404
    error_code = ErrorCode.NOT_FOUND
    default_message = "Not found."


class TopicNotFound(NotFound):
    error_code = ErrorCode.TOPIC_NOT_FOUND
    default_message = "Topic not found."


class PartitionNotFound(NotFound):
    error_code = ErrorCode.PARTITION_NOT_FOUND
    default_message = "Partition not found."


class ConsumerInstanceNotFound(NotFound):
    """No such instance for the caller: none, expired, another principal's, or of the other kind
    (a share consumer where a consumer is asked for). One answer, byte for byte, whatever the cause
    and whoever raises it: Confluent's sentence, then the group and the instance as the caller
    named them (its own words, so they tell nobody which instances exist), and nothing else."""

    error_code = ErrorCode.CONSUMER_INSTANCE_NOT_FOUND
    default_message = "Consumer instance not found."

    def __init__(self, group: str, name: str, *, retry_after: float | None = None) -> None:
        super().__init__(
            f"Consumer instance not found: group {group!r}, instance {name!r}.", retry_after=retry_after
        )
        self.group = group
        self.name = name


class GroupNotFound(NotFound):
    error_code = ErrorCode.GROUP_NOT_FOUND
    default_message = "Consumer group not found."


class ConsumerFormatMismatch(GatewayError):
    http_status = 406
    error_code = ErrorCode.CONSUMER_FORMAT_MISMATCH
    default_message = (
        "The requested embedded data format does not match the deserializer for this consumer instance"
    )


class NotAcceptable(GatewayError):
    http_status = 406
    error_code = ErrorCode.NOT_ACCEPTABLE
    default_message = "None of the media types in Accept can be produced."


class ConsumerAlreadyExists(GatewayError):
    http_status = 409
    error_code = ErrorCode.CONSUMER_ALREADY_EXISTS
    default_message = "Consumer with specified consumer ID already exists in the specified consumer group."


class IllegalState(GatewayError):
    http_status = 409
    error_code = ErrorCode.ILLEGAL_STATE
    default_message = "Illegal state."

    def __init__(self, message: str | None = None, **kw: float | None) -> None:
        super().__init__(f"Illegal state: {message}" if message else None, **kw)


class OffsetOutOfRange(IllegalState):
    """A read at an offset outside a partition's offsets, with no reset policy to move it
    (Kafka's OffsetOutOfRangeException): the message names the partition, the offset and the
    partition's bounds."""

    def __init__(self, partition: str, offset: int, log_start: int, log_end: int, then: str = "") -> None:
        super().__init__(
            f"Offset {offset} is out of range for partition {partition} (log start {log_start}, "
            f"log end {log_end}){then}."
        )
        self.offset = offset
        self.log_start = log_start
        self.log_end = log_end


class PayloadTooLarge(GatewayError):
    http_status = 413
    error_code = ErrorCode.PAYLOAD_TOO_LARGE
    default_message = "Request body is larger than the configured limit."


class UnsupportedMediaType(GatewayError):
    """A Content-Type the route does not read: Jersey's NotSupportedException under Confluent's
    proxy, the status as the code (rest-utils' WebApplicationExceptionMapper)."""

    http_status = 415
    error_code = ErrorCode.UNSUPPORTED_MEDIA_TYPE
    default_message = "HTTP 415 Unsupported Media Type"


class InvalidPayload(GatewayError):
    """A request body or parameter that parses but makes no sense."""

    http_status = 422
    error_code = ErrorCode.INVALID_REQUEST
    default_message = "Invalid request."


class BadRequest(GatewayError):
    """A body Confluent's JSON binding or record serializer refuses: its 400, whose error_code is
    the status (Jackson's errors and the proxy's ``BadRequestException`` alike)."""

    http_status = 400
    error_code = 400
    default_message = "Bad Request"


class NotBase64(BadRequest):
    """A binary key or value that is no base64 string, in the words of Confluent's record
    serializer; the produce route adds why, when it read a generic Content-Type as binary."""


class SerializationError(InvalidPayload):
    """A produce request's schema the registry does not give for the topic (an unknown id, an id
    that is no version of the topic's subject, an inline schema the subject's compatibility
    refuses): Confluent's "Error serializing message." """

    error_code = ErrorCode.SERIALIZATION
    default_message = "Error serializing message."


class ConversionError(InvalidPayload):
    error_code = ErrorCode.CONVERSION
    default_message = "Cannot convert the data to or from the embedded format."


class KeySchemaMissing(InvalidPayload):
    error_code = ErrorCode.KEY_SCHEMA_MISSING
    default_message = "The records have keys but the request gives no key schema."


class ValueSchemaMissing(InvalidPayload):
    error_code = ErrorCode.VALUE_SCHEMA_MISSING
    default_message = "The records have values but the request gives no value schema."


class InvalidRecordSchema(InvalidPayload):
    """A produce request's key or value schema cannot be used (not the registry's 42201: on the
    v2 API that code means a missing key schema)."""

    error_code = ErrorCode.INVALID_SCHEMA
    default_message = "Invalid schema."


class InvalidConsumerConfig(InvalidPayload):
    error_code = ErrorCode.INVALID_CONSUMER_CONFIG
    default_message = "Invalid consumer configuration."


class ConsumerConfigConstraint(InvalidPayload):
    """A consumer config outside the range Confluent's proxy allows (``fetch.min.bytes``): its
    ``invalidConsumerConfigConstraintException``, 40001."""

    error_code = ErrorCode.INVALID_CONSUMER_CONFIG_CONSTRAINT
    default_message = "Invalid consumer configuration. It does not abide by the constraints."


class Unprocessable(InvalidPayload):
    """A value Confluent's request class refuses as it is built (a consumer's unknown ``format``):
    rest-utils' RestConstraintViolationException with its default code, the status."""

    error_code = ErrorCode.UNPROCESSABLE
    default_message = "Unprocessable entity"


class InvalidTopic(InvalidPayload):
    error_code = ErrorCode.INVALID_TOPIC
    default_message = "Invalid topic name."


class InvalidTopicConfig(InvalidPayload):
    error_code = ErrorCode.INVALID_TOPIC_CONFIG
    default_message = "Invalid topic configuration."


class ShareStateTooLarge(InvalidPayload):
    """A share-partition's delivery state, or one write of several, larger than a coordinator
    stores (records in flight, and the error texts kept with them, make a state's size)."""

    default_message = "A share-partition state is too large to store."


class Throttled(GatewayError):
    http_status = 429
    error_code = ErrorCode.THROTTLED
    retriable = True
    default_message = "Request rate is over the quota."


class BackendError(GatewayError):
    """A backend failed in a way a retry will not fix."""

    http_status = 500
    error_code = ErrorCode.BACKEND
    default_message = "Backend error."


class BackendUnavailable(GatewayError):
    """A backend is down or overloaded; the client should retry later."""

    http_status = 503
    error_code = ErrorCode.UNAVAILABLE
    retriable = True
    default_message = "Backend unavailable; retry later."

    def __init__(self, message: str | None = None, *, retry_after: float | None = 1.0) -> None:
        super().__init__(message, retry_after=retry_after)


class NewerFormat(BackendUnavailable):
    """Stored state written by a newer release, in a format this release cannot read.

    Never read as damage nor guessed at: at start it stops the gateway in one line; for state
    that replicas of several releases share (ZooKeeper, Redis) a request that meets it is
    refused as unavailable, retriable through a replica of the newer release.
    """

    def __init__(self, what: str, found: int, reads: int) -> None:
        super().__init__(
            f"{what} was written by a newer release (format {found}; this release reads up to {reads})"
        )
        self.what = what
        self.found = found
        self.reads = reads


class LockTimeout(BackendUnavailable):
    """A coordinator lock was not acquired in the time allowed (another holder kept it)."""

    default_message = "A lock was not acquired in time; retry later."
