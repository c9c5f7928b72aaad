"""The schema registry's errors: Confluent's registry codes (``RegistryErrorCode``), which reuse
some of the REST proxy's numbers for other things, under ``RegistryError``."""

from __future__ import annotations

from enum import IntEnum

from .gateway import GatewayError


class RegistryErrorCode(IntEnum):
    """Confluent schema-registry error codes.

    A numbering of its own, apart from ``ErrorCode``: the same number means something else
    there (40401 is a subject here, a topic in the REST proxy). 400, 406, 409 and 415 are the
    HTTP status used as the code, as Confluent's registry answers them.
    """

    BAD_REQUEST = 400
    NOT_ACCEPTABLE = 406
    INCOMPATIBLE_SCHEMA = 409
    UNSUPPORTED_MEDIA_TYPE = 415
    SUBJECT_NOT_FOUND = 40401
    VERSION_NOT_FOUND = 40402
    SCHEMA_NOT_FOUND = 40403
    SUBJECT_SOFT_DELETED = 40404
    SUBJECT_NOT_SOFT_DELETED = 40405
    VERSION_SOFT_DELETED = 40406
    VERSION_NOT_SOFT_DELETED = 40407
    SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
    SUBJECT_MODE_NOT_CONFIGURED = 40409
    INVALID_SCHEMA = 42201
    INVALID_VERSION = 42202
    INVALID_COMPATIBILITY_LEVEL = 42203
    INVALID_MODE = 42204
    OPERATION_NOT_PERMITTED = 42205
    REFERENCE_EXISTS = 42206
    INVALID_SUBJECT = 42208
    STORE_ERROR = 50001
    OPERATION_TIMEOUT = 50002


class RegistryError(GatewayError):
    """Root of the schema registry's errors: Confluent's registry codes (``RegistryErrorCode``)."""

    http_status = 500
    error_code = RegistryErrorCode.STORE_ERROR
    default_message = "Schema registry error."


class RegistryBadRequest(RegistryError):
    """A body that is not JSON, or not the JSON the route takes."""

    http_status = 400
    error_code = RegistryErrorCode.BAD_REQUEST
    default_message = "Unrecognized request body."


class RegistryNotAcceptable(RegistryError):
    http_status = 406
    error_code = RegistryErrorCode.NOT_ACCEPTABLE
    default_message = "HTTP 406 Not Acceptable"


class RegistryUnsupportedMediaType(RegistryError):
    http_status = 415
    error_code = RegistryErrorCode.UNSUPPORTED_MEDIA_TYPE
    default_message = "HTTP 415 Unsupported Media Type"


class SubjectNotFound(RegistryError):
    http_status = 404
    error_code = RegistryErrorCode.SUBJECT_NOT_FOUND
    default_message = "Subject not found."


class VersionNotFound(RegistryError):
    http_status = 404
    error_code = RegistryErrorCode.VERSION_NOT_FOUND
    default_message = "Version not found."


class SchemaNotFound(RegistryError):
    http_status = 404
    error_code = RegistryErrorCode.SCHEMA_NOT_FOUND
    default_message = "Schema not found"


class SubjectSoftDeleted(RegistryError):
    http_status = 404
    error_code = RegistryErrorCode.SUBJECT_SOFT_DELETED
    default_message = "Subject was soft deleted. Set permanent=true to delete permanently"


class SubjectNotSoftDeleted(RegistryError):
    http_status = 404
    error_code = RegistryErrorCode.SUBJECT_NOT_SOFT_DELETED
    default_message = "Subject was not deleted first before being permanently deleted"


class VersionSoftDeleted(RegistryError):
    http_status = 404
    error_code = RegistryErrorCode.VERSION_SOFT_DELETED
    default_message = "Version was soft deleted. Set permanent=true to delete permanently"


class VersionNotSoftDeleted(RegistryError):
    http_status = 404
    error_code = RegistryErrorCode.VERSION_NOT_SOFT_DELETED
    default_message = "Version was not deleted first before being permanently deleted"


class SubjectCompatibilityNotConfigured(RegistryError):
    http_status = 404
    error_code = RegistryErrorCode.SUBJECT_COMPATIBILITY_NOT_CONFIGURED
    default_message = "Subject does not have subject-level compatibility configured"


class SubjectModeNotConfigured(RegistryError):
    http_status = 404
    error_code = RegistryErrorCode.SUBJECT_MODE_NOT_CONFIGURED
    default_message = "Subject does not have subject-level mode configured"


class IncompatibleSchema(RegistryError):
    http_status = 409
    error_code = RegistryErrorCode.INCOMPATIBLE_SCHEMA
    default_message = "Schema being registered is incompatible with an earlier schema"


class InvalidSchemaError(RegistryError):
    http_status = 422
    error_code = RegistryErrorCode.INVALID_SCHEMA
    default_message = "Invalid schema"


class SchemaTooLarge(InvalidSchemaError):
    """A schema text over the registry's size limit."""

    http_status = 413
    default_message = "The schema is larger than the registry's limit."


class InvalidVersion(RegistryError):
    http_status = 422
    error_code = RegistryErrorCode.INVALID_VERSION
    default_message = 'Invalid version: allowed values are between [1, 2^31-1] and the string "latest"'


class InvalidCompatibilityLevel(RegistryError):
    http_status = 422
    error_code = RegistryErrorCode.INVALID_COMPATIBILITY_LEVEL
    default_message = (
        "Invalid compatibility level. Valid values are none, backward, forward, full, "
        "backward_transitive, forward_transitive, and full_transitive"
    )


class InvalidMode(RegistryError):
    http_status = 422
    error_code = RegistryErrorCode.INVALID_MODE
    default_message = "Invalid mode. Valid values are READWRITE and READONLY."


class OperationNotPermitted(RegistryError):
    """Refused by the mode (READONLY) or by one of the registry's limits."""

    http_status = 422
    error_code = RegistryErrorCode.OPERATION_NOT_PERMITTED
    default_message = "Operation not permitted."


class ReferenceExists(RegistryError):
    http_status = 422
    error_code = RegistryErrorCode.REFERENCE_EXISTS
    default_message = "One or more references exist to the schema."


class InvalidSubject(RegistryError):
    http_status = 422
    error_code = RegistryErrorCode.INVALID_SUBJECT
    default_message = "The specified subject is not valid."


class RegistryStoreError(RegistryError):
    """The registry's records could not be stored or read back as written."""

    http_status = 500
    error_code = RegistryErrorCode.STORE_ERROR
    default_message = "Error in the backend data store."


class RegistryTimeout(RegistryError):
    """A registry write did not end in time: the writer lock stayed held by another write, or
    other writers' records kept coming first. Confluent's 50002, retriable (503, Retry-After)."""

    http_status = 503
    error_code = RegistryErrorCode.OPERATION_TIMEOUT
    retriable = True
    default_message = "The operation timed out; retry later."

    def __init__(self, message: str | None = None, *, retry_after: float | None = 1.0) -> None:
        super().__init__(message, retry_after=retry_after)
