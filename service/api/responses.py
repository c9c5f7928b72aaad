"""OpenAPI declarations of the error responses every route can give."""

from __future__ import annotations

from typing import Any

from api_schemas.v2 import ErrorBody

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
