"""The one error hierarchy of brokergate.

Every error knows its HTTP status, its Confluent ``error_code`` and whether a
client may retry it. The API layer turns any ``GatewayError`` into the
Confluent body ``{"error_code": ..., "message": ...}``; adapters translate
their library's exceptions into these at the boundary.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Confluent REST Proxy error codes, plus brokergate's own in the same scheme."""

    BAD_REQUEST = 40001
    TOPIC_EXISTS = 40002
    UNAUTHORIZED = 40101
    FORBIDDEN = 40301
    NOT_FOUND = 40400
    TOPIC_NOT_FOUND = 40401
    PARTITION_NOT_FOUND = 40402
    CONSUMER_INSTANCE_NOT_FOUND = 40403
    LEADER_NOT_AVAILABLE = 40404
    GROUP_NOT_FOUND = 40405
    METHOD_NOT_ALLOWED = 40501
    REQUEST_TIMEOUT = 40801
    CONSUMER_FORMAT_MISMATCH = 40601
    NOT_ACCEPTABLE = 40602
    CONSUMER_ALREADY_SUBSCRIBED = 40901
    CONSUMER_ALREADY_EXISTS = 40902
    ILLEGAL_STATE = 40903
    PAYLOAD_TOO_LARGE = 41301
    UNSUPPORTED_MEDIA_TYPE = 41501
    HEADERS_TOO_LARGE = 43101
    KEY_SCHEMA_MISSING = 42201
    VALUE_SCHEMA_MISSING = 42202
    CONVERSION = 42203
    INVALID_CONSUMER_CONFIG = 42204
    INVALID_SCHEMA = 42205
    INVALID_REQUEST = 42206
    INVALID_TOPIC = 42207
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
    error_code = ErrorCode.CONSUMER_INSTANCE_NOT_FOUND
    default_message = "Consumer instance not found."


class GroupNotFound(NotFound):
    error_code = ErrorCode.GROUP_NOT_FOUND
    default_message = "Consumer group not found."


class ConsumerFormatMismatch(GatewayError):
    http_status = 406
    error_code = ErrorCode.CONSUMER_FORMAT_MISMATCH
    default_message = (
        "The requested embedded data format does not match the deserializer for this consumer instance."
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


class PayloadTooLarge(GatewayError):
    http_status = 413
    error_code = ErrorCode.PAYLOAD_TOO_LARGE
    default_message = "Request body is larger than the configured limit."


class UnsupportedMediaType(GatewayError):
    http_status = 415
    error_code = ErrorCode.UNSUPPORTED_MEDIA_TYPE
    default_message = "Unsupported Content-Type."


class InvalidPayload(GatewayError):
    """A request body or parameter that parses but makes no sense."""

    http_status = 422
    error_code = ErrorCode.INVALID_REQUEST
    default_message = "Invalid request."


class ConversionError(InvalidPayload):
    error_code = ErrorCode.CONVERSION
    default_message = "Cannot convert the data to or from the embedded format."


class InvalidConsumerConfig(InvalidPayload):
    error_code = ErrorCode.INVALID_CONSUMER_CONFIG
    default_message = "Invalid consumer configuration."


class InvalidTopic(InvalidPayload):
    error_code = ErrorCode.INVALID_TOPIC
    default_message = "Invalid topic name."


class InvalidTopicConfig(InvalidPayload):
    error_code = ErrorCode.INVALID_TOPIC_CONFIG
    default_message = "Invalid topic configuration."


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
