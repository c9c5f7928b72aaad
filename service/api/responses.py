"""OpenAPI declarations of the answers routes give: errors, refusals of Accept and bodies, records."""

from __future__ import annotations

from typing import Any

from api_schemas.v2 import ErrorBody
from service.wire.formats import FORMATS, V2, content_type_for

_ERROR = {"model": ErrorBody}

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {**_ERROR, "description": "Unknown topic (40401), partition (40402), instance (40403) or group."},
    415: {**_ERROR, "description": "Unsupported Content-Type."},
    422: {**_ERROR, "description": "Invalid request (42201-42208)."},
    503: {**_ERROR, "description": "A backend is unavailable; retry after Retry-After seconds."},
}

CONSUMER_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    406: {**_ERROR, "description": "Accept does not match the instance's format (40601)."},
    409: {**_ERROR, "description": "Instance exists (40902) or illegal state (40903)."},
}

# Only when quotas are configured (BROKERGATE_QUOTA_*).
THROTTLED: dict[int | str, dict[str, Any]] = {
    429: {
        **_ERROR,
        "description": "A produce or consume quota of this client or topic is used up (42901); "
        "retry after Retry-After seconds.",
        "headers": {
            "Retry-After": {
                "description": "Whole seconds until the quota admits a request again.",
                "schema": {"type": "integer", "minimum": 1},
            }
        },
    },
}

PRODUCE_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    413: {**_ERROR, "description": "Request body or a record is over the size limit."},
    **THROTTLED,
}

# A route that checks Accept (``accept``) lists NOT_ACCEPTABLE, a produce route BAD_BODY too.
NOT_ACCEPTABLE: dict[int | str, dict[str, Any]] = {
    406: {"model": ErrorBody, "description": "Accept allows none of the route's media types (406)."}
}
BAD_BODY: dict[int | str, dict[str, Any]] = {
    400: {
        "model": ErrorBody,
        "description": "A body Confluent's proxy cannot bind (not JSON, records that are not a list "
        "of objects) or a key or value it cannot serialize (bad base64, a value its schema refuses): "
        "error code 400.",
    }
}


def records_doc(schema: dict[str, Any]) -> dict[str, Any]:
    """The 200 response of a route that returns records, in every embedded format's media type
    (the Accept header, or the consumer's format, picks one); ``schema`` is the body's schema."""
    types = [V2, *(content_type_for(fmt) for fmt in FORMATS)]  # V2: binary, as Confluent's proxy
    return {"content": {media_type: {"schema": schema} for media_type in types}}
