"""Benchmark what measuring a body's JSON depth costs, as a ratio to parsing it with orjson.

    .venv/bin/python bench/json_depth.py [--mib 4] [--rounds 5]

Every JSON body a client sends is measured (``service.core.json_depth.exceeds``) before it is
parsed. This times the measure and ``orjson.loads`` on the same bodies, back to back in each
round, and prints the median over rounds of their ratio, and the measure's milliseconds per MiB:

- ``produce``: a json-format produce body, 10,000-record batches of small objects and strings;
- ``strings``: string values holding brackets, quotes and escapes (what the string pass cuts);
- ``chains-8``, ``chains-63``: arrays nested 8 and 63 deep side by side (the measure's costliest
  shapes, within the limit, so that it cannot stop early);
- ``too-deep``: one chain far past the limit.

The bodies that are not JSON objects are measured only (orjson refuses the deepest); their row
gives the measure's own cost.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import orjson

from service.core.json_depth import exceeds

LIMIT = 64


def bodies(mib: int) -> dict[str, bytes]:
    size = mib << 20
    record = {"key": "k", "value": {"a": [1, 2, {"b": "text"}], "c": "more text"}}
    produce = orjson.dumps({"records": [record] * 10_000})
    strings = orjson.dumps(['a[[{"\\' + "x" * 20] * (size // 34))
    return {
        "produce": b'{"records":[' + b",".join([produce[12:-2]] * max(1, size // len(produce))) + b"]}",
        "strings": strings,
        "chains-8": b"[" + b",".join([b"[" * 7 + b"]" * 7] * (size // 15)) + b"]",
        "chains-63": b"[" + b",".join([b"[" * 62 + b"]" * 62] * (size // 125)) + b"]",
        "too-deep": b"[" * (size // 2) + b"]" * (size // 2),
    }


def _timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=4, help="size of each body")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{'body':<10} {'MiB':>5} {'measure ms/MiB':>15} {'measure / orjson':>17}")
    for name, body in bodies(args.mib).items():
        mib = len(body) / (1 << 20)
        measures, ratios = [], []
        for _ in range(args.rounds):
            measure = _timed(lambda body=body: exceeds(body, LIMIT))  # type: ignore[misc]
            measures.append(measure * 1000 / mib)
            if name != "too-deep":
                ratios.append(measure / _timed(lambda body=body: orjson.loads(body)))  # type: ignore[misc]
        ratio = f"{statistics.median(ratios):.2f}" if ratios else "-"
        print(f"{name:<10} {mib:>5.1f} {statistics.median(measures):>15.1f} {ratio:>17}")


if __name__ == "__main__":
    main()
