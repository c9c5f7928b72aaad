"""The share groups' core path without HTTP: what a poll costs the gateway beside its transport.

    .venv/bin/python bench/share_core.py [--records 100000] [--members 4] [--partitions 4]
                                         [--max-records 500] [--rounds 3] [--format binary]

An embedded log and an embedded coordinator (fdatasync on, as served) in this process, one
``ShareGroups`` over them, as a gateway has: ``--members`` members of one share group read a
``--partitions``-partition topic of ``--records`` 100 B JSON values from the start, each polling
for ``--max-records`` records and accepting what it got piggy-backed on its next poll
(``ShareGroups.poll`` with the acknowledgements, as ``POST …/records`` does), the answer rendered
as the route renders it (``records_array`` of ``by_partition_run``). Reported per record, the
best of ``--rounds`` rounds (each a new group): the process's CPU (the journal's fdatasync
thread included), of which rendering, and the wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import json_values
from service.adapters.embedded.coordinator import EmbeddedCoordinator
from service.adapters.embedded.log import EmbeddedLog
from service.core.models import EmbeddedFormat, NewRecord, TopicPartition
from service.core.shares.delivery import AckType
from service.core.shares.service import Acknowledgement, ShareGroups, by_partition_run
from service.wire.records import records_array

TOPIC = "share-core"


def accepts(delivered: list[Any]) -> list[Acknowledgement]:
    """An ACCEPT per run of consecutive offsets of a partition (as a share consumer says it, in
    ranges): the client's side, kept light (a poll's records come partition by partition)."""
    acks = []
    tp, first, last = None, -1, -2
    for d in delivered:
        offset = d.record.offset
        if d.tp is not tp or offset != last + 1:
            if tp is not None:
                acks.append(Acknowledgement(tp, tuple(range(first, last + 1)), AckType.ACCEPT))
            tp, first = d.tp, offset
        last = offset
    if tp is not None:
        acks.append(Acknowledgement(tp, tuple(range(first, last + 1)), AckType.ACCEPT))
    return acks


async def one_round(
    shares: ShareGroups, tps: list[TopicPartition], args: argparse.Namespace, group: str
) -> tuple[float, float, float]:
    """CPU, rendering's CPU and wall seconds to read the whole topic once."""
    got = 0
    render = 0.0

    async def member(name: str) -> None:
        nonlocal got, render
        acks: list[Acknowledgement] = []
        while got < args.records:
            delivered, _, refused = await shares.poll(
                group,
                name,
                tps,
                max_records=args.max_records,
                max_bytes=args.max_records * 200,
                wait_ms=0,
                start_at="earliest",
                acks=acks,
            )
            assert not refused, refused
            started = time.process_time()
            records_array(args.format, by_partition_run(delivered))
            render += time.process_time() - started
            got += len(delivered)
            acks = accepts(delivered) if delivered else []
            if not delivered:
                await asyncio.sleep(0)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(member(f"m{n}") for n in range(args.members)))
    return time.process_time() - cpu, render, time.perf_counter() - wall


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--max-records", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--format", default="binary", choices=["binary", "json", "string"])
    args = parser.parse_args()
    fmt: EmbeddedFormat = args.format
    with tempfile.TemporaryDirectory() as tmp:
        log = EmbeddedLog(Path(tmp) / "log", flush="never")
        coordinator = EmbeddedCoordinator(Path(tmp) / "coordinator")
        await log.start()
        await coordinator.start()
        try:
            await log.create_topic(TOPIC, args.partitions, 1, {})
            tps = [TopicPartition(TOPIC, p) for p in range(args.partitions)]
            values = json_values(100, 1000)
            for n in range(args.records // 1000):
                await log.append(tps[n % args.partitions], [NewRecord(None, v) for v in values])
            shares = ShareGroups(log, coordinator)
            results = [await one_round(shares, tps, args, f"g{r}") for r in range(args.rounds)]
        finally:
            await coordinator.stop()
            await log.stop()
    cpu, render, wall = min(results)
    per = 1e6 / args.records
    print(
        f"share core path: {args.members} members, {args.partitions} partitions, {args.max_records} a poll, "
        f"accepted on the next poll, {fmt} answers; best of {args.rounds} rounds, per record:\n"
        f"  CPU {cpu * per:5.2f} us (rendering {render * per:4.2f} us), wall {wall * per:5.2f} us"
    )


if __name__ == "__main__":
    asyncio.run(main())
