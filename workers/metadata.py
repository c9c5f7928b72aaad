"""Rebalances groups when a subscribed topic gains partitions or a new topic matches a pattern."""

from __future__ import annotations

from service.core.groups import GroupManager

from .loop import Periodic


def metadata_watcher(groups: GroupManager, interval_ms: int) -> Periodic:
    return Periodic("metadata", interval_ms / 1000, groups.refresh)
