"""What a job tells its user: progress lines while it runs, one summary line at the end.

Progress goes to stderr (``[export] planned 3 partitions, 12000 records``, then
task counts of the running Spark stages, polled from Spark's status tracker in
a background thread); the summary goes to stdout, so a scheduler's log or a
shell pipeline keeps it apart from Spark's own chatter.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final, TextIO

from pyspark.sql import SparkSession

POLL_S: Final = 1.0


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


@dataclass(slots=True)
class Summary:
    """The end-of-run numbers of one job."""

    job: str
    records: int = 0
    bytes: int | None = 0  # None where bytes mean nothing (the lag job counts records behind)
    duration_s: float = 0.0
    details: dict[str, object] = field(default_factory=dict)
    noun: str = "records"

    def line(self) -> str:
        size = "" if self.bytes is None else f", {self.bytes} bytes ({human_bytes(self.bytes)})"
        extra = "".join(f", {k}={v}" for k, v in self.details.items())
        return f"{self.job}: {self.records} {self.noun}{size} in {self.duration_s:.1f}s{extra}"


class Progress:
    """Progress and summary printer of one job run; ``started`` is when the run began."""

    def __init__(self, job: str, *, out: TextIO | None = None, summary_out: TextIO | None = None) -> None:
        self.job = job
        self._out = out
        self._summary_out = summary_out
        self.started = time.monotonic()

    def say(self, message: str) -> None:
        print(f"[{self.job}] {message}", file=self._out or sys.stderr, flush=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def finish(self, summary: Summary) -> Summary:
        summary.duration_s = self.elapsed()
        print(summary.line(), file=self._summary_out or sys.stdout, flush=True)
        return summary

    @contextmanager
    def tracking(self, spark: SparkSession, what: str, *, poll_s: float = POLL_S) -> Iterator[None]:
        """Report the task counts of Spark's active stages while the block runs."""
        stop = threading.Event()
        thread = threading.Thread(
            target=self._poll, args=(spark, what, stop, poll_s), name=f"{self.job}-progress", daemon=True
        )
        self.say(f"{what}...")
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(poll_s * 2)

    def _poll(self, spark: SparkSession, what: str, stop: threading.Event, poll_s: float) -> None:
        tracker = spark.sparkContext.statusTracker()
        last = ""
        while not stop.wait(poll_s):
            try:
                stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            except Exception:  # the context is stopping: progress is best effort
                return
            parts = [
                f"stage {s.stageId}: {s.numCompletedTasks}/{s.numTasks} tasks"
                + (f" ({s.numFailedTasks} failed)" if s.numFailedTasks else "")
                for s in stages
                if s is not None
            ]
            line = "; ".join(parts)
            if line and line != last:
                self.say(f"{what}: {line} ({self.elapsed():.0f}s)")
                last = line
