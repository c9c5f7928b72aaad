"""How an ``InstanceState`` is stored in Redis: scalar hash fields plus one JSON body.

Pure functions, no I/O. The version, ``last_seen_ms`` and the instance timeout
are separate hash fields (see ``keys``) because the Lua scripts compare and
renew them; everything else is one compact JSON document (orjson), since a
poll loads and saves the whole state anyway and one field is the cheapest to
read, write and parse. Group and name are not in the body: they are the key.

The body carries the layout's ``format`` (``REDIS_FORMAT``; none is 1, as the
releases before it wrote); one of a newer format is refused as ``NewerFormat``,
never read as damage.

Body, for a subscribed instance with two positions::

    {"format": 1, "config": {"format": "json", "auto_offset_reset": "earliest", ...},
     "created_ms": 1700000000000, "owner": "User:alice", "generation": 3,
     "subscription": {"topics": ["orders"], "pattern": null},
     "manual": null,
     "positions": [["orders", 0, 42], ["orders", 1, 7]]}
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from service.core.acl import ANONYMOUS
from service.core.models import InstanceConfig, InstanceState, Subscription, TopicPartition

from ..format_versions import REDIS_FORMAT, check_version

__all__ = ["decode_state", "encode_state"]


def encode_state(state: InstanceState) -> bytes:
    """The JSON body of ``state`` (without version and ``last_seen_ms``, which are fields)."""
    c = state.config
    sub = state.subscription
    return _dumps(
        {
            "format": REDIS_FORMAT,
            "config": {
                "format": c.format,
                "auto_offset_reset": c.auto_offset_reset,
                "auto_commit": c.auto_commit,
                "fetch_min_bytes": c.fetch_min_bytes,
                "request_timeout_ms": c.request_timeout_ms,
                "instance_timeout_ms": c.instance_timeout_ms,
                "strategy": c.strategy,
                "kind": c.kind,
            },
            "created_ms": state.created_ms,
            "owner": state.owner,
            "generation": state.generation,
            "subscription": None if sub is None else {"topics": sub.topics, "pattern": sub.pattern},
            "manual": None if state.manual is None else [(tp.topic, tp.partition) for tp in state.manual],
            "positions": [(tp.topic, tp.partition, off) for tp, off in state.positions.items()],
        }
    )


def _dumps(doc: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(doc)
    except TypeError:
        # orjson refuses lone surrogates, which a regex pattern parsed from JSON can hold;
        # the standard library escapes them (\udXXX), which is still valid JSON.
        return json.dumps(doc, ensure_ascii=True, separators=(",", ":")).encode()


def _loads(body: bytes | str) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)  # what _dumps wrote for lone surrogates


def decode_state(
    group: str, name: str, version: bytes | str, last_seen_ms: bytes | str, body: bytes | str
) -> InstanceState:
    """The state stored for (group, name); ``ValueError`` if what is stored is not one,
    ``NewerFormat`` if a newer release stored it."""
    try:
        doc: dict[str, Any] = _loads(body)
        what = f"the stored state of consumer instance {name!r} in group {group!r}"
        check_version(what, doc.get("format", 1), REDIS_FORMAT)
        c = doc["config"]
        sub = doc["subscription"]
        manual = doc["manual"]
        return InstanceState(
            group,
            name,
            InstanceConfig(
                c["format"],
                c["auto_offset_reset"],
                c["auto_commit"],
                c["fetch_min_bytes"],
                c["request_timeout_ms"],
                c["instance_timeout_ms"],
                c["strategy"],
                c.get("kind", "consumer"),  # stored before share consumers
            ),
            int(doc["created_ms"]),
            int(last_seen_ms),
            None if sub is None else Subscription(tuple(sub["topics"]), sub["pattern"]),
            None if manual is None else [TopicPartition(t, p) for t, p in manual],
            int(doc["generation"]),
            {TopicPartition(t, p): off for t, p, off in doc["positions"]},
            int(version),
            str(doc.get("owner", ANONYMOUS)),  # stored before instances had owners
        )
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"stored state of consumer instance {name!r} in group {group!r} is unreadable"
        ) from exc
