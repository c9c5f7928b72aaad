"""Durations and instants as users write them on the command line (``15m``, ``2h30m``, ``2024-05-01``).

Pure functions: the scheduler's ``--every`` and the stats job's window use them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART_RE: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(text: str) -> float:
    """Seconds in ``text``: one or more ``<number><unit>`` (ms, s, m, h, d), e.g. ``90s``, ``1h30m``.

    A bare number is seconds. Raises ``ValueError`` for anything else, and for zero.
    """
    value = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        seconds = float(value)
    else:
        pos, seconds = 0, 0.0
        for match in _PART_RE.finditer(value):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if pos != len(value) or not value:
            raise ValueError(f"{text!r} is not a duration like 30s, 15m, 2h or 1h30m")
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a positive duration")
    return seconds


def parse_instant(text: str, *, now: datetime) -> datetime:
    """An aware UTC datetime: ``now``, ISO 8601, or a duration ago (``24h``).

    A date alone is its midnight, and a time without an offset is taken as UTC.
    Raises ``ValueError``.
    """
    value = text.strip()
    if value.lower() == "now":
        return now
    try:
        return now - timedelta(seconds=parse_duration(value))
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is neither an ISO 8601 time nor a duration ago like 24h") from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
