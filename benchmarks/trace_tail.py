"""Where a chief's exit → its job's Succeeded goes, from `bench_peer.py --trace DIR` (run by
hand):

    python benchmarks/trace_tail.py DIR [--slowest 5]

For every traced run in DIR (`<namespace>.controller.jsonl`, `<namespace>.jobs.json`), each
job's interval is cut at the controller's stamps: the chief's terminal pod event reaching the
controller's handler, the key handed to a worker, the Succeeded status write sent and answered,
and the bench's informer seeing Succeeded. Printed: p50/p99/max of each segment over the run's
jobs, and the timeline of the slowest jobs (every record of their key from 1 s before the exit,
with the event-loop lags and garbage collections in their interval).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path
from typing import Any

SEGMENTS = (
    "exit → pod event at the controller",
    "pod event → worker has the key",
    "worker → Succeeded write sent",
    "write sent → answered",
    "answered → bench sees Succeeded",
)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def analyse(controller: Path, jobs: Path, slowest: int) -> None:
    records = [json.loads(line) for line in controller.read_text().splitlines()]
    stamps: dict[str, list[float]] = json.loads(jobs.read_text())
    by_key: dict[str, list[list[Any]]] = {}
    machine: list[list[Any]] = []
    for r in records:
        if r[1] in ("lag", "gc"):
            machine.append(r)
        elif r[1] == "child":
            if r[2]:
                by_key.setdefault(r[2], []).append(r)
        else:
            by_key.setdefault(r[2], []).append(r)
    namespace = controller.name.split(".")[0]
    segments: dict[str, list[float]] = {s: [] for s in SEGMENTS}
    totals: list[tuple[float, str]] = []
    for job, (exited, done) in stamps.items():
        key = f"TensorFlowTrainingJob/{namespace}/{job}"
        rs = by_key.get(key, [])
        totals.append((done - exited, key))
        event = next(
            (r[0] for r in rs if r[1] == "child" and r[3] == "Pod" and r[5] == "Succeeded"), None
        )
        sent = next((r[0] for r in rs if r[1] == "write" and r[3] == "Succeeded"), None)
        answered = next((r[0] for r in rs if r[1] == "written" and r[3] == "Succeeded"), None)
        if event is None or sent is None or answered is None:
            continue
        got = max((r[0] for r in rs if r[1] == "get" and r[0] <= sent), default=event)
        cuts = [exited, event, max(event, got), sent, answered, done]
        for name, (a, b) in zip(SEGMENTS, itertools.pairwise(cuts), strict=True):
            segments[name].append(b - a)
    totals.sort(reverse=True)
    delays = [t for t, _ in totals]
    print(
        f"\n== {namespace}: {len(stamps)} jobs, exit → Succeeded p50 "
        f"{statistics.median(delays) * 1000:.0f} ms, p99 {_pct(delays, 0.99) * 1000:.0f} ms, "
        f"max {delays[0] * 1000:.0f} ms"
    )
    print("segment (ms)                           p50     p99     max")
    for name, values in segments.items():
        if values:
            print(
                f"{name:36} {statistics.median(values) * 1000:7.1f} "
                f"{_pct(values, 0.99) * 1000:7.1f} {max(values) * 1000:7.1f}"
            )
    lags = [r for r in machine if r[1] == "lag"]
    gcs = [r for r in machine if r[1] == "gc"]
    print(
        f"loop lags over 20 ms: {len(lags)} (max {max((r[2] for r in lags), default=0)} ms); "
        f"collections over 5 ms: {len(gcs)} (max {max((r[3] for r in gcs), default=0)} ms)"
    )
    for total, key in totals[:slowest]:
        exited, done = stamps[key.rsplit("/", 1)[1]]
        print(f"\n{key}: {total * 1000:.0f} ms (exit at 0)")
        shown = [r for r in by_key.get(key, []) if exited - 1.0 <= r[0] <= done + 0.1]
        shown += [r for r in machine if exited <= r[0] <= done]
        shown.append([done, "bench sees Succeeded"])
        for r in sorted(shown, key=lambda r: r[0]):
            print(f"  {(r[0] - exited) * 1000:8.1f} ms  {' '.join(map(str, r[1:]))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--slowest", type=int, default=5)
    args = parser.parse_args()
    for controller in sorted(args.dir.glob("*.controller.jsonl")):
        jobs = controller.with_name(controller.name.replace(".controller.jsonl", ".jobs.json"))
        if jobs.exists():
            analyse(controller, jobs, args.slowest)


if __name__ == "__main__":
    main()
