"""What waiting clients cost: gateway CPU with idle long-polls and streams open, and a produce's latency.

    .venv/bin/python bench/idle.py [--polls 0,1000,10000] [--streams 0,1000,10000] [--window 10]
                                   [--samples 500] [--runs 1] [--log embedded|kafka]
                                   [--bootstrap host:port | --cluster]

For each number of idle long-polls (``--polls``) and each number of idle Server-Sent Events
streams (``--streams``), measured one kind at a time and then both at their largest, it starts a
fresh ``brokergate serve`` (the embedded log, or a Kafka log on Apache Kafka started here or
``--bootstrap``) with the limits on polls, streams, instances and connections raised as the
configuration page says, and:

  creates as many consumer instances, each alone in its group and subscribed to a topic nobody
  writes (so each owns its partition and waits on it);
  produces ``--samples`` single records to another topic, one at a time on one connection: the
  p50/p99 with nothing open (the reference);
  opens the long-polls (``GET …/records?timeout=`` the longest the gateway allows) and the
  streams (``Accept: text/event-stream``), one connection each, and waits for them to settle;
  samples the gateway process's CPU (``/proc/<pid>/stat``) over ``--window`` seconds, during
  which no poll's timeout runs out;
  produces ``--samples`` single records again with them all open, and times the first answer on
  a new connection (a new client must be served).

The holders are raw connections (``bench/httpload.py``'s client and a socket reading the stream),
as cheap a client as can be, so the client process costs the two cores as little as possible.
The machine's descriptor limit bounds how many can be opened: the script raises its own
``RLIMIT_NOFILE`` (the gateway inherits it) and says so if it cannot.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    BINARY,
    add_kafka_options,
    cpu_seconds,
    create_topic,
    kafka_bootstrap,
    produce_body,
    start_gateway,
)
from bench.httpload import Connection  # noqa: E402
from service.wire.formats import V2  # noqa: E402

EVENT_STREAM = "text/event-stream"
POLL_TIMEOUT_MS = 60_000  # the longest a poll may wait (CONSUMER_MAX_TIMEOUT_MS)
FDS = 65_536


def raise_fds() -> int:
    """Raise this process's descriptor limit (soft and hard, as root may) so the holders fit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for want in (FDS, hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
            return want
        except (ValueError, OSError):
            continue
    return soft


def limits_env(total: int) -> dict[str, str]:
    """The settings that bound polls, streams, instances and connections, raised past ``total``."""
    n = str(max(total, 1) + 100)
    names = (
        "MAX_OPEN_POLLS",
        "MAX_OPEN_POLLS_PER_PRINCIPAL",
        "MAX_OPEN_STREAMS",
        "MAX_OPEN_STREAMS_PER_PRINCIPAL",
        "MAX_INSTANCES",
        "MAX_INSTANCES_PER_PRINCIPAL",
        "MAX_CONNECTIONS",
        "MAX_CONNECTIONS_PER_ADDRESS",
    )
    return {f"BROKERGATE_{name}": n for name in names}


async def make_instances(http: httpx.AsyncClient, count: int, topic: str, tag: str) -> list[str]:
    """``count`` consumer instances, each alone in its group, subscribed to ``topic``: their paths."""
    paths: list[str] = []
    gate = asyncio.Semaphore(16)

    async def one(n: int) -> None:
        async with gate:
            r = await http.post(
                f"/consumers/idle-{tag}-{n}",
                json={"name": "c", "format": "binary", "auto.offset.reset": "latest"},
                headers={"Content-Type": V2},
            )
            assert r.status_code == 200, r.text
            path = "/" + r.json()["base_uri"].split("/", 3)[3]
            r = await http.post(
                f"{path}/subscription", json={"topics": [topic]}, headers={"Content-Type": V2}
            )
            assert r.status_code == 204, r.text
            paths.append(path)

    await asyncio.gather(*(one(n) for n in range(count)))
    return paths


async def hold_poll(port: int, path: str, answered: list[int]) -> None:
    """A long-poll held open; polls again each time it is answered (``answered`` counts them)."""
    async with Connection("127.0.0.1", port) as conn:
        request = conn.build("GET", f"{path}/records?timeout={POLL_TIMEOUT_MS}", accept=BINARY)
        while True:
            status, _ = await conn.send(request)
            answered[0] += 1
            if status != 200:
                await asyncio.sleep(1)


async def hold_stream(port: int, path: str, received: list[int], ended: list[str]) -> None:
    """An SSE stream held open, its bytes read and counted (keep-alives, its opening event); if it
    ends, the first line of its answer is added to ``ended``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = f"GET {path}/records HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {EVENT_STREAM}\r\n\r\n"
    writer.write(request.encode())
    head = b""
    try:
        while chunk := await reader.read(65536):
            head = head or chunk
            received[0] += len(chunk)
        ended.append(head.split(b"\r\n", 1)[0].decode(errors="replace") or "closed before answering")
    except ConnectionError as exc:
        ended.append(type(exc).__name__)
    finally:
        writer.close()


async def produce_latency(port: int, topic: str, samples: int) -> tuple[float, float, float, str]:
    """(first answer on a new connection, p50, p99) in ms of single-record produces, one at a time,
    and what failed: how many answered other than 200 (timed all the same), and the first's answer."""
    async with Connection("127.0.0.1", port) as conn:
        request = conn.build("POST", f"/topics/{topic}", produce_body(b"x" * 100, 1), BINARY)
        times = []
        failed, first_failure = 0, ""
        for _ in range(samples + 1):
            start = time.perf_counter()
            status, body = await conn.send(request)
            times.append((time.perf_counter() - start) * 1000)
            if status != 200:
                failed += 1
                first_failure = first_failure or f"{status} {body[:200].decode(errors='replace')}"
    first, rest = times[0], sorted(times[1:])
    failures = f"   {failed} produces failed, the first: {first_failure}" if failed else ""
    return first, rest[len(rest) // 2], rest[min(len(rest) - 1, int(len(rest) * 0.99))], failures


async def measure(polls: int, streams: int, args: argparse.Namespace, bootstrap: str | None) -> str:
    extra = () if bootstrap is None else ("--log", f"kafka://{bootstrap}")
    env = limits_env(polls + streams)
    case = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory() as tmp:
        gateway, port = start_gateway(Path(tmp), *extra, env=env)
        holders: list[asyncio.Task[None]] = []
        try:
            limits = httpx.Limits(max_connections=32)
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=60
            ) as http:
                # named afresh each case: on Kafka every case runs on the same broker
                idle, work = f"idle-{case}", f"work-{case}"
                await create_topic(http, idle)
                await create_topic(http, work)
                made = time.monotonic()
                poll_paths = await make_instances(http, polls, idle, "p")
                stream_paths = await make_instances(http, streams, idle, "s")
                made = time.monotonic() - made
            _, base50, base99, base_failures = await produce_latency(port, work, args.samples)
            answered, received = [0], [0]
            ended: list[str] = []
            opened = time.monotonic()
            for path in poll_paths:
                holders.append(asyncio.create_task(hold_poll(port, path, answered)))
            for path in stream_paths:
                holders.append(asyncio.create_task(hold_stream(port, path, received, ended)))
                if len(holders) % 500 == 0:
                    await asyncio.sleep(0)
            await asyncio.sleep(args.settle)
            answered_before = answered[0]
            cpu0, t0 = cpu_seconds(gateway.pid), time.monotonic()
            profiler = None
            if args.profile:  # a sampling profile of the gateway over the window (py-spy's raw format)
                out = f"{args.profile}-{polls}-{streams}.txt"
                cmd = [
                    str(Path(sys.executable).with_name("py-spy")),
                    "record",
                    "--pid",
                    str(gateway.pid),
                    "--duration",
                    str(int(args.window)),
                    "--format",
                    "raw",
                    "--output",
                    out,
                    "--nonblocking",
                ]
                profiler = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.DEVNULL)
            await asyncio.sleep(args.window)
            if profiler is not None:
                await profiler.wait()
            cpu = (cpu_seconds(gateway.pid) - cpu0) / (time.monotonic() - t0)
            early = answered[0] - answered_before
            first, p50, p99, failures = await produce_latency(port, work, args.samples)
            if time.monotonic() - opened > POLL_TIMEOUT_MS / 1000:
                print("  (warning: the polls' timeout ran out before the produce was measured)", flush=True)
            cycle = ""
            if polls and args.cycle:
                # From just before the polls' timeout until every poll was answered and asked
                # again: what that costs each, less what waiting costs for as long.
                await asyncio.sleep(max(0.0, opened + POLL_TIMEOUT_MS / 1000 - 2 - time.monotonic()))
                cpu1, t1, answered1 = cpu_seconds(gateway.pid), time.monotonic(), answered[0]
                deadline = opened + POLL_TIMEOUT_MS / 1000 + 60
                for _ in range(int((deadline - t1) * 2)):  # a sample of the counter each half second
                    if answered[0] - answered1 >= polls:
                        break
                    await asyncio.sleep(0.5)
                await asyncio.sleep(2)  # the last ones asked again
                spent = cpu_seconds(gateway.pid) - cpu1 - cpu * (time.monotonic() - t1)
                again = answered[0] - answered1
                each = spent / max(again, 1) * 1e6
                cycle = f"   each poll answered at its timeout and asked again: {each:.0f} µs ({again:,})"
            failed = [h for h in holders if h.done()]
            return (
                f"polls {polls:6,}  streams {streams:6,}   gateway CPU {cpu * 100:5.1f} % of a core   "
                f"produce p50 {p50:6.2f} ms  p99 {p99:7.2f} ms  "
                f"(none open: p50 {base50:5.2f}  p99 {base99:6.2f})  new client's first {first:7.2f} ms   "
                f"polls answered in window {early}  holders ended {len(failed)}  "
                f"instances made in {made:.1f} s"
                + cycle
                + (f"\n   streams ended: {dict(Counter(ended))}" if ended else "")
                + (f"\n   none open:{base_failures}" if base_failures else "")
                + (f"\n   all open:{failures}" if failures else "")
            )
        finally:
            for h in holders:
                h.cancel()
            await asyncio.gather(*holders, return_exceptions=True)
            gateway.terminate()
            gateway.wait(30)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--polls", default="0,1000,10000")
    parser.add_argument("--streams", default="0,1000,10000")
    parser.add_argument("--window", type=float, default=10.0, help="seconds of CPU sampling")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds between opening and sampling")
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--cycle",
        action="store_true",
        help="after the window, also measure what each long-poll costs when its timeout answers it "
        "and its client asks again (about a minute more per case)",
    )
    parser.add_argument(
        "--profile", metavar="PREFIX", help="record a py-spy profile of the gateway over each window"
    )
    parser.add_argument("--log", choices=("embedded", "kafka"), default="embedded")
    add_kafka_options(parser)
    args = parser.parse_args()
    fds = raise_fds()
    print(f"descriptor limit {fds:,}", flush=True)
    polls = [int(n) for n in args.polls.split(",")]
    streams = [int(n) for n in args.streams.split(",")]
    cases = [(n, 0) for n in polls] + [(0, m) for m in streams if m] + [(max(polls), max(streams))]
    cases = list(dict.fromkeys(cases))
    if args.log == "kafka":
        with kafka_bootstrap(args) as kafka:
            await run_cases(args, cases, fds, kafka.bootstrap)
    else:
        await run_cases(args, cases, fds, None)


async def run_cases(
    args: argparse.Namespace, cases: list[tuple[int, int]], fds: int, bootstrap: str | None
) -> None:
    for run in range(args.runs):
        print(f"== run {run + 1} on the {args.log} log ==", flush=True)
        for n, m in cases:
            if n + m + 512 > fds:
                print(
                    f"polls {n:6,}  streams {m:6,}   skipped: needs more descriptors than {fds:,}",
                    flush=True,
                )
                continue
            print(await measure(n, m, args, bootstrap), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
