"""``KeptStates``: a state kept decoded is the stored one while the coordinator's version says so,
is read again once another writer stored, and what is kept stays within its bound of records."""

from __future__ import annotations

from pathlib import Path

from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.core.models import TopicPartition
from service.core.shares.delivery import AckType, ShareLimits
from service.core.shares.kept import KeptStates
from service.core.shares.state import SharePartition

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


async def test_kept_states_are_fenced_by_version_and_bounded(tmp_path: Path) -> None:
    coord = EmbeddedCoordinator(tmp_path)
    await coord.start()
    try:
        limits = ShareLimits()
        small = KeptStates(coord, limits, max_records=15)
        stored: dict[TopicPartition, SharePartition] = {}
        for tp in (A, B):
            sp = stored[tp] = SharePartition(0)
            sp.acquire("m", 1000, max_records=10, log_offsets=range(10))
            assert await small.store("g", {tp: (sp, -1)}, [tp])
        # A's was let go to keep within 15 records: read again, as stored; B's is kept
        again = await small.load("g", [A, B])
        assert again[A][0] is not stored[A] and again[B][0] is stored[B]
        assert again[A][0].to_json() == (await coord.share_states("g"))[A][0]
        mine, other = KeptStates(coord, limits), KeptStates(coord, limits)
        [(b, version)] = (await mine.load("g", [B])).values()
        assert await mine.store("g", {B: (b, version)}, [])  # kept, unchanged
        [(kept, version)] = (await mine.load("g", [B])).values()
        assert kept is b and version == 0  # the very object: nothing read, nothing decoded
        assert await mine.store("g", {B: (b, version)}, [])
        # another writer settles one of B's records: the kept state is not the stored one any more
        [(theirs, version)] = (await other.load("g", [B])).values()
        assert theirs is not b
        theirs.acknowledge("m", [9], AckType.ACCEPT, 1001)
        assert await other.store("g", {B: (theirs, version)}, [B])
        [(fresh, version)] = (await mine.load("g", [B])).values()
        assert version == 1 and 9 not in fresh.records and fresh is not b
        # a write from a version that is not the stored one any more stores nothing
        b.acknowledge("m", [8], AckType.ACCEPT, 1001)
        assert not await mine.store("g", {B: (b, 0)}, [B])
        assert 8 in SharePartition.from_json((await coord.share_states("g"))[B][0]).records
    finally:
        await coord.stop()
