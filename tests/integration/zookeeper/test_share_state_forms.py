"""The form the ZooKeeper coordinator writes share-partition states in: the previous version's.

Replicas of two versions share one ZooKeeper during a rolling update. The previous version reads
and writes a state as a row per record in flight (``{"start", "end", "records"}``); this one keeps
runs of records (``SharePartition.to_json``) but writes, through ZooKeeper, that same row form, byte
for byte as the previous version would, and reads both. Here: what lands in the znode after polls
and acknowledgements through ``ShareGroups``, a state an older replica wrote taking changes, and the
size bounds applied to what is written.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from kazoo.client import KazooClient

from service.adapters.embedded.log import EmbeddedLog
from service.adapters.share_states import ShareStoreLimits, encode_state
from service.adapters.zookeeper import ZooKeeperCoordinator
from service.core.models import NewRecord, TopicPartition
from service.core.shares.delivery import AckType, ShareLimits
from service.core.shares.service import Acknowledgement, ShareGroups
from service.core.shares.state import SharePartition
from service.errors import ShareStateTooLarge

from .conftest import CoordinatorFactory

TP = TopicPartition("jobs", 0)
ZNODE = "/brokergate/share-groups/workers/jobs/0"
LIMITS = ShareLimits(max_in_flight=50, delivery_limit=3, lock_ms=1000)
NOW_S = 1_000_000.0  # the test's clock: locks end at NOW_S * 1000 + lock_ms


@pytest.fixture
async def log(tmp_path: Path) -> AsyncIterator[EmbeddedLog]:
    embedded = EmbeddedLog(tmp_path / "log")
    await embedded.start()
    await embedded.create_topic("jobs", 1, 1, {})
    await embedded.append(TP, [NewRecord(None, f"job-{i}".encode()) for i in range(20)])
    try:
        yield embedded
    finally:
        await embedded.stop()


def groups(log: EmbeddedLog, coord: ZooKeeperCoordinator) -> ShareGroups:
    return ShareGroups(log, coord, limits=LIMITS, clock=lambda: NOW_S)


def previous_versions_form(sp: SharePartition) -> dict[str, Any]:
    """What the previous version's ``to_json`` gave: a row per record in flight, ascending."""
    rows = [
        [o, r.state.value, r.deliveries, r.owner, r.lock_until_ms, r.error] for o, r in sp.records.items()
    ]
    return {"start": sp.start, "end": sp.end, "records": rows}


def assert_row_form(data: bytes) -> dict[str, Any]:
    """``data`` is a state as the previous version wrote it: its keys, a row per record in flight
    in offset order, compact JSON as ``share_states`` encodes it; and the layout's format, a
    field the previous version ignores."""
    state = json.loads(data)
    assert list(state) == ["start", "end", "records", "format"]
    assert state.pop("format") == 1
    offsets = [row[0] for row in state["records"]]
    assert all(len(row) == 6 for row in state["records"])
    assert offsets == sorted(set(offsets))
    assert (
        data
        == encode_state({**state, "format": 1}, "a test")
        == orjson.dumps({**previous_versions_form(SharePartition.from_json(state)), "format": 1})
    )
    return state


async def test_polls_and_acknowledgements_write_a_row_per_record(
    log: EmbeddedLog, coord: ZooKeeperCoordinator, raw: KazooClient
) -> None:
    share = groups(log, coord)
    got, _ = await share.acquire(
        "workers", "m1", [TP], max_records=500, max_bytes=1 << 20, wait_ms=0, start_at="earliest"
    )
    assert [d.record.offset for d in got] == list(range(20))  # one run acquired, stored as 20 rows
    state = assert_row_form(raw.get(ZNODE)[0])
    until = int(NOW_S * 1000) + LIMITS.lock_ms
    assert state == {
        "start": 0,
        "end": 20,
        "records": [[o, "ACQUIRED", 1, "m1", until, None] for o in range(20)],
    }

    refused, _ = await share.acknowledge(
        "workers",
        "m1",
        [
            Acknowledgement(TP, tuple(range(0, 5)), AckType.ACCEPT),
            Acknowledgement(TP, (7, 8), AckType.RELEASE, "flaky"),
            Acknowledgement(TP, tuple(range(10, 20)), AckType.ACCEPT),
        ],
    )
    assert not refused
    state = assert_row_form(raw.get(ZNODE)[0])
    held = [[o, "ACQUIRED", 1, "m1", until, None] for o in (5, 6, 9)]
    released = [[o, "AVAILABLE", 1, None, 0, "flaky"] for o in (7, 8)]
    assert state == {"start": 5, "end": 20, "records": sorted(held + released)}

    # A reset stores the state whole (``store_share_states``): the same form.
    await share.reset("workers", [TP], {TP: 3})
    assert assert_row_form(raw.get(ZNODE)[0]) == {"start": 3, "end": 3, "records": []}


async def test_a_state_an_older_replica_wrote_takes_changes_and_stays_in_its_form(
    log: EmbeddedLog, coord: ZooKeeperCoordinator, raw: KazooClient
) -> None:
    far = 2 * 10**12
    older = {
        "start": 0,
        "end": 4,
        "records": [
            [0, "ACQUIRED", 1, "old-member", 5, None],  # its lock is long over
            [1, "AVAILABLE", 1, None, 0, "boom"],
            [2, "ACQUIRED", 1, "old-member", far, None],  # still held by a member of the older replica
            [3, "ACQUIRED", 2, "old-member", far, "again"],
        ],
    }
    raw.create(ZNODE, orjson.dumps(older), makepath=True)  # as the previous version writes it
    share = groups(log, coord)
    got, _ = await share.acquire("workers", "m1", [TP], max_records=4, max_bytes=1 << 20, wait_ms=0)
    assert [(d.record.offset, d.deliveries) for d in got] == [(0, 2), (1, 2), (4, 1), (5, 1)]
    refused, _ = await share.acknowledge("workers", "m1", [Acknowledgement(TP, (0, 1, 4), AckType.ACCEPT)])
    assert not refused

    data, stat = raw.get(ZNODE)
    assert stat.version == 2  # the older replica's state, changed twice in place
    until = int(NOW_S * 1000) + LIMITS.lock_ms
    assert assert_row_form(data) == {
        "start": 2,
        "end": 6,
        "records": [*older["records"][2:], [5, "ACQUIRED", 1, "m1", until, None]],
    }


async def test_the_size_bounds_apply_to_the_rows_written(
    zk_url: str, make_coordinator: CoordinatorFactory, raw: KazooClient
) -> None:
    """A poll of 100 records is one run (tens of bytes) but 100 rows (thousands): the bound on a
    state is of what ZooKeeper holds, as the previous version's was."""
    small = make_coordinator(zk_url, node_id="small", share_limits=ShareStoreLimits(max_state_bytes=2000))
    await small.start()
    sp = SharePartition(0)
    sp.acquire("m1", 1_000, max_records=100, log_offsets=range(100))
    assert len(encode_state(sp.to_json(), "runs")) < 200
    with pytest.raises(ShareStateTooLarge, match="more than the 2000"):
        await small.store_share_states("workers", {TP: (sp.to_json(), -1)})
    assert await small.share_states("workers") == {}

    fits = SharePartition(0)
    fits.acquire("m1", 1_000, max_records=10, log_offsets=range(10))
    fits.stored()
    assert await small.store_share_states("workers", {TP: (fits.to_json(), -1)})
    fits.acquire("m1", 1_000, max_records=90, log_offsets=range(10, 100))
    with pytest.raises(ShareStateTooLarge, match="more than the 2000"):  # a change made whole, then bounded
        await small.change_share_states("workers", {TP: (fits.change_json(), 0)})
    assert len(assert_row_form(raw.get(ZNODE)[0])["records"]) == 10
