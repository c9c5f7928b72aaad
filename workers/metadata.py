"""Rebalances groups when a subscribed topic gains partitions or a new topic matches a pattern."""

from __future__ import annotations

import asyncio

from service.core.groups import GroupManager

from .loop import Periodic


def metadata_watcher(
    groups: GroupManager, interval_ms: int, *, wake: asyncio.Event | None = None
) -> Periodic:
    """Every ``interval_ms``, and at once whenever ``wake`` is set (a topic was auto-created)."""
    return Periodic("metadata", interval_ms / 1000, groups.refresh, wake=wake)
