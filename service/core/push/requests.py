"""What a push request says, and what its answer means: body, headers, signature, verdict, back-off.

The body of every request is one JSON object::

    {"subscription": "orders-to-billing", "delivery_id": "…",
     "records": [{"topic": …, "key": …, "value": …, "partition": 0, "offset": 42,
                  "timestamp": …, "headers": […], "delivery_count": 1}, …]}

each record as a v2 consumer shows it in the subscription's format, in the order of its
partition. A receiver de-duplicates on (topic, partition, offset): they name one record of
the subscription for ever. ``delivery_id`` (also the ``webhook-id`` header) is the same on
every attempt of the same records, and differs once the subscription is re-created.

Headers: ``content-type: application/json``, ``user-agent``, the coordinates of the first
record (``brokergate-topic``, ``-partition``, ``-offset``) and how many records there are
(``brokergate-records``), ``brokergate-attempt``; then either the Standard Webhooks headers
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``: ``v1,`` and the base64 HMAC-SHA256
of ``id.timestamp.body`` under each secret, space-separated while a rotation has two), or
``authorization: Bearer …``.

A 2xx settles the records. 429, 408, 5xx, a redirect (never followed), a timeout, a refused
connection or a refused address is retried, after the endpoint's ``Retry-After`` if it gave
one (held within the back-off bounds), else after an exponential back-off from the minimum to
the maximum with jitter; any other 4xx goes to the dead-letter topic at once.

Pure, but for the clock and the random jitter its callers pass.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from enum import Enum
from typing import Final

import orjson

from ..models import TopicPartition
from .spec import SECRET_PREFIX, Auth, PushSpec, PushSubscription

USER_AGENT: Final = "brokergate-push/1"
_NO_RETRY_4XX_EXCEPT: Final = frozenset({408, 429})


class Verdict(Enum):
    SETTLE = "settle"
    RETRY = "retry"
    DEAD_LETTER = "dead-letter"


def verdict(status: int | None) -> Verdict:
    """What a request's answer means for its records (see the module docstring)."""
    if status is None:
        return Verdict.RETRY
    if 200 <= status < 300:
        return Verdict.SETTLE
    if 400 <= status < 500 and status not in _NO_RETRY_4XX_EXCEPT:
        return Verdict.DEAD_LETTER
    return Verdict.RETRY


def backoff_ms(spec: PushSpec, attempts: int, retry_after_ms: int | None, jitter: float) -> int:
    """How long to wait before attempt ``attempts + 1``: the endpoint's ``Retry-After`` if it gave
    one, else the minimum doubled per attempt made, times ``jitter`` (0.5 to 1); both held within
    [min_backoff_ms, max_backoff_ms]."""
    low, high = spec.min_backoff_ms, spec.max_backoff_ms
    if retry_after_ms is not None:
        return max(low, min(high, retry_after_ms))
    grown = low * (1 << min(max(attempts - 1, 0), 40))
    return max(low, min(high, int(grown * jitter)))


def delivery_id(
    sub: PushSubscription, first: tuple[TopicPartition, int], last: tuple[TopicPartition, int]
) -> str:
    """The id of a request carrying the records from ``first`` to ``last`` (topic-partition, offset):
    the same for every attempt of those records, the subscription's own (its uid)."""
    text = f"{sub.uid}\0{first[0].topic}\0{first[0].partition}\0{first[1]}\0"
    text += f"{last[0].topic}\0{last[0].partition}\0{last[1]}"
    return "msg_" + base64.b32encode(hashlib.sha256(text.encode()).digest()[:15]).decode().lower()


def body(sub: PushSubscription, delivery: str, records_array: bytes) -> bytes:
    """The request body: the subscription, the delivery id and the records (a JSON array, rendered)."""
    head = b'{"subscription":' + orjson.dumps(sub.name) + b',"delivery_id":' + orjson.dumps(delivery)
    return head + b',"records":' + records_array + b"}"


def headers(
    sub: PushSubscription,
    delivery: str,
    content: bytes,
    first: tuple[TopicPartition, int],
    count: int,
    attempt: int,
    now_ms: int,
) -> tuple[tuple[str, str], ...]:
    """The request's headers, signed (or with its bearer token) for ``content`` at ``now_ms``."""
    tp, offset = first
    out = [
        ("content-type", "application/json"),
        ("user-agent", USER_AGENT),
        ("brokergate-subscription", sub.name),
        ("brokergate-topic", tp.topic),
        ("brokergate-partition", str(tp.partition)),
        ("brokergate-offset", str(offset)),
        ("brokergate-records", str(count)),
        ("brokergate-attempt", str(attempt)),
    ]
    if sub.spec.auth is Auth.WEBHOOK:
        stamp = str(now_ms // 1000)
        out += [
            ("webhook-id", delivery),
            ("webhook-timestamp", stamp),
            ("webhook-signature", signature(sub.signing_secrets(now_ms), delivery, stamp, content)),
        ]
    elif sub.spec.auth is Auth.BEARER:
        out.append(("authorization", f"Bearer {sub.spec.token}"))
    return tuple(out)


def signature(secrets: Sequence[str], delivery: str, stamp: str, content: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,<base64 HMAC-SHA256>`` per secret, space-separated."""
    signed = f"{delivery}.{stamp}.".encode() + content
    return " ".join(
        "v1," + base64.b64encode(hmac.new(_key(secret), signed, hashlib.sha256).digest()).decode()
        for secret in secrets
    )


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))
